"""PettingZoo `ParallelEnv` over any registered nexus_jax env id (extra `pettingzoo`).

    from nexus_jax.adapters.pettingzoo import NexusParallelEnv
    env = NexusParallelEnv("nexus-selfplay-v0", max_steps=50)
    obs, infos = env.reset(seed=0)
    obs, rew, term, trunc, infos = env.step({a: infos[a]["action_mask"].nonzero()[0][0] for a in env.agents})

The agents are the env's external seats (`env.agents`; NPC seats play inside the step).
Observations are float32 NumPy vectors; actions are flat `Discrete` indices (a missing
agent's action is 0, WAIT in Nexus). `infos[agent]["action_mask"]` (int8, PettingZoo's
convention) marks the actions valid next step; infos also carry that seat's entries of the
step info (`error_code`, `invalid`, `utility`, `rewards_all`). When the episode ends every
agent is terminated (random early end) or truncated (`max_steps`) and removed from
`agents`; the observation returned is the terminal one. Call `reset()` to start again.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from nexus_jax.adapters._core import HostSession, JaxStateAccess, compiled
from nexus_jax.registry import DEFAULT_ENV

__all__ = ["NexusParallelEnv", "parallel_env"]


class NexusParallelEnv(JaxStateAccess, ParallelEnv):
    metadata = {"name": "nexus_jax", "render_modes": ["ansi"], "is_parallelizable": True}

    def __init__(self, env_id: str = DEFAULT_ENV, render_mode: Optional[str] = None, **overrides: Any):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}")
        self.render_mode = render_mode
        self.env_id = env_id
        self._c = compiled(env_id, **overrides)
        self._session = HostSession(self._c)
        self.possible_agents = list(self._c.agents)
        self.agents: list = []
        self._seat = dict(zip(self._c.agents, self._c.seats))
        self._obs_spaces = {a: spaces.Box(-np.inf, np.inf, (self._c.obs_dim,), np.float32) for a in self.possible_agents}
        self._act_spaces = {a: spaces.Discrete(self._c.num_actions) for a in self.possible_agents}
        self.metadata = {**self.metadata, "name": f"nexus_jax/{env_id}"}

    def observation_space(self, agent):
        return self._obs_spaces[agent]

    def action_space(self, agent):
        return self._act_spaces[agent]

    def _infos(self, mask, info=None):
        out = {}
        for i, a in enumerate(self.possible_agents):
            d = self._session.seat_info(info, self._seat[a]) if info is not None else {}
            d["action_mask"] = mask[i].astype(np.int8)
            out[a] = d
        return out

    def reset(self, seed: Optional[int] = None, options: Optional[dict] = None):
        obs, mask = self._session.reset(seed)
        self.agents = list(self.possible_agents)
        return {a: obs[i] for i, a in enumerate(self.possible_agents)}, self._infos(mask)

    def step(self, actions: dict):
        if not self.agents:
            raise RuntimeError("no live agents: the episode is over, call reset()")
        flat = np.zeros(len(self.possible_agents), np.int32)
        for i, a in enumerate(self.possible_agents):
            if a in actions and actions[a] is not None:
                flat[i] = int(np.asarray(actions[a]).reshape(()))
        obs, rew, terminated, truncated, info, mask = self._session.step(flat)
        live = self.agents
        obs_d = {a: obs[i] for i, a in enumerate(self.possible_agents) if a in live}
        rew_d = {a: float(rew[i]) for i, a in enumerate(self.possible_agents) if a in live}
        term_d = {a: terminated for a in live}
        trunc_d = {a: truncated for a in live}
        infos = {a: v for a, v in self._infos(mask, info).items() if a in live}
        if terminated or truncated:
            self.agents = []
        return obs_d, rew_d, term_d, trunc_d, infos

    def render(self):
        if self.render_mode is None:
            return None
        s = self._session.state
        if s is None:
            return ""
        return self._c.render(s, self._c.seats)

    def close(self):
        pass


def parallel_env(env_id: str = DEFAULT_ENV, **kwargs: Any) -> NexusParallelEnv:
    """PettingZoo-style constructor."""
    return NexusParallelEnv(env_id, **kwargs)
