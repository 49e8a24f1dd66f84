"""PPO's config (`python -m train`, configs/ppo.yaml)."""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import yaml

from nexus_jax.registry import DEFAULT_ENV

from train.alignment import SCOPES
from train.config.network import MEMORY_KINDS, SlotConfig
from train.config.base import CONFIGS, build, check_env, check_logger, fail, numbers, parse_overrides, read_yaml

DEFAULT_CONFIG = CONFIGS / "ppo.yaml"


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    name: str = "ppo-default"
    env_id: str = DEFAULT_ENV
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
    align_beta: float = 0.0  # >0: advantage alignment (opponent shaping, several learner seats; train/alignment.py)
    align_scope: str = "all"  # whose advantages it aligns with: all (the other learner seats) | partner (those a step's actions connect) | answered (an offer's partner when it answers)
    align_types: tuple = ()  # align_scope=partner: the action types that connect seats, by name (() all the env's partner types)
    past_partners: float = 0.0  # >0: each learner seat played with this probability per rollout by a past snapshot (train/past_partners.py)
    hidden_size: int = 128
    num_layers: int = 2
    activation: str = "tanh"
    action_head: str = "factored"
    type_prior: tuple = ()  # factored head: fixed logit offsets on the action types, env order (() none); e.g.
    #                         an optimistic ACCEPT so early proposals meet acceptance (docs/research.md)
    network: str = "mlp"  # mlp (flat obs) | entity (entity view, any N; train/entity_net.py) | slot (task slots)
    slot: SlotConfig = dataclasses.field(default_factory=SlotConfig)  # network=slot's knobs (config/network.py)
    critic: str = "ippo"
    share_params: bool = True
    memory: str = "none"  # none (feedforward) | gru (a GRU core between encoder and heads; train/memory.py)
    memory_size: int = 128  # memory=gru: the GRU's width
    eval_episodes: int = 1000
    eval_seed: int = 12345
    progress: bool = True
    run_dir: str = "runs"
    snapshot_every: int = -1  # params kept every k updates into runs/<name>/snapshots/: -1 auto (~5), 0 off
    checkpoint_every: int = 0  # >0: train in chunks of this many updates, checkpointing after each (resumable); -1 auto
    num_devices: int = 1  # data-parallel devices: 1 = single device (default), 0 = all (jax.devices()), n = first n
    logger: str = "none"  # experiment tracking: none | tensorboard | wandb (train/loggers.py; optional extras)
    wandb_project: str = "nexus_jax"  # logger=wandb: the project; runs are grouped by `name`
    wandb_mode: str = "online"  # logger=wandb: online | offline (local files; `wandb sync` uploads them)

    # keys that moved to the network they belong to
    RENAMED = {"slot_scorer": "network=slot", "edf_prior": "slot.prior", "edf_feature": "slot.feature",
               "prior_rule": "slot.rule", "prior_tight": "slot.tight"}

    @property
    def num_updates(self) -> int:
        return self.total_timesteps // (self.num_envs * self.num_steps)

    @property
    def minibatch_size(self) -> int:
        return self.num_envs * self.num_steps // self.num_minibatches

    @property
    def recurrent(self) -> bool:
        """A policy with a memory: PPO's minibatches are then whole env sequences (`num_envs / num_minibatches`)."""
        return self.memory != "none"

    @property
    def sweep_lrs(self) -> tuple:
        """The learning rates trained side by side (one when `lrs` is empty)."""
        return tuple(self.lrs) if self.lrs else (self.lr,)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["lrs"] = list(self.lrs)
        d["type_prior"] = list(self.type_prior)
        d["align_types"] = list(self.align_types)
        return d

    def check(self, prefix: str = "") -> None:
        """Range and consistency checks (`build` calls it); ConfigError naming `prefix + key`."""
        bad = lambda key, msg: fail(prefix + key, msg)  # noqa: E731
        for key, choices in CHOICES.items():
            if getattr(self, key) not in choices:
                bad(key, f"must be one of {choices}, got {getattr(self, key)!r}")
        for key in _POSITIVE:
            if not getattr(self, key) > 0:
                bad(key, f"must be > 0, got {getattr(self, key)!r}")
        for key in _NONNEGATIVE:
            if not getattr(self, key) >= 0:
                bad(key, f"must be >= 0, got {getattr(self, key)!r}")
        for key in _UNIT:
            if not 0.0 <= getattr(self, key) <= 1.0:
                bad(key, f"must lie in [0, 1], got {getattr(self, key)!r}")
        if not 0.0 <= self.past_partners < 1.0:
            bad("past_partners", f"is the probability that a learner seat plays a past snapshot: must lie in [0, 1), "
                                 f"got {self.past_partners!r}")
        if self.past_partners > 0 and (self.snapshot_every == 0 or self.recurrent):
            bad("past_partners", f"draws partners from the snapshots of a feedforward policy: needs snapshot_every "
                                 f"!= 0 and memory=none, got snapshot_every={self.snapshot_every}, memory={self.memory}")
        if self.snapshot_every < -1:
            bad("snapshot_every", f"must be -1 (auto), 0 (off) or a number of updates, got {self.snapshot_every!r}")
        for i, lr in enumerate(self.lrs):
            if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr > 0:
                bad("lrs", f"entry {i} must be a number > 0, got {lr!r}")
        if (self.num_envs * self.num_steps) % self.num_minibatches:
            bad("num_minibatches", f"must divide num_envs * num_steps = {self.num_envs * self.num_steps}")
        if self.recurrent and self.num_envs % self.num_minibatches:
            bad("num_minibatches", f"with memory={self.memory} a minibatch is whole env sequences: must divide "
                                   f"num_envs = {self.num_envs}")
        if self.checkpoint_every < -1:
            bad("checkpoint_every", f"must be -1 (auto), 0 (off) or a number of updates, got {self.checkpoint_every!r}")
        if self.num_updates < 1:
            bad("total_timesteps", f"must be >= num_envs * num_steps = {self.num_envs * self.num_steps}")
        if not self.name or "/" in self.name or self.name in (".", ".."):
            bad("name", f"must be a non-empty folder name, got {self.name!r}")
        check_logger(self, prefix)
        if self.network == "entity":
            for key, need in (("action_head", "factored"), ("critic", "ippo"), ("share_params", True)):
                if getattr(self, key) != need:
                    bad(key, f"network=entity needs {key}={need!r} (one shared network, pointer target head, "
                              f"own-view critic); got {getattr(self, key)!r}")
        env = check_env(self, prefix)
        for key in ("align_beta", "past_partners"):  # both act between learner seats: self-play ids only
            if getattr(self, key) > 0 and len(env.agents) < 2:
                bad(key, f"is {getattr(self, key)}, which needs an env with at least two learner seats (self-play); "
                         f"{self.env_id!r} has {len(env.agents)}")
        if self.align_types:
            declared = env.spec.partner_types
            if self.align_scope != "partner":
                bad("align_types", f"picks the actions that connect seats: needs align_scope=partner, got {self.align_scope}")
            if not isinstance(self.align_types, (list, tuple)) or not all(t in declared for t in self.align_types):
                bad("align_types", f"must list some of {self.env_id!r}'s partner types {sorted(declared)}, "
                                   f"got {self.align_types!r}")
        if self.align_scope == "answered" and not env.spec.offers:
            bad("align_scope", f"answered reads the env's offers and their answers; {self.env_id!r} declares none")
        if self.network == "slot" and (self.action_head != "flat" or env.spec.slot_layout is None):
            bad("network", f"slot needs action_head=flat and an env with task slots (crisis-v0); got {self.env_id!r} "
                           f"with action_head={self.action_head}")
        if self.type_prior:
            if self.action_head != "factored" or self.network != "mlp":
                bad("type_prior", f"is an offset on the factored type head: needs action_head=factored and "
                                   f"network=mlp, got {self.action_head}/{self.network}")
            n_types = int(env.factored_action_spaces[env.agents[0]].nvec[0])
            if len(self.type_prior) != n_types or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in self.type_prior):
                bad("type_prior", f"must list {n_types} finite numbers (one per action type), got {list(self.type_prior)!r}")
        if self.network != "slot" and not self.slot.is_default:
            bad("slot", f"sets the slot scorer's knobs: needs network=slot, got network={self.network}")
        if self.network == "slot" and self.slot.rule == "edf_chain" and env.spec.slot_layout.idle_unlocks < 0:
            bad("slot.rule", "edf_chain reads the idle-unlocks feature: needs env.dependency_features=true")


