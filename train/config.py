"""PPO config: YAML defaults plus `key=value` overrides, validated before anything compiles."""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Optional

import yaml

import nexus_jax
from nexus_jax.cli import UserInputError, one_line

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "ppo.yaml"
DEFAULT_PIPELINE = Path(__file__).resolve().parent.parent / "configs" / "pipeline.yaml"


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
    slot_scorer: bool = False  # flat head: one network scores every task slot's REQUEST actions (env.slot_layout)
    edf_prior: float = 0.0  # slot scorer: fixed logit offset on earliest deadline first's action (starts at EDF)
    edf_feature: bool = False  # slot scorer: EDF's pick (per slot) and its slot's features as inputs
    prior_rule: str = "edf"  # slot scorer: the rule edf_prior / edf_feature name: edf | edf_chain (needs
    #                          env.dependency_features; train.networks.rule_choice)
    prior_tight: float = 0.15  # edf_chain: slack feature (hours / episode hours) under which a task is tight (1.2 h)
    type_prior: tuple = ()  # factored head: fixed logit offsets on the action types, env order (() none); e.g.
    #                         an optimistic ACCEPT so early proposals meet acceptance (docs/research.md)
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
        d["type_prior"] = list(self.type_prior)
        return d

    def check(self, prefix: str = "") -> None:
        """Range and consistency checks (`build` calls it); ConfigError naming `prefix + key`."""
        fail = lambda key, msg: _fail(prefix + key, msg)  # noqa: E731
        for key, choices in _CHOICES.items():
            if getattr(self, key) not in choices:
                fail(key, f"must be one of {choices}, got {getattr(self, key)!r}")
        for key in _POSITIVE:
            if not getattr(self, key) > 0:
                fail(key, f"must be > 0, got {getattr(self, key)!r}")
        for key in _NONNEGATIVE:
            if not getattr(self, key) >= 0:
                fail(key, f"must be >= 0, got {getattr(self, key)!r}")
        for key in _UNIT:
            if not 0.0 <= getattr(self, key) <= 1.0:
                fail(key, f"must lie in [0, 1], got {getattr(self, key)!r}")
        if self.snapshot_every < -1:
            fail("snapshot_every", f"must be -1 (auto), 0 (off) or a number of updates, got {self.snapshot_every!r}")
        for i, lr in enumerate(self.lrs):
            if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr > 0:
                fail("lrs", f"entry {i} must be a number > 0, got {lr!r}")
        if (self.num_envs * self.num_steps) % self.num_minibatches:
            fail("num_minibatches", f"must divide num_envs * num_steps = {self.num_envs * self.num_steps}")
        if self.checkpoint_every < -1:
            fail("checkpoint_every", f"must be -1 (auto), 0 (off) or a number of updates, got {self.checkpoint_every!r}")
        if self.num_updates < 1:
            fail("total_timesteps", f"must be >= num_envs * num_steps = {self.num_envs * self.num_steps}")
        if not self.name or "/" in self.name or self.name in (".", ".."):
            fail("name", f"must be a non-empty folder name, got {self.name!r}")
        if self.network == "entity":
            for key, need in (("action_head", "factored"), ("critic", "ippo"), ("share_params", True)):
                if getattr(self, key) != need:
                    fail(key, f"network=entity needs {key}={need!r} (one shared network, pointer target head, "
                              f"own-view critic); got {getattr(self, key)!r}")
        env = _check_env(self, prefix)
        if self.slot_scorer and (self.action_head != "flat" or getattr(env, "slot_layout", None) is None):
            fail("slot_scorer", f"needs action_head=flat and an env with task slots (crisis-v0); got {self.env_id!r} "
                                f"with action_head={self.action_head}")
        if self.type_prior:
            if self.action_head != "factored" or self.network != "mlp":
                fail("type_prior", f"is an offset on the factored type head: needs action_head=factored and "
                                   f"network=mlp, got {self.action_head}/{self.network}")
            n_types = int(env.factored_action_spaces[env.agents[0]].nvec[0])
            if len(self.type_prior) != n_types or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in self.type_prior):
                fail("type_prior", f"must list {n_types} finite numbers (one per action type), got {list(self.type_prior)!r}")
        if self.edf_prior and not self.slot_scorer:
            fail("edf_prior", "is an offset on the slot scorer's logits: needs slot_scorer=true")
        if self.edf_feature and not self.slot_scorer:
            fail("edf_feature", "is an input of the slot scorer: needs slot_scorer=true")
        if self.prior_rule == "edf_chain" and (not self.slot_scorer or env.slot_layout[8] < 0):
            fail("prior_rule", "edf_chain reads the idle-unlocks feature: needs slot_scorer=true and "
                               "env.dependency_features=true")


