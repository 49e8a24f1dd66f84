"""The functional core of nexus-v0: pure `reset(key, params)` and `step(key, state, actions, params)`.

Arrays are stacked over all N seats; no auto-reset (the env class adds it). Actions are
flat indices (N,) or structured (N, 5). This is the source of truth for the rules.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from nexus_jax.envs.nexus import actions as A
from nexus_jax.envs.nexus import dynamics as D
from nexus_jax.envs.nexus.arith import materialize
from nexus_jax.envs.nexus.constants import NUM_OUTCOMES, ErrorCode
from nexus_jax.envs.nexus.ledger import append
from nexus_jax.envs.nexus.noise import split, uniform, uniforms
from nexus_jax.envs.nexus.observation import observe, utility
from nexus_jax.envs.nexus.reward import reward
from nexus_jax.envs.nexus.state import initial_state
from nexus_jax.envs.nexus.validity import check


def draw_reset_noise(key, num_agents: int) -> jnp.ndarray:
    """(N, 2) uniforms in [-1, 1]: the endowment jitter."""
    return uniform(key, (num_agents, 2), -1.0, 1.0)


def draw_behaviour_seats(key, params) -> jnp.ndarray:
    """(N,) int: which seat's behaviour each seat plays this episode. The seats marked in
    `params.behaviour_shuffle` get a uniformly random permutation of their behaviours; every other seat
    keeps its own (all-zero mask: the identity). Drawn from `fold_in(reset key, 1)`, so the endowment
    jitter (drawn from the reset key itself) is the same with or without it."""
    n = params.num_agents
    idx = jnp.arange(n, dtype=jnp.int32)
    marked = jnp.asarray(params.behaviour_shuffle) > 0

    def deal():
        u = jax.random.uniform(jax.random.fold_in(key, 1), (n,))
        slots = jnp.argsort(jnp.where(marked, idx, n + idx))  # the marked seats in seat order, then the rest
        dealt = jnp.argsort(jnp.where(marked, u, 2.0 + idx))  # the marked seats in random order, then the rest
        return jnp.zeros(n, jnp.int32).at[slots].set(dealt.astype(jnp.int32))

    # Params are rarely batched, so this is a real branch: every auto-reset of an env without hidden types
    # skips the draw and the two sorts (under a vmap over params it is a select of both, the same values).
    return jax.lax.cond(marked.any(), deal, lambda: idx)


def draw_step_noise(key, num_agents: int | None = None) -> D.StepNoise:
    """The step's two uniforms (`jax.random.uniform` of each half of `key`, in one threefry call) and, given
    `num_agents`, one per seat for the shock's reach, drawn from `fold_in(key, 1)` so the first two are
    the same whatever the reach."""
    shock_u, end_u = uniforms(split(key), [((), 0.0, 1.0), ((), 0.0, 1.0)])
    reach_u = None if num_agents is None else uniform(jax.random.fold_in(key, 1), (num_agents,))
    return D.StepNoise(shock_u=shock_u, end_u=end_u, reach_u=reach_u)


def reset(key, params, obs_seats: tuple | None = None):
    """-> (obs (N, D), state); obs only of `obs_seats` (a static tuple, M rows) when given."""
    state = initial_state(params, draw_reset_noise(key, params.num_agents), draw_behaviour_seats(key, params))
    return observe(state, params, obs_seats), state


def as_structured(actions: jnp.ndarray, params) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Flat (N,) or structured (N, 5) -> (structured (N, 5) int32, flat index out of range (N,)).

    Read by shape alone; any other shape (an (N, 1) column of flat indices, say) is a ValueError
    at trace time rather than a guess.
    """
    actions = jnp.asarray(actions)
    n_seats = params.num_agents
    if actions.shape not in ((n_seats,), (n_seats, 5)) or not jnp.issubdtype(actions.dtype, jnp.integer):
        raise ValueError(f"core.step: actions must be integer, flat ({n_seats},) or structured ({n_seats}, 5) "
                         f"(type, target, amount_1, amount_2, resource) rows; got shape {actions.shape} "
                         f"and dtype {actions.dtype}")
    actions = actions.astype(jnp.int32)
    if actions.ndim == 1:
        n = A.num_flat_actions(params.num_agents, params.num_levels)
        return A.decode(actions, params.num_agents, params.num_levels), (actions < 0) | (actions >= n)
    return actions, jnp.zeros(actions.shape[0], bool)


def step(key, state, actions, params, obs_seats: tuple | None = None):
    """-> (obs (N, D), state, reward (N,), done (), info). See dynamics.py for the phase order.

    `obs_seats` (a static tuple) observes only those seats (obs (M, D), rows in that order):
    observations are the largest part of a step that needs only the learners' rows.
    """
    return step_with_noise(state, actions, params, draw_step_noise(key, params.num_agents), obs_seats)


def step_with_noise(state, actions, params, noise: D.StepNoise, obs_seats: tuple | None = None):
    n = params.num_agents
    act, bad_index = (materialize(x) for x in as_structured(actions, params))  # read by every phase: decoded once
    prev = state
    outcome = (jnp.zeros(n, bool),) * NUM_OUTCOMES  # columns, stacked below

    state, ev1, outcome, inter1, st1 = D.expire(state, params, outcome)
    errors = check(state, params, None, act)  # the snapshot all actions are judged on; row i is agent i's
    errors = materialize(jnp.where(bad_index, ErrorCode.BAD_INDEX, errors))
    valid = materialize(errors == ErrorCode.OK)
    state, ev2, outcome, inter2, st2 = D.settle(state, params, act, valid, outcome)
    state, ev3, outcome, inter3, st3 = D.commit(state, params, act, valid, outcome)
    state, work_flows = D.own_actions(state, params, act, valid)
    state, outcome, eco_flows, st5 = D.economy(state, params, outcome)
    state, ev6, outcome, shock_flows, st6 = D.shock(state, params, noise, outcome)
    state = D.trust_decay(state, params, inter1 | inter2 | inter3)

    state = state.replace(
        ledger=append(state.ledger, ev1 + ev2 + ev3 + ev6, state.step),
        step=state.step + 1,
        last_error=errors,
        last_outcome=jnp.stack(outcome, 1),
    )
    invalid = ~valid
    stats = {**st1, **st2, **st3, **st5, **st6}
    if params.signal_prepay:  # a forward delivered on a paid-ahead signal is a trade ([giver, receiver])
        stats["trades"] = st2["trades"] | st3["forwards"]
    early = (state.step > params.early_end_after) & (noise.end_u < params.early_end_prob)
    done = materialize((state.step >= params.max_steps) | early)  # read by every leaf's auto-reset select
    rewards = reward(prev, state, invalid, done, params)
    info = {
        "error_code": errors,
        "invalid": invalid,
        "utility": utility(state),
        "flows": {**work_flows, **eco_flows, **shock_flows},
        "stats": stats,
    }
    return observe(state, params, obs_seats), state, rewards, done, info
