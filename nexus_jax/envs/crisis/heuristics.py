"""Hand-written crisis-v0 policies (not learners): references for evaluation, the other seats of a text seat,
and the slot scorer's prior.

Every rule requests one ready task (REQUEST a slot, with HOLD unless said) and otherwise waits; the rules
differ only in the score that ranks the slots, and `request_first` is the one place a ranking becomes an
action (least score first, lowest slot on ties, WAIT when no slot is requestable). A rule reads its scores
either from the state (`RULES`, in hours) or from an observation's slot features (`SLOT_RULES`, hours as
shares of the episode: `SlotLayout` says where they sit); EDF from either picks the same action.

`RULES`: name -> `rule(state, masks, params) -> (A,) int32` flat actions of every seat, one env, `masks`
(A, n) from `avail_actions` (vmap for a batch); the env's `spec.heuristics` serve them as
`heuristic(key, state, params)`, the masks computed from the state.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from nexus_jax.base.spec import SlotLayout
from nexus_jax.envs.crisis.constants import Base, Nego
from nexus_jax.envs.crisis.dependencies import dependency_features
from nexus_jax.envs.crisis.negotiation import avail_actions, encode, now_hours, used

FIRST_REQUEST = encode(Base.REQUEST, Nego.HOLD, 0)  # REQUEST slot k with HOLD is FIRST_REQUEST + 2 k, YIELD the next
ACTIONS_PER_SLOT = 2
WAIT = encode(Base.WAIT, Nego.HOLD)
CHAIN_TIGHT_H = 1.2  # edf_chain's slack threshold (hours), chosen on the training distribution (docs/crisis.md)
UNBLOCK_TIGHT_H = 1.0  # edf_unblock's slack threshold (hours)
# The fit-unless-loose ranking's offsets, in hours (state) and in shares of the episode (slot features):
# a task's count (what it unlocks) counts before its deadline, and a task that does not fit now comes last.
COUNT_WEIGHT_H, UNFIT_PENALTY_H = 100.0, 1e3
COUNT_WEIGHT_FEATURE, UNFIT_PENALTY_FEATURE = 1e3, 1e4


# ---- the one ranking ------------------------------------------------------------------------------------
def requestable(masks: jax.Array, slots: int) -> jax.Array:
    """(..., K) bool: REQUEST slot k (with HOLD) is valid, from (..., n) flat masks."""
    return masks[..., FIRST_REQUEST:FIRST_REQUEST + ACTIONS_PER_SLOT * slots:ACTIONS_PER_SLOT]


def request_first(req: jax.Array, score: jax.Array, nego: int = Nego.HOLD) -> jax.Array:
    """(...) int32 flat actions: REQUEST (with `nego`) the requestable slot of least `score` (..., K), the lowest
    slot on ties; WAIT when no slot is requestable."""
    pick = jnp.argmin(jnp.where(req, score, jnp.inf), -1)
    return jnp.where(req.any(-1), FIRST_REQUEST + ACTIONS_PER_SLOT * pick + nego, WAIT).astype(jnp.int32)


def fit_unless_loose(req, deadline, slack, fits, count, tight, count_weight, unfit_penalty) -> jax.Array:
    """(..., K) scores of EDF among the tasks that fit now, except that while no requestable task has under
    `tight` slack, the task with the largest `count` comes first (EDF among equals). Any units: the offsets
    `count_weight` and `unfit_penalty` are in the deadline's."""
    is_tight = jnp.any(req & (slack < tight), -1, keepdims=True)
    score = jnp.where(is_tight, deadline, deadline - count_weight * count)
    return score + jnp.where(fits, 0.0, unfit_penalty)


# ---- what the rules read of a state (one env: (A, K)) ---------------------------------------------------
def hours_left(state) -> jax.Array:
    return jnp.maximum(state.tasks.duration_min - state.progress_min, 0.0) / 60.0


def slack(state, params) -> jax.Array:
    """(A, K) hours to the deadline minus hours of work left."""
    return state.tasks.deadline_h - now_hours(state.step, params) - hours_left(state)


def fits_now(state) -> jax.Array:
    """(A, K) bool: the task fits the free capacity now (the others are denied this step)."""
    free = state.capacity - used(state)
    return jnp.all(state.tasks.demand() <= free[None, None, :] + 1e-6, -1)


def unblocks(state) -> jax.Array:
    """(A, K): how many undone tasks each task's finish makes ready (it is their only missing prerequisite)."""
    A, K = state.done.shape
    done = state.done.reshape(A * K)
    missing = state.tasks.deps & ~done[None, :]  # [t, u]: t needs u, u not done
    becomes = missing & (missing.sum(-1) == 1)[:, None] & ~done[:, None]
    return becomes.sum(0).reshape(A, K)