_CHOICES = {"activation": ("tanh", "relu"), "action_head": ("factored", "flat"), "critic": ("ippo", "mappo"),
            "network": ("mlp", "entity"), "prior_rule": ("edf", "edf_chain")}
_POSITIVE = {"reward_scale", "num_seeds", "num_envs", "num_steps", "total_timesteps", "update_epochs", "num_minibatches",
             "hidden_size", "num_layers", "eval_episodes", "lr", "prior_tight"}
_NONNEGATIVE = {"edf_prior", "ent_coef", "vf_coef", "max_grad_norm", "clip_eps", "num_devices"}
_UNIT = {"gamma", "gae_lambda"}


def _fail(key: str, msg: str):
    raise ConfigError(f"config key {key!r}: {msg}")


_TYPE_NAMES = {"str": str, "int": int, "float": float, "bool": bool, "dict": dict, "tuple": tuple}


def _coerce(key: str, typ: Any, value: Any) -> Any:
    """Check `value` against the field's type: ints are accepted for floats, numeric strings too (YAML 1.1
    reads `1e-3` as a string), lists for tuples; anything else is a ConfigError naming `key`."""
    if typ is bool:
        if not isinstance(value, bool):
            _fail(key, f"must be true or false, got {value!r}")
        return value
    if typ is int:
        if isinstance(value, bool) or not isinstance(value, int):
            _fail(key, f"must be an integer, got {value!r}")
        return value
    if typ is float:
        value = _numbers(value)
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


def build(cls, values: dict, section: str = ""):
    """The one way a config section is read: a `cls` dataclass from a mapping, missing keys at the dataclass
    defaults; an unknown key or a value of the wrong type is a ConfigError naming `section.key`.
    Range checks are the dataclass's own `check()` (called here when it has one)."""
    prefix = f"{section}." if section else ""
    types = {f.name: _TYPE_NAMES.get(f.type, f.type) for f in dataclasses.fields(cls)}
    out = {}
    for key, value in values.items():
        if key not in types or not isinstance(types[key], type):
            _fail(prefix + key, f"unknown key (known: {sorted(k for k, t in types.items() if isinstance(t, type))})")
        out[key] = _coerce(prefix + key, types[key], value)
    cfg = cls(**out)
    if hasattr(cfg, "check"):
        cfg.check(prefix)
    return cfg


# ---- the pipeline's stages (train.bc, train.grpo) and the pipeline itself ------------------------

@dataclasses.dataclass(frozen=True)
class BCConfig:
    archetype: str = "reciprocator"  # NPC heuristic imitated in the learner seats
    num_envs: int = 64
    num_steps: int = 100  # collected steps per env (N = num_envs x num_steps samples)
    epochs: int = 30
    num_minibatches: int = 8
    lr: float = 1e-3
    max_grad_norm: float = 1.0
    vf_coef: float = 0.5  # also fit the critic to the behaviour's returns (a calibrated PPO start); 0 = actor only
    reward_scale: float = 0.1  # value targets = reward_scale x return (same convention as PPO)
    validity_coef: float = 0.0  # extra weight on the validity term (UnmaskedEnv: the env's masks as targets)
    gamma: float = 0.99
    hedge_prob: float = 0.0  # the teacher vaults each resource at the start with this probability (npc_behaviour)
    hedge_margin: int = 9  # ... and its UNVAULTs arrive this many steps before the end
    dagger_rounds: int = 0  # DAgger: roll the fitted policy, label its states with the teacher, refit
    dagger_epochs: int = 30  # epochs per DAgger round, over the teacher's data + that round's

    def check(self, prefix: str = "") -> None:
        """Range checks (`build` calls it); ConfigError naming `prefix + key`."""
        if not 0.0 <= self.hedge_prob <= 1.0:
            _fail(prefix + "hedge_prob", f"must be in [0, 1], got {self.hedge_prob}")
        for k in ("hedge_margin", "dagger_rounds", "dagger_epochs"):
            if getattr(self, k) < 0:
                _fail(prefix + k, f"must be >= 0, got {getattr(self, k)}")



