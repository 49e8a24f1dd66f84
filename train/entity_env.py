"""The trainer's env view with entity observations (`network: entity`): `LearnerEnv` whose obs is an `EntityObs`.

Steps and masks are `LearnerEnv`'s; only the observation differs: the learner seats' entity
views computed from the state after the step (after auto-reset, so a finished episode's
next obs is the fresh episode's, as with the flat vector). The flat obs the env also returns
is discarded, and XLA drops its computation.
"""
from __future__ import annotations

import dataclasses

import nexus_jax
from train.learner_env import LearnerEnv


@dataclasses.dataclass(frozen=True, eq=False)
class EntityLearnerEnv(LearnerEnv):
    """`LearnerEnv` over a Nexus env, observations as `EntityObs` with leaves (A, ...)."""

    @classmethod
    def make(cls, env_id: str, env_kwargs: dict | None = None, action_head: str = "factored") -> "EntityLearnerEnv":
        if action_head != "factored":
            raise ValueError("config key 'action_head': the entity network has factored heads only (got "
                             f"{action_head!r})")
        env = nexus_jax.make(env_id, **{"info_mode": "full", "action_format": "structured", **(env_kwargs or {})})
        if not env.spec.entity_obs:
            raise ValueError(f"config key 'network': env {env_id!r} has no entity view (entity_obs); use network=mlp")
        return cls(env, action_head)

    @property
    def obs_dim(self) -> int:
        raise AttributeError("an entity observation has no single size; see nexus_jax/envs/nexus/entities.py")

    def reset(self, key):
        _, state = self.env.reset(key)
        return self.env.entity_obs(state), state

    def step(self, key, state, actions, params=None):
        _, state, rew, done, info = super().step(key, state, actions, params)
        return self.env.entity_obs(state, params), state, rew, done, info
