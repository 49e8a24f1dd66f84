"""The per-step cycle, one function per phase, in the order `CrisisEnv.step_env` runs them.

validate -> release -> intent broadcast -> emergency charter -> market bargaining ->
coalition contracting -> promise settlement -> belief updates (the negotiation cycle of
SPEC.md section 4), then task progress, deadlines and crises (see env.py). Every phase is
pure and masked: with negotiation off (curriculum level 0) yields, the charter, contracts
and reputation priority are inert and beliefs see only realised allocations.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from nexus_jax.envs.crisis.constants import NUM_RESOURCES, Base, Error, Nego
from nexus_jax.envs.crisis.crises import greedy_fit


def now_hours(step: jax.Array, params) -> jax.Array:
    return step.astype(jnp.float32) * params.minutes_per_step / 60.0


def num_actions(max_tasks: int) -> int:
    """Size of the flat Discrete enumeration: (WAIT, RELEASE, REQUEST slot 0..K-1) x (HOLD, YIELD)."""
    return (2 + max_tasks) * 2


def encode(base: int, nego: int = 0, slot: int = 0) -> int:
    """Flat action index of (base, slot, nego); `slot` only for Base.REQUEST."""
    b = int(base) + (int(slot) if int(base) == Base.REQUEST else 0)
    return b * 2 + int(nego)


def decode(actions: jax.Array, max_tasks: int):
    """Flat (A,) -> (base kind (A,), slot (A,), yield (A,), in_range (A,))."""
    n = num_actions(max_tasks)
    in_range = (actions >= 0) & (actions < n)
    a = jnp.where(in_range, actions, 0)
    b, nego = a // 2, a % 2
    kind = jnp.minimum(b, Base.REQUEST)
    slot = jnp.maximum(b - Base.REQUEST, 0)
    return kind, slot, nego == Nego.YIELD, in_range


def negotiation_on(state, params) -> jax.Array:
    return state.level >= params.negotiation_min_level


def deps_done(state) -> jax.Array:
    """(A, K) bool: every dependency of the slot is done."""
    A, K = state.done.shape
    done_flat = state.done.reshape(-1)
    return jnp.all(~state.tasks.deps | done_flat[None, :], axis=1).reshape(A, K)


def ready(state) -> jax.Array:
    """(A, K) bool: requestable now (released, not done, dependencies done, not holding resources)."""
    K = state.done.shape[1]
    running = state.running_slot[:, None] == jnp.arange(K)[None, :]
    return state.tasks.exists & state.released & ~state.done & deps_done(state) & ~running


def used(state) -> jax.Array:
    """(3,) resources held by running tasks."""
    return jnp.sum(running_demand(state), axis=0)


def running_demand(state) -> jax.Array:
    """(A, 3) demand of each seat's running task (zeros when none)."""
    A = state.running_slot.shape[0]
    d = state.tasks.demand()[jnp.arange(A), jnp.maximum(state.running_slot, 0)]
    return jnp.where((state.running_slot >= 0)[:, None], d, 0.0)


def request_valid(state, params) -> jax.Array:
    """(A, K) bool: REQUEST of slot k is valid (ready, no task running, fits the cluster's capacity now)."""
    fits = jnp.all(state.tasks.demand() <= state.capacity[None, None, :] + 1e-6, axis=-1)
    return ready(state) & fits & (state.running_slot < 0)[:, None]


def avail_actions(state, params) -> jax.Array:
    """(A, n) bool action mask; both negotiation choices share their base action's validity."""
    A = state.running_slot.shape[0]
    base = jnp.concatenate([jnp.ones((A, 1), bool), (state.running_slot >= 0)[:, None], request_valid(state, params)], 1)
    return jnp.repeat(base, 2, axis=1)


@struct.dataclass
class Intents:
    """What every seat asked for this step (broadcast to all when negotiation is on)."""

    requested: jax.Array  # (A,) bool
    slot: jax.Array  # (A,) int
    demand: jax.Array  # (A, 3) float (zeros when not requesting)
    yields: jax.Array  # (A,) bool, the negotiation choice
    urgency: jax.Array  # (A,) float
    release: jax.Array  # (A,) bool
    error: jax.Array  # (A,) int Error
    invalid: jax.Array  # (A,) bool


