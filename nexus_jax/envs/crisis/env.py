"""CrisisEnv: three pipeline agents share a cluster under deadlines and crises (env id crisis-v0).

The rules are the pure functions of `core` (`reset`, `step`); the class adds the JaxMARL
surface (agent dicts, spaces, auto-reset) and the `info_mode` view of a step's metrics.
"""
from __future__ import annotations

import jax.numpy as jnp

from nexus_jax.base.episode_metrics import EpisodeMetrics
from nexus_jax.base.multi_agent_env import MultiAgentEnv
from nexus_jax.base.spaces import Box, Discrete
from nexus_jax.base.spec import EnvSpec, SlotLayout
from nexus_jax.envs.crisis import core, negotiation as nego, viewer
from nexus_jax.envs.crisis.core import metrics
from nexus_jax.envs.crisis.heuristics import ACTIONS_PER_SLOT, FIRST_REQUEST, HEURISTICS
from nexus_jax.envs.crisis.observation import (GLOBAL_FEATURES, TASK_DEADLINE, TASK_FITS, TASK_IDLE_UNLOCKS, TASK_SLACK,
                                               get_obs, obs_size, task_features)
from nexus_jax.envs.crisis.params import CrisisParams

__all__ = ["CrisisEnv", "metrics"]


class CrisisEnv(MultiAgentEnv):
    """Shared compute cluster with negotiation, crises and a curriculum; params-as-pytree, jittable, vmappable."""

    INFO_MODES = ("agents", "full")
    # the seed's table (completion, on time, fairness, belief accuracy, contracts) at the episode's end
    episode_metrics = EpisodeMetrics(core.episode_init, core.episode_update, dict)
    # Plain vmap: batch-minor (1.21x at 1,024 envs) gave observations 1 ulp apart in the deadline-slack
    # feature (`to_deadline - left_h`, all elementwise: XLA:CPU's code for it differs by layout), and every
    # crisis-v0 result was measured with vmap's bits (docs/performance.md).
    vmap_batch_minor = False

    def __init__(self, params: CrisisParams | None = None, info_mode: str = "agents"):
        """`info_mode` "agents" (default): only per-agent (A,) info leaves (`invalid`, `individual_reward`,
        `team_reward` repeated per agent), the shape JaxMARL's IPPO/MAPPO reshape every info leaf to;
        "full": the episode metrics as well (scalars and resource vectors), which the evaluators read."""
        if info_mode not in self.INFO_MODES:
            raise ValueError(f"info_mode must be one of {self.INFO_MODES}, got {info_mode!r}")
        self.info_mode = info_mode
        params = CrisisParams.create() if params is None else params
        super().__init__(params, [f"agent_{i}" for i in range(params.num_agents)])
        n = nego.num_actions(params.max_tasks)
        d = obs_size(params.num_agents, params.max_tasks, params.dependency_features)
        self.num_actions = n
        self.obs_dim = d
        self.action_spaces = {a: Discrete(n) for a in self.agents}
        # No NPCs (every seat is the caller's); the rules of heuristics.py, EDF the reference; the JSON text
        # protocol; where each task slot's features sit in the observation, which flat actions request it, and
        # which slot features the hand-written rules read (train.networks.SlotActor and its prior rule).
        layout = SlotLayout(GLOBAL_FEATURES + params.num_agents, params.max_tasks,
                            task_features(params.dependency_features), FIRST_REQUEST, ACTIONS_PER_SLOT, TASK_DEADLINE,
                            TASK_SLACK, TASK_FITS, TASK_IDLE_UNLOCKS if params.dependency_features else -1)
        self.spec = EnvSpec(action_formats=("flat",), heuristics=HEURISTICS, reference_heuristic="edf",
                            slot_layout=layout, text_protocol="crisis", viewer=viewer)
        self.observation_spaces = {a: Box(-1e3, 1e3, (d,)) for a in self.agents}

    @property
    def name(self) -> str:
        return "crisis-v0"

    # ---- reset and step: the functional core ------------------------------------------------------
    def reset_env(self, key, params):
        return core.reset(key, params)

    def step_env(self, key, state, actions, params):
        obs, state, rewards, done, info = core.step(key, state, actions, params)
        if self.info_mode == "agents":
            A = rewards.shape[0]
            info = {"invalid": info["invalid"], "individual_reward": info["individual_reward"],
                    "team_reward": jnp.broadcast_to(info["team_reward"], (A,))}
        return obs, state, rewards, done, info

    # ---- views ----------------------------------------------------------------------------------
    def get_obs_array(self, state, params):
        return get_obs(state, params)

    def avail_actions_array(self, state, params):
        return nego.avail_actions(state, params)

    def render(self, state, params=None, info=None):
        """A matplotlib Figure of one unbatched state: tasks against deadlines, cluster use, the last step's
        negotiation (`viewer.py`; `info` is unused: the state holds the last step's requests)."""
        return viewer.render(state, self._params(params), info)
