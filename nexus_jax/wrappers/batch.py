"""Batching: `VecEnv(env, num_envs)` runs `num_envs` independent episodes under one vmap."""
from __future__ import annotations

from functools import partial

import jax


class VecEnv:
    """reset(key) / step(key, state, actions) over a leading batch axis; params shared (or None)."""

    def __init__(self, env, num_envs: int):
        self._env = env
        self.num_envs = int(num_envs)

    def __getattr__(self, name):
        return getattr(self._env, name)

    @partial(jax.jit, static_argnums=(0,))
    def reset(self, key, params=None):
        keys = jax.random.split(key, self.num_envs)
        return jax.vmap(self._env.reset, in_axes=(0, None))(keys, params)

    @partial(jax.jit, static_argnums=(0,))
    def step(self, key, state, actions, params=None):
        keys = jax.random.split(key, self.num_envs)
        return jax.vmap(self._env.step, in_axes=(0, 0, 0, None))(keys, state, actions, params)
