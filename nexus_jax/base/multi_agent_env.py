"""JaxMARL-compatible multi-agent base class over a functional, params-as-pytree core.

Subclasses implement the array-level pure functions `reset_env(key, params)` and
`step_env(key, state, actions, params)` (actions and outputs stacked over agents, no
auto-reset). This class adds what JaxMARL code expects: dicts keyed by agent name,
`dones["__all__"]`, and jit-safe auto-reset. `params` is optional everywhere (gymnax
style): `None` means the params the env was made with.

Actions are read by shape, never guessed: `action_shape` (a static attribute, `()` for a
Discrete space) is the shape of one agent's action. JaxMARL's IPPO/MAPPO `unbatchify` hands
each env a `(1,)` array per agent, so a `()` action may also arrive as `(1,)`; anything else
is a `ValueError` at trace time naming the agent, the shape received and the shapes accepted.
"""
from __future__ import annotations

from functools import partial
from typing import Any, Dict, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from nexus_jax.base.batch_minor import batch_minor
from nexus_jax.base.episode_metrics import EpisodeMetrics
from nexus_jax.base.spaces import compatible
from nexus_jax.base.spec import EnvSpec


class MultiAgentEnv:
    """Base for every nexus_jax env. `agents` are the seats the caller controls."""

    action_shape: tuple = ()  # one agent's action: () for Discrete; subclasses with row actions override
    action_format: str = "flat"  # named in error messages
    episode_metrics: EpisodeMetrics | None = None  # the env's episode metrics as a fold (base/episode_metrics.py)
    vmap_batch_minor: bool = True  # `vmap(step)` runs the step with the batch as the minor axis (base/batch_minor.py)
    spec: EnvSpec = EnvSpec()  # what the env offers (base/spec.py); each env sets its own

    def __init__(self, params: Any, agents: list[str]):
        self.default_params = params
        self.agents = list(agents)
        self.num_agents = len(self.agents)
        self._observation_spaces: dict = {}
        self._action_spaces: dict = {}

    # Spaces are upgraded to the ecosystem's classes imported by now (core/spaces.py) on every read.
    @property
    def observation_spaces(self) -> dict:
        self._observation_spaces = {a: compatible(s) for a, s in self._observation_spaces.items()}
        return self._observation_spaces

    @observation_spaces.setter
    def observation_spaces(self, spaces: dict) -> None:
        self._observation_spaces = dict(spaces)

    @property
    def action_spaces(self) -> dict:
        self._action_spaces = {a: compatible(s) for a, s in self._action_spaces.items()}
        return self._action_spaces

    @action_spaces.setter
    def action_spaces(self, spaces: dict) -> None:
        self._action_spaces = dict(spaces)

    # ---- to implement -------------------------------------------------------------
    def reset_env(self, key: jax.Array, params: Any) -> Tuple[jax.Array, Any]:
        """Return (obs stacked over `agents`, state)."""
        raise NotImplementedError

    def step_env(self, key: jax.Array, state: Any, actions: jax.Array, params: Any):
        """Return (obs, state, rewards, done, info), arrays stacked over `agents`."""
        raise NotImplementedError

    def get_obs_array(self, state: Any, params: Any) -> jax.Array:
        raise NotImplementedError

    def avail_actions_array(self, state: Any, params: Any) -> jax.Array:
        raise NotImplementedError

    # ---- JaxMARL dict API --------------------------------------------------------
    def _params(self, params):
        return self.default_params if params is None else params

    def _to_dict(self, stacked: jax.Array) -> Dict[str, jax.Array]:
        return {a: stacked[i] for i, a in enumerate(self.agents)}

    def _accepted_shapes(self) -> list[tuple]:
        """Shapes one agent's action may have: () or (1,) for a scalar action, else exactly `action_shape`."""
        return [(), (1,)] if tuple(self.action_shape) == () else [tuple(self.action_shape)]

    def _action_error(self, who: str, x, accepted: list[tuple]) -> ValueError:
        return ValueError(
            f"{self.name}.step: the action of {who} has shape {tuple(np.shape(x))} and dtype {jnp.result_type(x)}; "
            f"action_format={self.action_format!r} takes an integer array of shape "
            f"{' or '.join(str(s) for s in accepted)}. Structured (type, target, amount_1, amount_2, resource) rows "
            f"need action_format='structured'.")

    def _one_action(self, agent: str, x) -> jax.Array:
        x = jnp.asarray(x)
        if tuple(x.shape) not in self._accepted_shapes() or not jnp.issubdtype(x.dtype, jnp.integer):
            raise self._action_error(f"agent {agent!r}", x, self._accepted_shapes())
        return x.reshape(self.action_shape).astype(jnp.int32)

    def _stack(self, actions) -> jax.Array:
        """Per-agent actions (a dict) or one array stacked over agents -> (L,) + action_shape int32."""
        if isinstance(actions, dict):
            missing = [a for a in self.agents if a not in actions]
            if missing:
                raise KeyError(f"{self.name}.step: no action for {missing}; agents are {self.agents}")
            return jnp.stack([self._one_action(a, actions[a]) for a in self.agents])
        x = jnp.asarray(actions)
        stacked = [(self.num_agents,) + s for s in self._accepted_shapes()]
        if tuple(x.shape) not in stacked or not jnp.issubdtype(x.dtype, jnp.integer):
            raise self._action_error(f"all {self.num_agents} agents (stacked)", x, stacked)
        return x.reshape((self.num_agents,) + tuple(self.action_shape)).astype(jnp.int32)

    @partial(jax.jit, static_argnums=(0,))
    def reset(self, key: jax.Array, params: Any = None):
        obs, state = self.reset_env(key, self._params(params))
        return self._to_dict(obs), state

    def step_arrays(self, key: jax.Array, state: Any, actions: jax.Array, params: Any):
        """`step` at the array level: stacked actions (L, ...) -> (obs (L, D), state, rewards (L,), done (), info).

        The one auto-reset: when the episode ends, the returned state and obs are a fresh episode's.
        """
        key_step, key_reset = jax.random.split(key)
        obs_st, state_st, rewards, done, info = self.step_env(key_step, state, actions, params)
        obs_re, state_re = self.reset_env(key_reset, params)
        state = jax.tree.map(lambda r, s: jax.lax.select(done, r, s), state_re, state_st)
        obs = self.auto_reset_obs(done, obs_re, obs_st, state, params)
        return obs, state, rewards, done, info

    @partial(jax.jit, static_argnums=(0,))
    def step(self, key: jax.Array, state: Any, actions, params: Any = None):
        """Step with auto-reset (`step_arrays`) over dicts keyed by agent name."""
        step = batch_minor(self.step_arrays) if self.vmap_batch_minor else self.step_arrays
        obs, state, rewards, done, info = step(key, state, self._stack(actions), self._params(params))
        dones = {a: done for a in self.agents}
        dones["__all__"] = done
        return self._to_dict(obs), state, self._to_dict(rewards), dones, info

    def auto_reset_obs(self, done: jax.Array, obs_reset: jax.Array, obs_step: jax.Array, state: Any, params: Any):
        """The obs `step` returns: the reset's where `done`, else the step's.

        An env whose obs is a function of the state alone may override this to observe the
        selected `state` instead: XLA then drops the two unused observations, so a step
        computes one observation instead of two (the reset's is otherwise thrown away on
        almost every step).
        """
        return jax.lax.select(done, obs_reset, obs_step)

    def get_obs(self, state: Any, params: Any = None) -> Dict[str, jax.Array]:
        return self._to_dict(self.get_obs_array(state, self._params(params)))

    @partial(jax.jit, static_argnums=(0,))
    def get_avail_actions(self, state: Any, params: Any = None) -> Dict[str, jax.Array]:
        return self._to_dict(self.avail_actions_array(state, self._params(params)))

    def observation_space(self, agent: str):
        return self.observation_spaces[agent]

    def action_space(self, agent: str):
        return self.action_spaces[agent]

    @property
    def name(self) -> str:
        return type(self).__name__

    @property
    def agent_classes(self) -> dict:
        return {"agents": list(self.agents)}
