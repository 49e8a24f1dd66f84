"""Single-agent gymnax view of Nexus: one learner seat against jitted NPCs in every other seat.

`make_gymnax(id)` serves the one-learner ids (`gymnax_ids()`) as registered; a self-play id (no NPC
seat) or a non-Nexus id is a ValueError naming what serves it (docs/design.md).

The interface of the gymnax PyPI release (1.x, the one the `jaxmarl` extra installs), so
gymnax's own wrappers (`LogWrapper`, `FlattenObservationWrapper`) run on it unchanged:
`reset(key, params=None) -> (obs, state)`, `step(key, state, action, params=None) ->
(obs, state, reward, terminated, truncated, info)` with auto-reset and gymnax 1.x's info
entries (`terminated`, `truncated`, `final_observation`), `observation_space(params)`,
`action_space(params)`, `default_params`, `num_actions`; truncated = the step limit,
terminated = the optional stochastic end. `gymnax_v1=False` gives the 0.0.x 5-tuple
`(obs, state, reward, done, info)` that PureJaxRL's own `wrappers.py` (written for gymnax
0.0.x) unpacks. `action_mask(state, params)` gives the seat's valid actions.

`action_format` is the multi-agent env's (`NexusEnv`): "flat" (an index, scalar or `(1,)`),
"compact" (an index of the small space in compact.py) or "structured" (a `(5,)` row).
Spaces are the ecosystem's classes when gymnax is imported (core/spaces.py).
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from nexus_jax.envs.nexus import noise
from nexus_jax.base import Box, Discrete, MultiDiscrete
from nexus_jax.envs.nexus import actions as A
from nexus_jax.envs.nexus import compact as C
from nexus_jax.envs.nexus import core
from nexus_jax.envs.nexus.env import NexusEnv, action_snapshot
from nexus_jax.envs.nexus.validity import flat_mask
from nexus_jax.envs.nexus.npc.seats import step_with_npcs
from nexus_jax.envs.nexus.observation import observe
from nexus_jax.envs.nexus.params import NexusParams
from nexus_jax.registry import make as make_env, registered_envs, variant
from nexus_jax.registry import DEFAULT_ENV


class NexusGymnax:
    """Seat `seat` is the agent; the other seats play their archetypes (`params.archetypes`)."""

    def __init__(self, params: NexusParams | None = None, seat: int = 0, gymnax_v1: bool = True,
                 action_format: str = "flat"):
        self._params = NexusParams.create() if params is None else params
        if not 0 <= seat < self._params.num_agents:
            raise ValueError(f"seat must be in 0..{self._params.num_agents - 1}, got {seat}")
        if action_format not in NexusEnv.ACTION_FORMATS:
            raise ValueError(f"action_format must be one of {NexusEnv.ACTION_FORMATS}, got {action_format!r}")
        self.seat = int(seat)
        self.gymnax_v1 = bool(gymnax_v1)
        self.action_format = action_format
        n, levels = self._params.num_agents, self._params.num_levels
        self.num_actions = C.num_compact_actions(n) if action_format == "compact" else A.num_flat_actions(n, levels)
        self.obs_dim = jax.eval_shape(lambda k: core.reset(k, self._params)[0], jax.random.PRNGKey(0)).shape[1]

    @classmethod
    def make(cls, env_id: str = DEFAULT_ENV, seat: int = 0, gymnax_v1: bool = True, action_format: str = "flat",
             **overrides) -> "NexusGymnax":
        """The view over a registered one-learner Nexus variant's params (its NPC mix), seat `seat` the agent.

        Any other id (self-play, where no seat is an NPC; a non-Nexus env) is a ValueError naming what serves it."""
        check_gymnax_id(env_id)
        return cls(make_env(env_id, learner_seats=(seat,), **overrides).default_params, seat, gymnax_v1,
                   action_format)

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
        """Step with auto-reset (the returned obs and state are a fresh episode's when the episode ended)."""
        params = self._p(params)
        key_step, key_reset = noise.split(key)
        obs_st, state_st, reward, done, info = self.step_env(key_step, state, action, params)
        obs_re, state_re = self.reset_env(key_reset, params)
        state = jax.tree.map(lambda r, s: jax.lax.select(done, r, s), state_re, state_st)
        obs = jax.lax.select(done, obs_re, obs_st)
        if self.gymnax_v1:
            truncated = state_st.step >= params.max_steps
            terminated = done & ~truncated
            info = {**info, "terminated": terminated, "truncated": truncated, "final_observation": obs_st}
            return obs, state, reward, terminated, truncated, info
        return obs, state, reward, done, info

    def reset_env(self, key, params):
        obs, state = core.reset(key, params)
        return obs[self.seat], state

    def _external(self, action, params):
        """The seat's action in `action_format` -> the core's (1,) flat or (1, 5) structured row."""
        action = jnp.asarray(action)
        ok = [(5,)] if self.action_format == "structured" else [(), (1,)]
        if tuple(action.shape) not in ok or not jnp.issubdtype(action.dtype, jnp.integer):
            raise ValueError(f"NexusGymnax.step: the action has shape {tuple(action.shape)} and dtype {action.dtype}; "
                             f"action_format={self.action_format!r} takes an integer array of shape "
                             f"{' or '.join(str(s) for s in ok)}")
        if self.action_format == "structured":
            return action.astype(jnp.int32)[None]
        action = action.astype(jnp.int32).reshape(1)
        if self.action_format == "compact":
            return C.to_flat(action, C.seat_table(params, (self.seat,)))
        return action

    def step_env(self, key, state, action, params):
        """One step without reset -> (obs, state, reward, done, info); `info` covers every seat."""
        obs, state, rew, done, info = step_with_npcs(key, state, self._external(action, params), params, (self.seat,))
        info = {**info, "discount": 1.0 - done.astype(jnp.float32)}
        return obs[self.seat], state, rew[self.seat], done, info

    def get_obs(self, state, params=None):
        return observe(state, self._p(params))[self.seat]

    def action_mask(self, state, params=None):
        """(num_actions,) bool: the seat's valid flat actions next step."""
        params = self._p(params)
        mask = flat_mask(action_snapshot(state, params), params, jnp.array([self.seat]))[0]
        if self.action_format == "compact":
            return C.compact_mask(mask[None], C.seat_table(params, (self.seat,)))[0]
        return mask

    def is_terminal(self, state, params=None):
        return state.step >= self._p(params).max_steps

    def observation_space(self, params=None):
        return Box(-jnp.inf, jnp.inf, (self.obs_dim,))

    def action_space(self, params=None):
        if self.action_format == "structured":
            p = self._p(params)
            return MultiDiscrete(A.factored_nvec(p.num_agents, p.num_levels))
        return Discrete(self.num_actions)


def serves(env_id: str) -> bool:
    """Whether the view has `env_id` as registered: a Nexus variant with one learner seat, NPCs in the others."""
    factory, defaults = variant(env_id)
    return factory == NexusEnv.create and len(defaults.get("learner_seats") or ()) == 1


def gymnax_ids() -> list[str]:
    """Every registered id `make_gymnax` serves."""
    return [i for i in registered_envs() if serves(i)]


def check_gymnax_id(env_id: str) -> None:
    """ValueError unless the view serves `env_id`, naming what does: the multi-agent env, the same rules with NPCs.

    A self-play id has no single-agent form: its other seats are learners, and a gymnax env has one policy
    outside it. Serving it with NPCs in those seats would be another env under its name (docs/design.md)."""
    factory, defaults = variant(env_id)  # an unknown id: ValueError listing the registered ones
    if serves(env_id):
        return
    multi = f"nexus_jax.make({env_id!r}) is its multi-agent env (JaxMARL's dict API: IPPO/MAPPO code runs on it)"
    if factory != NexusEnv.create:
        raise ValueError(f"make_gymnax({env_id!r}): the single-agent gymnax view covers one-learner Nexus ids, and "
                         f"{env_id!r} is not one; {multi}. make_gymnax serves: {gymnax_ids()}")
    seats = defaults.get("learner_seats")
    learners = "every seat of {} learns" if seats is None else f"{len(seats)} seats of {{}} learn"
    npc_twin = env_id.replace("-selfplay", "")
    instead = (f"make_gymnax({npc_twin!r}) has the same rules with NPCs in the other seats"
               if npc_twin in registered_envs() and serves(npc_twin) else f"make_gymnax serves: {gymnax_ids()}")
    raise ValueError(f"make_gymnax({env_id!r}): {learners.format(repr(env_id))} (self-play), and the gymnax view is one "
                     f"learner against NPCs, so it has no single-agent form; {multi}; {instead}")


def make_gymnax(env_id: str = DEFAULT_ENV, **kwargs) -> tuple[NexusGymnax, NexusParams]:
    """`gymnax.make`'s shape, `(env, env_params)`, for a registered Nexus variant (kwargs as `NexusGymnax.make`)."""
    env = NexusGymnax.make(env_id, **kwargs)
    return env, env.default_params
