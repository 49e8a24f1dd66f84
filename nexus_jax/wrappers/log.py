"""Episode logging (JaxMARL LogWrapper style): SPEC 3 metrics for every seat in `info["returned_episode_*"]`."""
from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from nexus_jax.envs.nexus.metrics import EpisodeAcc, accumulate, init_acc, summarize


@struct.dataclass
class LogEnvState:
    env_state: Any
    acc: EpisodeAcc  # the running episode
    returned: dict  # metrics of the last finished episode (zeros until one finishes)


class LogWrapper:
    """Wraps a Nexus env (the multi-agent `NexusEnv` or the single-agent gymnax view).

    Each step, the running totals absorb the step's `info`; when the episode ends (the env
    auto-resets), the finished episode's metrics replace `returned` and the totals restart.
    `info` gains `returned_episode_<metric>` for every metric of `metrics.summarize` (per-seat
    arrays over all N seats, NPCs included) and `returned_episode` (True on the step an
    episode ended). Unlike JaxMARL's, it needs no per-agent done: Nexus episodes end together.
    """

    def __init__(self, env, attribution_window: int = 10):
        if getattr(env, "info_mode", "full") != "full":
            raise ValueError(f"LogWrapper reads every seat's info: make the env with info_mode='full' "
                             f"(got info_mode={env.info_mode!r})")
        self._env = env
        self.attribution_window = int(attribution_window)

    def __getattr__(self, name):
        return getattr(self._env, name)

    @partial(jax.jit, static_argnums=(0,))
    def reset(self, key, params=None):
        obs, env_state = self._env.reset(key, params)
        acc = init_acc(env_state)
        returned = jax.tree.map(jnp.zeros_like, summarize(acc))
        return obs, LogEnvState(env_state, acc, returned)

    @partial(jax.jit, static_argnums=(0,))
    def step(self, key, state: LogEnvState, action, params=None):
        params = self._env.default_params if params is None else params
        out = self._env.step(key, state.env_state, action, params)
        obs, env_state, reward, info = out[0], out[1], out[2], out[-1]
        done = out[3] if len(out) == 5 else out[3] | out[4]  # gymnax 1.x view: terminated | truncated
        ep_done = done["__all__"] if isinstance(done, dict) else done
        acc = accumulate(state.acc, state.env_state, info, params, self.attribution_window)
        returned = jax.tree.map(lambda new, old: jnp.where(ep_done, new, old), summarize(acc), state.returned)
        acc = jax.tree.map(lambda fresh, cur: jnp.where(ep_done, fresh, cur), init_acc(env_state), acc)
        info = {**info, **{f"returned_episode_{k}": v for k, v in returned.items()}, "returned_episode": ep_done}
        return (obs, LogEnvState(env_state, acc, returned), reward) + tuple(out[3:-1]) + (info,)