# ---- rules from the state: (state, masks, params) -> (A,) int32 -----------------------------------------
def _req(state, masks):
    return requestable(masks, state.done.shape[-1])


def edf_actions(state, masks, params) -> jax.Array:
    """Earliest deadline first: request the requestable task with the earliest deadline, HOLD, never release,
    WAIT while a task runs (or nothing is requestable)."""
    return request_first(_req(state, masks), state.tasks.deadline_h)


def edf_fit(state, masks, params) -> jax.Array:
    """EDF among the tasks that fit the free capacity now (others are denied this step), else EDF."""
    return request_first(_req(state, masks), state.tasks.deadline_h + jnp.where(fits_now(state), 0.0, UNFIT_PENALTY_H))


def least_slack(state, masks, params) -> jax.Array:
    return request_first(_req(state, masks), slack(state, params))


def edf_short_ties(state, masks, params) -> jax.Array:
    """EDF, deadline ties to the shortest task."""
    return request_first(_req(state, masks), state.tasks.deadline_h + 0.01 * hours_left(state))


def shortest_unless_tight(state, masks, params) -> jax.Array:
    """Shortest task first (more early-completion bonus) unless some task has under 1 h of slack."""
    s = slack(state, params)
    return request_first(_req(state, masks), jnp.where(s < 1.0, s - 100.0, hours_left(state)))


def _fit_unless_loose_h(state, masks, params, tight_h, count):
    req = _req(state, masks)
    return request_first(req, fit_unless_loose(req, state.tasks.deadline_h, slack(state, params), fits_now(state),
                                               count, tight_h, COUNT_WEIGHT_H, UNFIT_PENALTY_H))


def edf_unblock(state, masks, params) -> jax.Array:
    """edf_fit, but while no requestable task has under 1 h of slack, first the task whose finish makes the
    most dependent tasks ready (one level of the dependency graph; EDF among equals)."""
    return _fit_unless_loose_h(state, masks, params, UNBLOCK_TIGHT_H, unblocks(state))


def edf_chain(state, masks, params) -> jax.Array:
    """edf_fit, but while no requestable task has under 1.2 h of slack, first the task whose chain unlocks the
    most tasks of idle seats (`dependency_features` "idle_unlocks": tasks of seats with nothing running or
    ready whose every other undone prerequisite is on its chain; EDF among equals). On the default set that
    is `load_raw_batch_3` first."""
    return _fit_unless_loose_h(state, masks, params, CHAIN_TIGHT_H, dependency_features(state, params)[..., 4])


def edf_yield(state, masks, params) -> jax.Array:
    """EDF that always YIELDs (steps back under contention)."""
    return request_first(_req(state, masks), state.tasks.deadline_h, Nego.YIELD)


def static_order(state, masks, priority) -> jax.Array:
    """Each seat requests its requestable task of lowest rank in `priority` (A, K) (a fixed order, not a rule
    of the state)."""
    return request_first(_req(state, masks), priority)


RULES = {"edf": edf_actions, "edf_fit_now": edf_fit, "least_slack": least_slack, "edf_short_ties": edf_short_ties,
         "shortest_unless_tight": shortest_unless_tight, "edf_unblock": edf_unblock, "edf_chain": edf_chain,
         "edf_always_yield": edf_yield}


def _heuristic(rule):
    def heuristic(key, state, params):
        return rule(state, avail_actions(state, params), params)

    heuristic.__doc__ = rule.__doc__
    return heuristic


HEURISTICS = {name: _heuristic(rule) for name, rule in RULES.items()}  # the env's `spec.heuristics`


# ---- rules from slot features: (slots (..., K, F), masks (..., n), layout, tight) -> (...) int32 --------
def edf_from_slots(slots, masks, layout: SlotLayout, tight: float) -> jax.Array:
    """`edf_actions` read from the slots' features: the least time to the deadline (`tight` unused)."""
    return request_first(requestable(masks, layout.slots), slots[..., layout.deadline])


def edf_chain_from_slots(slots, masks, layout: SlotLayout, tight: float) -> jax.Array:
    """`edf_chain` read from the slots' features (needs the idle-unlocks feature): `tight` is its slack
    threshold in feature units (1.2 h of an 8 h episode is 0.15)."""
    req = requestable(masks, layout.slots)
    f = lambda i: slots[..., i]  # noqa: E731
    return request_first(req, fit_unless_loose(req, f(layout.deadline), f(layout.slack), f(layout.fits) > 0.5,
                                                f(layout.idle_unlocks), tight, COUNT_WEIGHT_FEATURE,
                                                UNFIT_PENALTY_FEATURE))


SLOT_RULES = {"edf": edf_from_slots, "edf_chain": edf_chain_from_slots}