@dataclasses.dataclass(frozen=True)
class GRPOConfig:
    group_size: int = 8  # G episodes per group (shared reset key)
    num_groups: int = 8  # B groups per update
    num_updates: int = 20
    episode_steps: int = 0  # steps per episode; 0 = the env's max_steps
    update_epochs: int = 2
    num_minibatches: int = 2  # over groups (must divide num_groups)
    group_chunk: int = 0  # groups per rollout / gradient chunk; 0 = no chunking
    lr: float = 3e-4
    clip_eps: float = 0.2
    kl_coef: float = 0.05
    ent_coef: float = 0.0
    invalid_penalty: float = 0.0  # extra cost per invalid action in the returns advantages use (a format reward)
    max_grad_norm: float = 0.5
    adv_mode: str = "episode"  # episode | step
    adv_eps: float = 1e-8
    gamma: float = 1.0  # discount of the per-step returns-to-go (adv_mode=step)
    share_step_keys: bool = True  # same step keys inside a group (same shocks), not only the reset key
    pool_agents: bool = False  # group statistics pooled over learner seats (else per seat)

    def steps(self, env) -> int:
        return self.episode_steps or env.max_steps

    def env_steps_per_update(self, env) -> int:
        return self.num_groups * self.group_size * self.steps(env)

    def chunk(self) -> int:
        return self.group_chunk or self.num_groups // self.num_minibatches

    def check(self, prefix: str = "") -> None:
        """Range and consistency checks (`build` and `make_grpo_train` call it); ConfigError naming `prefix + key`."""
        bad = lambda key, msg: _fail(prefix + key, msg)  # noqa: E731
        for k in ("group_size", "num_groups", "num_updates", "update_epochs", "num_minibatches"):
            if getattr(self, k) < 1:
                bad(k, f"must be >= 1, got {getattr(self, k)}")
        if self.group_size < 2:
            bad("group_size", "a group needs at least 2 episodes")
        if self.num_groups % self.num_minibatches:
            bad("num_minibatches", f"must divide num_groups={self.num_groups}")
        mb = self.num_groups // self.num_minibatches
        if self.group_chunk < 0 or (self.group_chunk and (mb % self.group_chunk or self.num_groups % self.group_chunk)):
            bad("group_chunk", f"must divide the groups per minibatch ({mb}), got {self.group_chunk}")
        if self.adv_mode not in ("episode", "step"):
            bad("adv_mode", f"must be episode or step, got {self.adv_mode!r}")
        for k in ("clip_eps", "kl_coef", "ent_coef", "max_grad_norm", "adv_eps", "invalid_penalty"):
            if getattr(self, k) < 0:
                bad(k, "must be >= 0")
        if not self.lr > 0:
            bad("lr", "must be > 0")



def validate(values: dict, section: str = "") -> PPOConfig:
    """Build a PPOConfig from a flat dict, raising ConfigError naming the first bad key."""
    return build(PPOConfig, values, section)