CHOICES = {"activation": ("tanh", "relu"), "action_head": ("factored", "flat"), "critic": ("ippo", "mappo"),
           "network": ("mlp", "entity", "slot"), "memory": MEMORY_KINDS,
           "align_scope": SCOPES}
_POSITIVE = {"reward_scale", "num_seeds", "num_envs", "num_steps", "total_timesteps", "update_epochs", "num_minibatches",
             "hidden_size", "num_layers", "eval_episodes", "lr", "memory_size"}
_NONNEGATIVE = {"align_beta", "ent_coef", "vf_coef", "max_grad_norm", "clip_eps", "num_devices"}
_UNIT = {"gamma", "gae_lambda"}




def validate(values: dict, section: str = "") -> PPOConfig:
    """Build a PPOConfig from a flat dict, raising ConfigError naming the first bad key."""
    return build(PPOConfig, values, section)


def resolve_checkpoint_every(cfg: PPOConfig) -> PPOConfig:
    """`checkpoint_every=-1` (auto) made concrete: 4 chunks of updates (a checkpoint after each, so Ctrl-C
    keeps the last), on one device or on a mesh."""
    if cfg.checkpoint_every != -1:
        return cfg
    return dataclasses.replace(cfg, checkpoint_every=max(1, cfg.num_updates // 4))


def load_config(path: str | Path | None = None, overrides: dict | list | None = None) -> PPOConfig:
    """Defaults from YAML (`configs/ppo.yaml` when `path` is None), then overrides; validated."""
    values = read_yaml(path or DEFAULT_CONFIG)
    values = {k: numbers(v) if k in ("lr", "lrs", "type_prior") else v for k, v in values.items()}
    if isinstance(overrides, list):
        overrides = parse_overrides(overrides)
    for key, value in (overrides or {}).items():
        if isinstance(value, dict) and isinstance(values.get(key), dict):  # a section: merge its keys
            values[key] = {**values[key], **value}
        else:
            values[key] = value
    return validate(values)


def save_config(cfg: PPOConfig, path: str | Path) -> None:
    with open(path, "w") as f:
        yaml.safe_dump(cfg.to_dict(), f, sort_keys=False)
