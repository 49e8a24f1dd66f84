"""NexusEnv: the JaxMARL-compatible class over the functional core, and its spaces."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from nexus_jax.core import Box, Discrete, MultiAgentEnv, MultiDiscrete
from nexus_jax.envs.nexus import actions as A
from nexus_jax.envs.nexus import core
from nexus_jax.envs.nexus.dynamics import expire
from nexus_jax.envs.nexus.constants import NUM_OUTCOMES
from nexus_jax.envs.nexus.observation import observe
from nexus_jax.envs.nexus.params import NexusParams
from nexus_jax.envs.nexus.validity import factored_masks, flat_mask


def action_snapshot(state, params):
    """The state actions will be judged on next step (after expiry): what masks are computed from."""
    n = params.num_agents
    return expire(state, params, jnp.zeros((n, NUM_OUTCOMES), bool))[0]


class NexusEnv(MultiAgentEnv):
    """Protocol: Nexus. Every seat is driven by the actions passed in.

    `reset(key, params=None)` / `step(key, state, actions, params=None)` take and return
    dicts keyed by agent name (JaxMARL); `reset_env` / `step_env` are the array-level core.
    Actions may be flat indices (the default `Discrete` space) or structured (5,) rows.
    """

    def __init__(self, params: NexusParams):
        n = params.num_agents
        super().__init__(params, [f"agent_{i}" for i in range(n)])
        self.num_actions = A.num_flat_actions(n, params.num_levels)
        obs_dim = jax.eval_shape(lambda k: core.reset(k, params)[0], jax.random.PRNGKey(0)).shape[1]
        self.obs_dim = obs_dim
        self.observation_spaces = {a: Box(-jnp.inf, jnp.inf, (obs_dim,)) for a in self.agents}
        self.action_spaces = {a: Discrete(self.num_actions) for a in self.agents}
        self.factored_action_spaces = {a: MultiDiscrete(A.factored_nvec(n, params.num_levels)) for a in self.agents}

    @classmethod
    def create(cls, **overrides) -> "NexusEnv":
        return cls(NexusParams.create(**overrides))

    def reset_env(self, key, params):
        return core.reset(key, params)

    def step_env(self, key, state, actions, params):
        return core.step(key, state, actions, params)

    def get_obs_array(self, state, params):
        return observe(state, params)

    def avail_actions_array(self, state, params):
        return flat_mask(action_snapshot(state, params), params)

    def factored_action_masks(self, state, params=None):
        """Per-head masks of the factored view (see validity.factored_masks)."""
        params = self._params(params)
        return factored_masks(self.avail_actions_array(state, params), params)

    def encode(self, structured):
        p = self.default_params
        return A.encode(jnp.asarray(structured), p.num_agents, p.num_levels)

    def decode(self, flat):
        p = self.default_params
        return A.decode(jnp.asarray(flat), p.num_agents, p.num_levels)
