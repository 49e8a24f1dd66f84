"""The pipeline's config (`python -m train.pipeline`, configs/pipeline.yaml): top-level keys and a section per stage."""
from __future__ import annotations

import dataclasses
from typing import Optional

from nexus_jax.registry import DEFAULT_ENV

from train.config.base import CONFIGS, ConfigError, build, check_env, check_logger, fail, numbers, parse_value, \
    read_yaml
from train.config.bc import BCConfig
from train.config.grpo import GRPOConfig
from train.config.ppo import CHOICES, PPOConfig

DEFAULT_PIPELINE = CONFIGS / "pipeline.yaml"
PIPELINE_NETWORKS = ("mlp", "entity")  # PPOConfig's networks with factored heads (slot scores the flat head)


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    """Top-level keys of configs/pipeline.yaml; sections `bc`, `grpo` and `ppo` are built by `build` too."""

    name: str = "pipeline"
    run_dir: str = "runs"
    seed: int = 0
    env_id: str = DEFAULT_ENV
    env: dict = dataclasses.field(default_factory=dict)
    hidden_size: int = 128
    num_layers: int = 2
    activation: str = "tanh"
    network: str = "mlp"  # every stage's policy: mlp (flat obs) | entity (entity view, any N; train/entity_net.py)
    memory: str = "none"  # every stage's policy: none | gru (a GRU core; train/memory.py)
    memory_size: int = 128  # memory=gru: the GRU's width
    eval_episodes: int = 500
    eval_seed: int = 12345
    xla_fast_compile: bool = True  # CPU: XLA's fast-compile flags (nexus_jax.xla_flags.FAST_COMPILE)
    num_devices: int = 1  # every stage's data-parallel devices, as PPO's key: 1 one device, 0 all (every process's)
    logger: str = "none"  # experiment tracking: none | tensorboard | wandb (runs BC, GRPO, PPO, evaluation)
    wandb_project: str = "nexus_jax"  # logger=wandb: the project; runs are grouped by `name`
    wandb_mode: str = "online"  # logger=wandb: online | offline
    bc: BCConfig = dataclasses.field(default_factory=BCConfig)
    grpo: GRPOConfig = dataclasses.field(default_factory=GRPOConfig)
    ppo: Optional[PPOConfig] = None  # built by load_pipeline_config (its env, network and budget are the pipeline's)

    def check(self, prefix: str = "") -> None:
        """Range checks of the top-level keys (`build` calls it); ConfigError naming `prefix + key`."""
        for key in ("activation", "memory"):
            if getattr(self, key) not in CHOICES[key]:
                fail(prefix + key, f"must be one of {CHOICES[key]}, got {getattr(self, key)!r}")
        if self.network not in PIPELINE_NETWORKS:
            fail(prefix + "network", f"must be one of {PIPELINE_NETWORKS}, got {self.network!r}")
        for key in ("hidden_size", "num_layers", "eval_episodes", "memory_size"):
            if not getattr(self, key) > 0:
                fail(prefix + key, f"must be > 0, got {getattr(self, key)!r}")
        if not self.num_devices >= 0:
            fail(prefix + "num_devices", f"must be >= 0, got {self.num_devices!r}")
        if not self.name or "/" in self.name or self.name in (".", ".."):
            fail(prefix + "name", f"must be a non-empty folder name, got {self.name!r}")
        check_logger(self, prefix)


PIPELINE_SECTIONS = ("bc", "grpo", "ppo")
# PPO keys the pipeline sets itself (same env, network and budget as GRPO).
PPO_FIXED = {"env_id", "env", "hidden_size", "num_layers", "activation", "network", "type_prior", "memory",
             "memory_size", "total_timesteps", "action_head", "critic", "share_params", "seed", "name", "run_dir",
             "progress", "num_seeds", "lrs", "num_devices", "logger", "wandb_project", "wandb_mode"}


def pipeline_values(path=None, overrides: list[str] | None = None) -> dict:
    """configs/pipeline.yaml (or `path`) with dotted `key=value` overrides applied (`bc.epochs=10`), unvalidated."""
    values = read_yaml(path or DEFAULT_PIPELINE)
    for arg in overrides or []:
        if "=" not in arg:
            raise ConfigError(f"override {arg!r}: expected key=value")
        key, raw = (x.strip() for x in arg.split("=", 1))
        head, _, rest = key.partition(".")
        value = numbers(parse_value(key, raw))
        if not rest:
            values[key] = value
        elif not isinstance(values.setdefault(head, {}), dict):
            raise ConfigError(f"config key {head!r} is not a section, got {values[head]!r}")
        else:
            values[head][rest] = value
    return values


def load_pipeline_config(path=None, overrides: list[str] | None = None) -> PipelineConfig:
    """YAML defaults (configs/pipeline.yaml) + dotted `key=value` overrides, validated before compiling.

    PPO trains with the pipeline's env and network and GRPO's env-step budget (rounded to whole updates).
    """
    values = pipeline_values(path, overrides)
    sections = {}
    for s in PIPELINE_SECTIONS:
        sections[s] = values.pop(s, {})
        if not isinstance(sections[s], dict):
            fail(s, f"must be a mapping, got {sections[s]!r}")
    top = build(PipelineConfig, values)
    bc = build(BCConfig, sections["bc"], "bc")
    if top.memory != "none" and bc.num_envs % bc.num_minibatches:
        fail("bc.num_minibatches", f"with memory={top.memory} a minibatch is whole env sequences: must divide "
                                   f"bc.num_envs = {bc.num_envs}")
    grpo = build(GRPOConfig, sections["grpo"], "grpo")
    bad = sorted(set(sections["ppo"]) & PPO_FIXED)
    if bad:
        fail(f"ppo.{bad[0]}", "set by the pipeline (same env, network and budget as GRPO)")
    env = check_env(top)  # the env's episode length decides GRPO's budget
    steps = grpo.episode_steps or int(env.default_params.max_steps)
    budget = grpo.num_updates * grpo.num_groups * grpo.group_size * steps
    fixed = {"env_id": top.env_id, "env": top.env, "hidden_size": top.hidden_size, "num_layers": top.num_layers,
             "activation": top.activation, "network": top.network, "memory": top.memory, "memory_size": top.memory_size,
             "seed": top.seed, "name": top.name, "progress": False, "num_devices": top.num_devices}
    probe = build(PPOConfig, {**sections["ppo"], **fixed, "total_timesteps": 10 ** 9}, "ppo")
    per_update = probe.num_envs * probe.num_steps
    ppo = build(PPOConfig, {**sections["ppo"], **fixed,
                            "total_timesteps": max(per_update, round(budget / per_update) * per_update)}, "ppo")
    return dataclasses.replace(top, bc=bc, grpo=grpo, ppo=ppo)