def _check_env(cfg, prefix: str = ""):
    """Build the env once (no compilation): an unknown env id or env param fails here, named. -> the env."""
    if cfg.env_id not in nexus_jax.registered_envs():
        _fail(prefix + "env_id", f"unknown env id {cfg.env_id!r} (registered: {nexus_jax.registered_envs()})")
    try:
        env = nexus_jax.make(cfg.env_id, **cfg.env)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"config key '{prefix}env': {one_line(e)}") from None
    if getattr(cfg, "action_head", "factored") == "factored" and not hasattr(env, "factored_action_masks"):
        _fail(prefix + "action_head", f"env {cfg.env_id!r} has no factored action view; use action_head=flat")
    return env


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
    """`checkpoint_every=-1` (auto) made concrete: 4 chunks of updates (a checkpoint after each, so Ctrl-C
    keeps the last), on one device or on a mesh."""
    if cfg.checkpoint_every != -1:
        return cfg
    return dataclasses.replace(cfg, checkpoint_every=max(1, cfg.num_updates // 4))


def load_config(path: str | Path | None = None, overrides: dict | list | None = None) -> PPOConfig:
    """Defaults from YAML (`configs/ppo.yaml` when `path` is None), then overrides; validated."""
    values = read_yaml(path or DEFAULT_CONFIG)
    values = {k: _numbers(v) if k in ("lr", "lrs", "type_prior") else v for k, v in values.items()}
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


# ---- the pipeline (python -m train.pipeline) ----------------------------------------------------

@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    """Top-level keys of configs/pipeline.yaml; sections `bc`, `grpo` and `ppo` are built by `build` too."""

    name: str = "pipeline"
    run_dir: str = "runs"
    seed: int = 0
    env_id: str = "nexus-v0"
    env: dict = dataclasses.field(default_factory=dict)
    hidden_size: int = 128
    num_layers: int = 2
    activation: str = "tanh"
    eval_episodes: int = 500
    eval_seed: int = 12345
    xla_fast_compile: bool = True  # CPU: XLA's fast-compile flags (nexus_jax.xla_flags.FAST_COMPILE)
    num_devices: int = 1  # every stage's data-parallel devices, as PPO's key: 1 one device, 0 all (every process's)
    bc: BCConfig = dataclasses.field(default_factory=BCConfig)
    grpo: GRPOConfig = dataclasses.field(default_factory=GRPOConfig)
    ppo: Optional[PPOConfig] = None  # built by load_pipeline_config (its env, network and budget are the pipeline's)

    def check(self, prefix: str = "") -> None:
        """Range checks of the top-level keys (`build` calls it); ConfigError naming `prefix + key`."""
        if self.activation not in _CHOICES["activation"]:
            _fail(prefix + "activation", f"must be one of {_CHOICES['activation']}, got {self.activation!r}")
        for key in ("hidden_size", "num_layers", "eval_episodes"):
            if not getattr(self, key) > 0:
                _fail(prefix + key, f"must be > 0, got {getattr(self, key)!r}")
        if not self.num_devices >= 0:
            _fail(prefix + "num_devices", f"must be >= 0, got {self.num_devices!r}")
        if not self.name or "/" in self.name or self.name in (".", ".."):
            _fail(prefix + "name", f"must be a non-empty folder name, got {self.name!r}")


PIPELINE_SECTIONS = ("bc", "grpo", "ppo")
# PPO keys the pipeline sets itself (same env, network and budget as GRPO).
PPO_FIXED = {"env_id", "env", "hidden_size", "num_layers", "activation", "total_timesteps", "action_head", "critic",
             "share_params", "seed", "name", "run_dir", "progress", "num_seeds", "lrs", "num_devices"}


def pipeline_values(path=None, overrides: list[str] | None = None) -> dict:
    """configs/pipeline.yaml (or `path`) with dotted `key=value` overrides applied (`bc.epochs=10`), unvalidated."""
    values = read_yaml(path or DEFAULT_PIPELINE)
    for arg in overrides or []:
        if "=" not in arg:
            raise ConfigError(f"override {arg!r}: expected key=value")
        key, raw = (x.strip() for x in arg.split("=", 1))
        head, _, rest = key.partition(".")
        value = _numbers(parse_value(key, raw))
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
            _fail(s, f"must be a mapping, got {sections[s]!r}")
    top = build(PipelineConfig, values)
    bc = build(BCConfig, sections["bc"], "bc")
    grpo = build(GRPOConfig, sections["grpo"], "grpo")
    bad = sorted(set(sections["ppo"]) & PPO_FIXED)
    if bad:
        _fail(f"ppo.{bad[0]}", "set by the pipeline (same env, network and budget as GRPO)")
    env = _check_env(top)  # the env's episode length decides GRPO's budget
    steps = grpo.episode_steps or int(env.default_params.max_steps)
    budget = grpo.num_updates * grpo.num_groups * grpo.group_size * steps
    fixed = {"env_id": top.env_id, "env": top.env, "hidden_size": top.hidden_size, "num_layers": top.num_layers,
             "activation": top.activation, "seed": top.seed, "name": top.name, "progress": False,
             "num_devices": top.num_devices}
    probe = build(PPOConfig, {**sections["ppo"], **fixed, "total_timesteps": 10 ** 9}, "ppo")
    per_update = probe.num_envs * probe.num_steps
    ppo = build(PPOConfig, {**sections["ppo"], **fixed,
                            "total_timesteps": max(per_update, round(budget / per_update) * per_update)}, "ppo")
    return dataclasses.replace(top, bc=bc, grpo=grpo, ppo=ppo)
