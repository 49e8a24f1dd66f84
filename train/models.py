"""Which env view and which network a config asks for (`network: mlp | entity`), in one place.

`mlp` (default): the flat observation vector and `networks.ActorCritic`; `entity`: the entity
view (`entity_env.EntityLearnerEnv`) and the permutation-equivariant `entity_net.EntityActorCritic`,
whose parameters act at any number of seats (docs/populations.md).
"""
from __future__ import annotations

from train.entity_env import EntityLearnerEnv
from train.entity_net import EntityActorCritic
from train.learner_env import LearnerEnv
from train.networks import ActorCritic


def make_learner_env(cfg) -> LearnerEnv:
    """The trainer's env for `cfg` (its env id, env overrides, action head and network)."""
    cls = EntityLearnerEnv if getattr(cfg, "network", "mlp") == "entity" else LearnerEnv
    return cls.make(cfg.env_id, cfg.env, cfg.action_head)


def make_policy(cfg, env: LearnerEnv):
    """The actor-critic for `cfg` over `env` (built by `make_learner_env`)."""
    if getattr(cfg, "network", "mlp") == "entity":
        return EntityActorCritic.from_config(cfg, env)
    return ActorCritic.from_config(cfg, env)
