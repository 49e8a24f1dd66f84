"""PPO config: YAML defaults plus `key=value` overrides, validated before anything compiles."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml

import nexus_jax
from nexus_jax.cli import UserInputError, one_line

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "ppo.yaml"


class ConfigError(UserInputError, ValueError):
    """A config file, key or value cannot be used; the message names the file or key."""


def read_yaml(path: str | Path) -> dict:
    """A YAML mapping from `path`, or ConfigError naming the file: missing, unreadable, invalid YAML, not a mapping."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"config file {str(path)!r}: not found") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as e:
        raise ConfigError(f"config file {str(path)!r}: cannot be read ({type(e).__name__})") from None
    try:
        values = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or one_line(e)
        raise ConfigError(f"config file {str(path)!r}: invalid YAML{where}: {problem}") from None
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise ConfigError(f"config file {str(path)!r}: expected a mapping of config keys, got {type(values).__name__}")
    return values


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    name: str = "ppo-default"
    env_id: str = "nexus-v0"
    env: dict = dataclasses.field(default_factory=dict)
    seed: int = 0
    num_seeds: int = 1
    lr: float = 2.5e-4
    lrs: tuple = ()
    anneal_lr: bool = True
    num_envs: int = 32
    num_steps: int = 100
    total_timesteps: int = 400_000
    update_epochs: int = 4
    num_minibatches: int = 4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    reward_scale: float = 0.1
    normalize_advantages: bool = True
    hidden_size: int = 128
    num_layers: int = 2
    activation: str = "tanh"
    action_head: str = "factored"
    network: str = "mlp"  # mlp (flat obs) | entity (entity view, any N; train/entity_net.py)
    critic: str = "ippo"
    share_params: bool = True
    eval_episodes: int = 1000
    eval_seed: int = 12345
    progress: bool = True
    run_dir: str = "runs"
    snapshot_every: int = -1  # params kept every k updates into runs/<name>/snapshots/: -1 auto (~5), 0 off
    checkpoint_every: int = 0  # >0: train in chunks of this many updates, checkpointing after each (resumable); -1 auto
    num_devices: int = 1  # data-parallel devices: 1 = single device (default), 0 = all (jax.devices()), n = first n

    @property
    def num_updates(self) -> int:
        return self.total_timesteps // (self.num_envs * self.num_steps)

    @property
    def minibatch_size(self) -> int:
        return self.num_envs * self.num_steps // self.num_minibatches

    @property
    def sweep_lrs(self) -> tuple:
        """The learning rates trained side by side (one when `lrs` is empty)."""
        return tuple(self.lrs) if self.lrs else (self.lr,)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["lrs"] = list(self.lrs)
        return d


_CHOICES = {"activation": ("tanh", "relu"), "action_head": ("factored", "flat"), "critic": ("ippo", "mappo"),
            "network": ("mlp", "entity")}
_POSITIVE = {"reward_scale", "num_seeds", "num_envs", "num_steps", "total_timesteps", "update_epochs", "num_minibatches",
             "hidden_size", "num_layers", "eval_episodes", "lr"}
_NONNEGATIVE = {"ent_coef", "vf_coef", "max_grad_norm", "clip_eps", "num_devices"}
_UNIT = {"gamma", "gae_lambda"}


def _fail(key: str, msg: str):
    raise ConfigError(f"config key {key!r}: {msg}")


def _coerce(key: str, typ: Any, value: Any) -> Any:
    """Check `value` against the field's type (ints are accepted for floats, lists for tuples)."""
    if typ is bool:
        if not isinstance(value, bool):
            _fail(key, f"must be true or false, got {value!r}")
        return value
    if typ is int:
        if isinstance(value, bool) or not isinstance(value, int):
            _fail(key, f"must be an integer, got {value!r}")
        return value
    if typ is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            _fail(key, f"must be a number, got {value!r}")
        return float(value)
    if typ is str:
        if not isinstance(value, str):
            _fail(key, f"must be a string, got {value!r}")
        return value
    if typ is dict:
        if not isinstance(value, dict):
            _fail(key, f"must be a mapping, got {value!r}")
        return dict(value)
    if typ is tuple:
        if not isinstance(value, (list, tuple)):
            _fail(key, f"must be a list, got {value!r}")
        return tuple(value)
    raise AssertionError(typ)


_TYPES = {f.name: {"str": str, "int": int, "float": float, "bool": bool, "dict": dict, "tuple": tuple}[f.type]
          for f in dataclasses.fields(PPOConfig)}


