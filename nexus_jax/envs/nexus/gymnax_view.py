"""Single-agent gymnax view of Nexus: one learner seat against jitted NPCs in every other seat.

The interface of the gymnax PyPI release, so PureJaxRL-style code (and gymnax's own
wrappers) run on it unchanged: `reset(key, params=None) -> (obs, state)`,
`step(key, state, action, params=None) -> (obs, state, reward, done, info)` with auto-reset,
`observation_space(params)`, `action_space(params)`, `default_params`, `num_actions`.
`action_mask(state, params)` gives the seat's valid flat actions.

gymnax 1.x changed `step` to return `(obs, state, reward, terminated, truncated, info)`;
`gymnax_v1=True` gives that form (truncated = the step limit, terminated = the stochastic end).
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from nexus_jax.core import Box, Discrete
from nexus_jax.envs.nexus import actions as A
from nexus_jax.envs.nexus import core
from nexus_jax.envs.nexus.env import action_snapshot
from nexus_jax.envs.nexus.validity import flat_mask
from nexus_jax.envs.nexus.npc.seats import step_with_npcs
from nexus_jax.envs.nexus.observation import observe
from nexus_jax.envs.nexus.params import NexusParams


class NexusGymnax:
    """Seat `seat` is the agent; the other seats play their archetypes (`params.archetypes`)."""

    def __init__(self, params: NexusParams | None = None, seat: int = 0, gymnax_v1: bool = False):
        self._params = NexusParams.create() if params is None else params
        if not 0 <= seat < self._params.num_agents:
            raise ValueError(f"seat must be in 0..{self._params.num_agents - 1}, got {seat}")
        self.seat = int(seat)
        self.gymnax_v1 = bool(gymnax_v1)
        self.num_actions = A.num_flat_actions(self._params.num_agents, self._params.num_levels)
        self.obs_dim = jax.eval_shape(lambda k: core.reset(k, self._params)[0], jax.random.PRNGKey(0)).shape[1]

    @classmethod
    def make(cls, env_id: str = "nexus-v0", seat: int = 0, gymnax_v1: bool = False, **overrides) -> "NexusGymnax":
        """The view over a registered Nexus variant's params (its NPC mix), seat `seat` the agent."""
        import nexus_jax

        return cls(nexus_jax.make(env_id, learner_seats=(seat,), **overrides).default_params, seat, gymnax_v1)

    @property
    def default_params(self) -> NexusParams:
        return self._params

    @property
    def name(self) -> str:
        return "Nexus-gymnax"

    def _p(self, params):
        return self._params if params is None else params

    # ---- gymnax API -------------------------------------------------------------------------
    @partial(jax.jit, static_argnums=(0,))
    def reset(self, key, params=None):
        return self.reset_env(key, self._p(params))

    @partial(jax.jit, static_argnums=(0,))
    def step(self, key, state, action, params=None):
        """Step with auto-reset (the returned obs and state are a fresh episode's when `done`)."""
        params = self._p(params)
        key_step, key_reset = jax.random.split(key)
        obs_st, state_st, reward, done, info = self.step_env(key_step, state, action, params)
        obs_re, state_re = self.reset_env(key_reset, params)
        state = jax.tree.map(lambda r, s: jax.lax.select(done, r, s), state_re, state_st)
        obs = jax.lax.select(done, obs_re, obs_st)
        if self.gymnax_v1:
            truncated = state_st.step >= params.max_steps
            return obs, state, reward, done & ~truncated, truncated, {**info, "terminated": done & ~truncated,
                                                                      "truncated": truncated}
        return obs, state, reward, done, info

    def reset_env(self, key, params):
        obs, state = core.reset(key, params)
        return obs[self.seat], state

    def step_env(self, key, state, action, params):
        """One step without reset; `action` is a flat index () or a structured (5,) row."""
        action = jnp.asarray(action, jnp.int32)[None]
        obs, state, rew, done, info = step_with_npcs(key, state, action, params, (self.seat,))
        info = {**info, "discount": 1.0 - done.astype(jnp.float32)}
        return obs[self.seat], state, rew[self.seat], done, info

    def get_obs(self, state, params=None):
        return observe(state, self._p(params))[self.seat]

    def action_mask(self, state, params=None):
        """(num_actions,) bool: the seat's valid flat actions next step."""
        params = self._p(params)
        return flat_mask(action_snapshot(state, params), params, jnp.array([self.seat]))[0]

    def is_terminal(self, state, params=None):
        return state.step >= self._p(params).max_steps

    def observation_space(self, params=None):
        return Box(-jnp.inf, jnp.inf, (self.obs_dim,))

    def action_space(self, params=None):
        return Discrete(self.num_actions)
