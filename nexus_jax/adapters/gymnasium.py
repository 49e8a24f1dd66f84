"""Gymnasium env for one learner seat of a nexus_jax env (extra `gymnasium`).

    from nexus_jax.adapters.gymnasium import NexusGymEnv
    env = NexusGymEnv("nexus-v0")            # agent_0 against the env's jitted NPCs
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(env.action_masks().nonzero()[0][0])

    import gymnasium, nexus_jax.adapters.gymnasium
    env = gymnasium.make("NexusJax/Nexus-v0")   # registered on import of this module

The env must leave exactly one seat to the caller (`nexus-v0` and its NPC variants; pass
`seat=i` to play seat i instead of 0: `learner_seats=(i,)`). `action_space` is the flat
`Discrete(n)`, `observation_space` a float32 `Box`. `action_masks()` (sb3-contrib's
MaskablePPO convention) and `info["action_mask"]` give the actions valid next step; an
invalid action still never crashes (it becomes WAIT with a penalty, and `info["error_code"]`
says why). `truncated` is the `max_steps` limit, `terminated` the random early end. The
observation returned at the end is the terminal one. `reset(seed=s)` follows
`nexus_jax.play`'s key schedule from PRNGKey(s); `reset()` continues the running key.
"""
from __future__ import annotations

from typing import Any, Optional

import gymnasium
import numpy as np
from gymnasium import spaces

from nexus_jax.adapters._core import HostSession, JaxStateAccess, compiled
from nexus_jax.registry import DEFAULT_ENV

__all__ = ["NexusGymEnv", "GYM_ID", "GYM_IDS"]

GYM_ID = "NexusJax/Nexus-v2"  # gymnasium.make(GYM_ID): nexus-v2, the default economy
GYM_IDS = {GYM_ID: "nexus-v2", "NexusJax/Nexus-v1": "nexus-v1", "NexusJax/Nexus-v0": "nexus-v0"}  # the gym id of each rule version


class NexusGymEnv(JaxStateAccess, gymnasium.Env):
    metadata = {"render_modes": ["ansi"]}

    def __init__(self, env_id: str = DEFAULT_ENV, seat: Optional[int] = None, render_mode: Optional[str] = None,
                 **overrides: Any):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}")
        if seat is not None:
            overrides["learner_seats"] = (int(seat),)
        self._c = compiled(env_id, **overrides)
        if len(self._c.agents) != 1:
            raise ValueError(f"{env_id!r} leaves {len(self._c.agents)} seats to the caller ({self._c.agents}); "
                             "the Gymnasium adapter plays exactly one: use an env with NPC seats, or seat=i "
                             "(PettingZoo's adapter drives several)")
        self.env_id = env_id
        self.render_mode = render_mode
        self.seat = self._c.seats[0]
        self._session = HostSession(self._c)
        self.action_space = spaces.Discrete(self._c.num_actions)
        self.observation_space = spaces.Box(-np.inf, np.inf, (self._c.obs_dim,), np.float32)
        self._mask = np.zeros(self._c.num_actions, bool)

    def action_masks(self) -> np.ndarray:
        """(n,) bool: the actions valid next step (sb3-contrib MaskablePPO)."""
        return self._mask.copy()

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        if seed is None and self._session.key is None:
            seed = int(self.np_random.integers(2**31 - 1))
        obs, mask = self._session.reset(seed)
        self._mask = mask[0]
        return obs[0], {"action_mask": self._mask.astype(np.int8)}

    def step(self, action):
        flat = np.asarray([int(np.asarray(action).reshape(()))], np.int32)
        obs, rew, terminated, truncated, info, mask = self._session.step(flat)
        self._mask = mask[0]
        out = self._session.seat_info(info, self.seat)
        out["action_mask"] = self._mask.astype(np.int8)
        return obs[0], float(rew[0]), terminated, truncated, out

    def render(self):
        if self.render_mode is None:
            return None
        s = self._session.state
        if s is None:
            return ""
        return self._c.render(s, (self.seat,))


for _gym_id, _env_id in GYM_IDS.items():
    if _gym_id not in gymnasium.registry:
        gymnasium.register(_gym_id, entry_point="nexus_jax.adapters.gymnasium:NexusGymEnv", kwargs={"env_id": _env_id})