def validate(values: dict) -> PPOConfig:
    """Build a PPOConfig from a flat dict, raising ConfigError naming the first bad key."""
    out = {}
    for key, value in values.items():
        if key not in _TYPES:
            _fail(key, f"unknown key (known: {sorted(_TYPES)})")
        out[key] = _coerce(key, _TYPES[key], value)
    cfg = PPOConfig(**out)
    for key, choices in _CHOICES.items():
        if getattr(cfg, key) not in choices:
            _fail(key, f"must be one of {choices}, got {getattr(cfg, key)!r}")
    for key in _POSITIVE:
        if not getattr(cfg, key) > 0:
            _fail(key, f"must be > 0, got {getattr(cfg, key)!r}")
    for key in _NONNEGATIVE:
        if not getattr(cfg, key) >= 0:
            _fail(key, f"must be >= 0, got {getattr(cfg, key)!r}")
    for key in _UNIT:
        if not 0.0 <= getattr(cfg, key) <= 1.0:
            _fail(key, f"must lie in [0, 1], got {getattr(cfg, key)!r}")
    if cfg.snapshot_every < -1:
        _fail("snapshot_every", f"must be -1 (auto), 0 (off) or a number of updates, got {cfg.snapshot_every!r}")
    for i, lr in enumerate(cfg.lrs):
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr > 0:
            _fail("lrs", f"entry {i} must be a number > 0, got {lr!r}")
    if (cfg.num_envs * cfg.num_steps) % cfg.num_minibatches:
        _fail("num_minibatches", f"must divide num_envs * num_steps = {cfg.num_envs * cfg.num_steps}")
    if cfg.checkpoint_every < -1:
        _fail("checkpoint_every", f"must be -1 (auto), 0 (off) or a number of updates, got {cfg.checkpoint_every!r}")
    if cfg.checkpoint_every > 0 and cfg.num_devices != 1:
        _fail("checkpoint_every", f"chunked, resumable training runs on one device; got num_devices="
                                  f"{cfg.num_devices} (set checkpoint_every=0 to train on several)")
    if cfg.num_updates < 1:
        _fail("total_timesteps", f"must be >= num_envs * num_steps = {cfg.num_envs * cfg.num_steps}")
    if not cfg.name or "/" in cfg.name or cfg.name in (".", ".."):
        _fail("name", f"must be a non-empty folder name, got {cfg.name!r}")
    if cfg.network == "entity":
        for key, need in (("action_head", "factored"), ("critic", "ippo"), ("share_params", True)):
            if getattr(cfg, key) != need:
                _fail(key, f"network=entity needs {key}={need!r} (one shared network, pointer target head, "
                           f"own-view critic); got {getattr(cfg, key)!r}")
    _check_env(cfg)
    return cfg


def _check_env(cfg: PPOConfig) -> None:
    """Build the env once (no compilation): an unknown env id or env param fails here, named."""
    if cfg.env_id not in nexus_jax.registered_envs():
        _fail("env_id", f"unknown env id {cfg.env_id!r} (registered: {nexus_jax.registered_envs()})")
    try:
        env = nexus_jax.make(cfg.env_id, **cfg.env)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"config key 'env': {one_line(e)}") from None
    if cfg.action_head == "factored" and not hasattr(env, "factored_action_masks"):
        _fail("action_head", f"env {cfg.env_id!r} has no factored action view; use action_head=flat")


def parse_overrides(args: list[str]) -> dict:
    """`["lr=1e-3", "env.num_agents=6"]` -> `{"lr": 0.001, "env": {"num_agents": 6}}` (values parsed as YAML)."""
    out: dict = {}
    for arg in args:
        if "=" not in arg:
            raise ConfigError(f"override {arg!r}: expected key=value")
        key, raw = arg.split("=", 1)
        key = key.strip()
        value = _numbers(parse_value(key, raw))
        if key.startswith("env."):
            out.setdefault("env", {})[key[4:]] = value
        else:
            out[key] = value
    return out


def parse_value(key: str, raw: str):
    """An override's value parsed as YAML (`1e-3`, `[1, 2]`, `true`), or ConfigError naming the key."""
    if not raw.strip():
        return ""
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError as e:
        raise ConfigError(f"override {key}={raw!r}: invalid YAML value ({getattr(e, 'problem', None) or one_line(e)})") \
            from None


def _numbers(value):
    """YAML 1.1 reads `1e-3` as a string; turn numeric strings (also inside lists) into floats."""
    if isinstance(value, list):
        return [_numbers(v) for v in value]
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def resolve_checkpoint_every(cfg: PPOConfig) -> PPOConfig:
    """`checkpoint_every=-1` (auto) made concrete: 4 chunks of updates on one device (a checkpoint after
    each, so Ctrl-C keeps the last), 0 (one compiled program, not resumable) on several."""
    if cfg.checkpoint_every != -1:
        return cfg
    every = max(1, cfg.num_updates // 4) if cfg.num_devices == 1 else 0
    return dataclasses.replace(cfg, checkpoint_every=every)


def load_config(path: str | Path | None = None, overrides: dict | list | None = None) -> PPOConfig:
    """Defaults from YAML (`configs/ppo.yaml` when `path` is None), then overrides; validated."""
    values = read_yaml(path or DEFAULT_CONFIG)
    values = {k: _numbers(v) if k in ("lr", "lrs") else v for k, v in values.items()}
    if isinstance(overrides, list):
        overrides = parse_overrides(overrides)
    for key, value in (overrides or {}).items():
        if key == "env" and isinstance(value, dict) and isinstance(values.get("env"), dict):
            values["env"] = {**values["env"], **value}
        else:
            values[key] = value
    return validate(values)


def save_config(cfg: PPOConfig, path: str | Path) -> None:
    with open(path, "w") as f:
        yaml.safe_dump(cfg.to_dict(), f, sort_keys=False)
