"""Host-side driver shared by the adapters.

`compiled(env_id, **overrides)` builds a registered env once per process and config and
jits its reset and step once (params are a traced argument, so changing a traced field
such as `max_steps` reuses the same executable). `HostSession` keeps one episode's JAX
state on the host between calls and follows `nexus_jax.play`'s key schedule:

    key = PRNGKey(seed); key, k_reset = split(key); reset(k_reset)
    each step: key, k_others, k_step = split(key, 3); step(k_step, ...)

The step is `env.step`'s transition without the auto-reset (`step_env` on the first half
of `split(k_step)`, exactly what `MultiAgentEnv.step` does), so an adapter returns the
terminal observation of an episode instead of the next episode's first one, and a
trajectory through an adapter equals `env.step(k_step, state, actions)` with the same keys.
"""
from __future__ import annotations

import functools
from typing import Any, Dict, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

import nexus_jax
from nexus_jax.protocol.seats import text_seat
from nexus_jax.registry import DEFAULT_ENV

_CACHE: Dict[Any, "Compiled"] = {}


def _freeze(x: Any) -> Any:
    if isinstance(x, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return tuple(_freeze(v) for v in x)
    if isinstance(x, np.ndarray):
        return ("ndarray", x.dtype.str, x.shape, x.tobytes())
    return x


def _reset(env, key, params):
    obs, state = env.reset_env(key, params)
    return obs, state, env.avail_actions_array(state, params)


def _step(env, key, state, actions, params):
    key_step, _ = jax.random.split(key)  # MultiAgentEnv.step's split: the same transition as env.step(key, ...)
    obs, state, rew, done, info = env.step_env(key_step, state, actions, params)
    if hasattr(state, "step") and hasattr(params, "max_steps"):
        truncated = done & (state.step >= params.max_steps)  # the time limit; any other end is a termination
    else:
        truncated = jnp.zeros((), bool)
    return obs, state, rew, done, truncated, info, env.avail_actions_array(state, params)


class Compiled:
    """One env and its jitted `reset(key, params)` / `step(key, state, flat_actions, params)`."""

    def __init__(self, env: Any, env_id: str = "", overrides: Optional[dict] = None):
        self.env = env
        self.env_id = env_id
        self.overrides = dict(overrides or {})
        self.params = env.default_params
        self.agents = list(env.agents)
        self.seats = tuple(int(a.rsplit("_", 1)[-1]) for a in self.agents)
        self.num_all = int(getattr(self.params, "num_agents", len(self.agents)))
        self.num_actions = int(env.action_space(self.agents[0]).n)
        self.obs_dim = int(env.observation_space(self.agents[0]).shape[0])
        self.reset = jax.jit(functools.partial(_reset, env))
        self.step = jax.jit(functools.partial(_step, env))

    @functools.cached_property
    def text(self):
        """The env's text seat (`nexus_jax.protocol.seats`), None when its spec names no text protocol."""
        return text_seat(self.env) if self.env.spec.text_protocol is not None else None

    def render(self, state, seats) -> str:
        """The prompts of `seats` (the text protocol's, without its help), or the state's repr without one."""
        if self.text is None:
            return repr(state)
        return "\n\n".join(self.text.render(state, seat, include_help=False) for seat in seats)


def compiled(env_id: str = DEFAULT_ENV, **overrides: Any) -> Compiled:
    """The cached `Compiled` for `nexus_jax.make(env_id, **overrides)` (built on first use)."""
    try:
        key = (env_id, _freeze(overrides))
        hash(key)
    except TypeError:  # unhashable override: no caching
        key = None
    if key is not None and key in _CACHE:
        return _CACHE[key]
    c = Compiled(nexus_jax.make(env_id, **{"info_mode": "full", **overrides}), env_id, overrides)  # adapters read every seat's info
    if key is not None:
        _CACHE[key] = c
    return c


def fresh_seed() -> int:
    return int(np.random.SeedSequence().entropy % (2**31 - 1))


class HostSession:
    """One episode at a time of a compiled env, its state on the host between calls.

    `reset(seed)`: `seed` restarts play.py's key schedule at PRNGKey(seed); `None` continues
    from the running key (a fresh random seed the first time). `step(flat)` takes (L,) flat
    actions of the external seats, `env.agents` order. Results are NumPy.
    """

    def __init__(self, c: Compiled):
        self.c = c
        self.key: Optional[jax.Array] = None
        self.state: Any = None
        self.prev_state: Any = None
        self.mask: Optional[np.ndarray] = None
        self.done = True
        self.steps = 0

    def reset(self, seed: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray]:
        if seed is not None:
            self.key = jax.random.PRNGKey(int(seed))
        elif self.key is None:
            self.key = jax.random.PRNGKey(fresh_seed())
        self.key, k_reset = jax.random.split(self.key)
        obs, self.state, mask = self.c.reset(k_reset, self.c.params)
        obs, self.mask = jax.device_get((obs, mask))
        self.prev_state = None
        self.done = False
        self.steps = 0
        return np.asarray(obs, np.float32), np.asarray(self.mask, bool)

    def step(self, flat: np.ndarray, fill=None):
        """-> obs (L, D) float32, rewards (L,) float32, terminated, truncated (bools), info (NumPy tree), mask (L, A).

        `fill(k_others, state, flat) -> flat`, when given, completes the other external seats' actions
        with play.py's `k_others` key (the seat the caller plays is already in `flat`)."""
        if self.state is None:
            raise RuntimeError("reset() before step()")
        if self.done:
            raise RuntimeError("the episode is over: reset() before stepping again")
        self.key, k_others, k_step = jax.random.split(self.key, 3)
        if fill is not None:
            flat = fill(k_others, self.state, flat)
        flat = np.asarray(flat, np.int32).reshape(len(self.c.agents))
        self.prev_state = self.state
        obs, self.state, rew, done, trunc, info, mask = self.c.step(k_step, self.state, jnp.asarray(flat), self.c.params)
        obs, rew, done, trunc, info, mask = jax.device_get((obs, rew, done, trunc, info, mask))
        self.mask = np.asarray(mask, bool)
        self.done = bool(done)
        self.steps += 1
        truncated = bool(trunc)
        terminated = self.done and not truncated
        return np.asarray(obs, np.float32), np.asarray(rew, np.float32), terminated, truncated, info, self.mask

    def seat_info(self, info: Any, seat: int) -> dict:
        """The per-seat entries of a step's info (top-level arrays with a leading axis over all N seats)."""
        out = {}
        for k, v in (info or {}).items():
            if isinstance(v, dict):
                continue
            a = np.asarray(v)
            if a.ndim >= 1 and a.shape[0] == self.c.num_all:
                x = a[seat]
                out[k] = x.item() if x.ndim == 0 else x
        return out


class JaxStateAccess:
    """What every adapter exposes of the JAX side: the wrapped env and its host-held state.

    Mixed into adapters that set `self._c` (a `Compiled`) and `self._session` (a `HostSession`).
    """

    @property
    def jax_env(self):
        """The wrapped nexus_jax env."""
        return self._c.env

    @property
    def state_jax(self):
        """The current JAX state (host side)."""
        return self._session.state
