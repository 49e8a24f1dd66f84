"""Configs: one dataclass per algorithm (`ppo`, `bc`, `grpo`, and the `pipeline` that runs them), read by one
mechanism (`base`: YAML defaults, `key=value` overrides, every key and value checked and named in errors)."""
from train.config.base import ConfigError, build, parse_overrides, read_yaml
from train.config.bc import BCConfig
from train.config.grpo import GRPOConfig
from train.config.pipeline import PipelineConfig, load_pipeline_config, pipeline_values
from train.config.ppo import PPOConfig, load_config, resolve_checkpoint_every, save_config, validate

__all__ = ["BCConfig", "ConfigError", "GRPOConfig", "PPOConfig", "PipelineConfig", "build", "load_config",
           "load_pipeline_config", "parse_overrides", "pipeline_values", "read_yaml", "resolve_checkpoint_every",
           "save_config", "validate"]
