"""NexusEnv: the JaxMARL-compatible class over the functional core, and its spaces."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from nexus_jax.core import Box, Discrete, MultiAgentEnv, MultiDiscrete
from nexus_jax.envs.nexus import actions as A
from nexus_jax.envs.nexus import core
from nexus_jax.envs.nexus.dynamics import action_snapshot
from nexus_jax.envs.nexus.observation import observe
from nexus_jax.envs.nexus.params import NexusParams
from nexus_jax.envs.nexus.npc.seats import step_with_npcs
from nexus_jax.envs.nexus.validity import factored_masks, flat_mask


class NexusEnv(MultiAgentEnv):
    """Protocol: Nexus. Learner seats are driven by the actions passed in; the rest by jitted NPCs.

    `reset(key, params=None)` / `step(key, state, actions, params=None)` take and return
    dicts keyed by agent name (JaxMARL); `reset_env` / `step_env` are the array-level core.
    Actions may be flat indices (the default `Discrete` space) or structured (5,) rows.

    `learner_seats` (static: the agent list is static) names the seats the caller drives;
    `agents`, observations, rewards, spaces and `get_avail_actions` cover only those. `None`
    (the constructor default) makes every seat a learner (self-play). Every other seat is
    played by the NPC policy of its archetype (`params.archetypes`, traced) inside `step_env`.
    `info_mode="full"` (default) keeps `info` over all N seats (plus `rewards_all`,
    `actions`, per-step event tables and resource flows) for the log wrappers;
    `info_mode="agents"` keeps only per-learner (len(agents),) entries (`error_code`,
    `invalid`, `utility`), the shape JaxMARL's IPPO/MAPPO baselines reshape every info leaf to.
    """

    INFO_MODES = ("full", "agents")

    def __init__(self, params: NexusParams, learner_seats: tuple | None = None, info_mode: str = "full"):
        if info_mode not in self.INFO_MODES:
            raise ValueError(f"info_mode must be one of {self.INFO_MODES}, got {info_mode!r}")
        self.info_mode = info_mode
        n = params.num_agents
        seats = tuple(range(n)) if learner_seats is None else tuple(int(i) for i in learner_seats)
        if len(set(seats)) != len(seats) or any(not 0 <= i < n for i in seats) or not seats:
            raise ValueError(f"learner_seats must be distinct seats in 0..{n - 1}, at least one, got {learner_seats!r}")
        self.learner_seats = seats
        self.npc_seats = tuple(i for i in range(n) if i not in seats)
        self._learner_idx = jnp.asarray(seats, jnp.int32)
        self._obs_seats = None if not self.npc_seats else seats  # observe only these rows (None: all)
        super().__init__(params, [f"agent_{i}" for i in seats])
        self.num_actions = A.num_flat_actions(n, params.num_levels)
        obs_dim = jax.eval_shape(lambda k: core.reset(k, params)[0], jax.random.PRNGKey(0)).shape[1]
        self.obs_dim = obs_dim
        self.observation_spaces = {a: Box(-jnp.inf, jnp.inf, (obs_dim,)) for a in self.agents}
        self.action_spaces = {a: Discrete(self.num_actions) for a in self.agents}
        self.factored_action_spaces = {a: MultiDiscrete(A.factored_nvec(n, params.num_levels)) for a in self.agents}

    @classmethod
    def create(cls, learner_seats: tuple | None = None, info_mode: str = "full", **overrides) -> "NexusEnv":
        return cls(NexusParams.create(**overrides), learner_seats=learner_seats, info_mode=info_mode)

    def _mine(self, x):
        """Rows of the learner seats."""
        return x if not self.npc_seats else x[self._learner_idx]

    def reset_env(self, key, params):
        return core.reset(key, params, self._obs_seats)

    def step_env(self, key, state, actions, params):
        obs, state, rew, done, info = step_with_npcs(key, state, actions, params, self.learner_seats,
                                                     obs_seats=self._obs_seats)
        if self.info_mode == "agents":
            info = {k: self._mine(info[k]) for k in ("error_code", "invalid", "utility")}
        return obs, state, self._mine(rew), done, info

    def get_obs_array(self, state, params):
        return observe(state, params, self._obs_seats)

    def auto_reset_obs(self, done, obs_reset, obs_step, state, params):
        """Observe the already selected state once (observations are a function of the state alone)."""
        return self.get_obs_array(state, params)

    def avail_actions_array(self, state, params):
        snap = action_snapshot(state, params)
        return flat_mask(snap, params, None if not self.npc_seats else self._learner_idx)

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