def validate(state, actions: jax.Array, params) -> Intents:
    """Decode actions; an invalid one becomes WAIT with its error code (never touches state)."""
    K = params.max_tasks
    A = state.running_slot.shape[0]
    kind, slot, yields, in_range = decode(actions, K)
    rv = request_valid(state, params)[jnp.arange(A), slot]
    is_req, is_rel = in_range & (kind == Base.REQUEST), in_range & (kind == Base.RELEASE)
    has_running = state.running_slot >= 0
    ready_slot = ready(state)[jnp.arange(A), slot]
    error = jnp.select(
        [~in_range, is_rel & ~has_running, is_req & has_running, is_req & ~ready_slot, is_req & ~rv],
        [Error.OUT_OF_RANGE, Error.NOTHING_TO_RELEASE, Error.ALREADY_RUNNING, Error.TASK_NOT_READY,
         Error.EXCEEDS_CAPACITY],
        Error.NONE,
    ).astype(jnp.int32)
    ok = error == Error.NONE
    requested, release = is_req & ok, is_rel & ok
    demand = jnp.where(requested[:, None], state.tasks.demand()[jnp.arange(A), slot], 0.0)
    return Intents(requested=requested, slot=slot, demand=demand, yields=yields & ok, urgency=jnp.zeros(A),
                   release=release, error=error, invalid=~ok)


def release_phase(state, intents: Intents):
    """RELEASE frees the seat's running task (progress is kept; the task must be requested again)."""
    return state.replace(running_slot=jnp.where(intents.release, -1, state.running_slot))


def intent_broadcast(state, intents: Intents, params) -> Intents:
    """Score each request's urgency [seed]: pressure / (hours to deadline + 1) + remaining hours of work."""
    A = intents.slot.shape[0]
    rows = jnp.arange(A)
    left_h = jnp.maximum(state.tasks.deadline_h[rows, intents.slot] - now_hours(state.step, params), 0.0)
    remaining_h = (state.tasks.duration_min - state.progress_min)[rows, intents.slot] / 60.0
    urgency = params.urgency_pressure / (left_h + 1.0) + remaining_h
    return intents.replace(urgency=jnp.where(intents.requested, urgency, 0.0))


def emergency_charter(state, intents: Intents, params) -> jax.Array:
    """(A,) bool: requests within charter_hours of their deadline go first (negotiation on only)."""
    A = intents.slot.shape[0]
    left_h = state.tasks.deadline_h[jnp.arange(A), intents.slot] - now_hours(state.step, params)
    return intents.requested & (left_h <= params.charter_hours) & negotiation_on(state, params)


def reputation(trust: jax.Array) -> jax.Array:
    """(A,) mean trust the others place in each seat."""
    A = trust.shape[0]
    off = ~jnp.eye(A, dtype=bool)
    return jnp.sum(jnp.where(off, trust, 0.0), axis=0) / (A - 1)


@struct.dataclass
class Market:
    contention: jax.Array  # () bool, requests exceeded free capacity
    yielded: jax.Array  # (A,) bool, withdrew under contention
    granted: jax.Array  # (A,) bool
    denied: jax.Array  # (A,) bool


def market_bargaining(state, intents: Intents, charter: jax.Array, params):
    """Allocate free capacity: under contention yielders step back, then charter, then priority order.

    Priority [seed]: urgency + charter_bonus (charter) + reputation_priority x reputation, with
    negotiation on; urgency alone with it off. Ties go to the lower seat. Grants never exceed
    the free capacity (greedy_fit), so capacity is never exceeded.
    """
    nego = negotiation_on(state, params)
    free = state.capacity - used(state)
    total = jnp.sum(jnp.where(intents.requested[:, None], intents.demand, 0.0), axis=0)
    contention = jnp.any(total > free + 1e-6)
    yielded = intents.requested & intents.yields & contention & nego
    contenders = intents.requested & ~yielded
    prio = intents.urgency + jnp.where(nego, params.charter_bonus * charter + params.reputation_priority
                                       * reputation(state.trust), 0.0)
    order = jnp.argsort(-prio, stable=True)
    granted = greedy_fit(order, intents.demand, contenders, free)
    running = jnp.where(granted, intents.slot, state.running_slot)
    market = Market(contention=contention, yielded=yielded, granted=granted, denied=contenders & ~granted)
    return state.replace(running_slot=running), market


def coalition_contracting(state, market: Market, params):
    """Each yield under contention creates a contract [yielder, winner]: "I yield now, you yield later"."""
    A = state.trust.shape[0]
    new = market.yielded[:, None] & market.granted[None, :] & ~jnp.eye(A, dtype=bool) & ~state.contract_open
    new = new & negotiation_on(state, params)
    return state.replace(contract_open=state.contract_open | new,
                         contract_age=jnp.where(new, 0, state.contract_age)), new


@struct.dataclass
class Settlement:
    honoured: jax.Array  # (A, A) bool [creditor, debtor]
    broken: jax.Array  # (A, A) bool
    expired: jax.Array  # (A, A) bool


def promise_settlement(state, prior_open: jax.Array, intents: Intents, market: Market, params):
    """Settle contracts made before this step; trust moves.

    A contract [c, d] is tested when c and d both request in a contested step: honoured if d
    yields, broken if d holds and c is denied. Untested contracts expire after contract_ttl
    steps with no trust change. Honoured: T[c, d] -> 1 at trust_honour_rate. Broken: T[c, d] -> 0
    at trust_break_rate and everyone's trust in d -> 0 at public_break_rate.
    """
    A = state.trust.shape[0]
    test = prior_open & intents.requested[:, None] & intents.requested[None, :] & market.contention
    honoured = test & market.yielded[None, :]
    broken = test & ~market.yielded[None, :] & market.denied[:, None]
    settled = honoured | broken
    age = state.contract_age + 1
    expired = prior_open & ~settled & (age >= params.contract_ttl)
    t = state.trust
    t = jnp.where(honoured, t + params.trust_honour_rate * (1.0 - t), t)
    t = jnp.where(broken, t - params.trust_break_rate * t, t)
    breaker = jnp.any(broken, axis=0)  # (A,) debtors who broke a contract
    public = breaker[None, :] & ~jnp.eye(A, dtype=bool) & ~broken  # creditors took the direct hit
    t = jnp.where(public, t - params.public_break_rate * t, t)
    t = jnp.clip(t, 0.0, 1.0)
    still_open = state.contract_open & ~settled & ~expired
    return state.replace(trust=t, contract_open=still_open, contract_age=jnp.where(still_open, age, 0)), \
        Settlement(honoured=honoured, broken=broken, expired=expired)


def belief_features(intents: Intents) -> jax.Array:
    """(A, 4) what each seat actually intended: cores, RAM, GPU demand and whether it yielded."""
    return jnp.concatenate([intents.demand, intents.yields[:, None].astype(jnp.float32)], 1)


def belief_accuracy(beliefs: jax.Array, truth: jax.Array) -> jax.Array:
    """(A,) each observer's accuracy about its peers' intents [seed]: 1 - mean relative error, floor 0."""
    A = beliefs.shape[0]
    scale = jnp.concatenate([jnp.maximum(truth[:, :NUM_RESOURCES], 1.0), jnp.ones((A, 1))], 1)
    err = jnp.abs(beliefs - truth[None, :, :]) / scale[None, :, :]
    acc = jnp.maximum(0.0, 1.0 - jnp.mean(err, -1))  # (observer, peer)
    off = ~jnp.eye(A, dtype=bool)
    return jnp.sum(jnp.where(off, acc, 0.0), 1) / (A - 1)


def belief_update(state, intents: Intents, params):
    """Measure belief accuracy against this step's true intents, then update the beliefs.

    With negotiation on, intents are broadcast: peers' demand and yield are seen. With it off,
    an observer sees only what each peer holds after the market (running task demand) and
    nothing of yields, so its model of intents is worse; that gap is what the seed measures.
    """
    truth = belief_features(intents)
    acc = belief_accuracy(state.beliefs, truth)
    nego = negotiation_on(state, params)
    seen_demand = jnp.where(nego, intents.demand, running_demand(state))
    r = params.belief_rate
    b = state.beliefs
    dem = (1.0 - r) * b[..., :NUM_RESOURCES] + r * seen_demand[None, :, :]
    y = params.yield_belief_decay * b[..., NUM_RESOURCES] + (1.0 - params.yield_belief_decay) * truth[None, :, NUM_RESOURCES]
    y = jnp.where(nego, y, b[..., NUM_RESOURCES])
    return state.replace(beliefs=jnp.concatenate([dem, y[..., None]], -1)), acc
