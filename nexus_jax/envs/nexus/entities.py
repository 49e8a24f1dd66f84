"""Entity view of a Nexus observation: own features, one row per other seat, one row per ledger event.

The flat vector (`observation.py`) indexes seats absolutely, so its size and meaning depend
on N. The entity view is what a policy for any number of seats reads (docs/populations.md):

- `own` (F_OWN,): the observer's holdings, reputation, last error and outcome, shock, time;
- `seats` (R, F_SEAT): one row per *other* seat, in order relative to the observer (row r is
  seat (i + 1 + r) mod N), with its public state, trust both ways, the open proposals and
  signals between the two, and its open signals with third parties. R = N - 1, or
  `pad_to - 1` with masked zero rows after the real ones;
- `events` (K, F_EVENT): the K newest ledger events, newest first; the parties appear as
  "is me" flags and as seat-row indices (`event_actor`, `event_target`: -1 for me or none),
  never as absolute seat numbers.

No feature names an absolute seat index, so relabelling the seats of a state permutes the
rows and changes nothing else (tests/test_entities.py). `seat_id` carries each row's
absolute seat so a pointer over rows can be turned back into the env's target field.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from nexus_jax.envs.nexus.arith import small_sum
from nexus_jax.envs.nexus.constants import NUM_ERROR_CODES, NUM_EVENT_KINDS, NUM_OUTCOMES, NUM_SHOCK_KINDS
from nexus_jax.envs.nexus.ledger import newest
from nexus_jax.envs.nexus.observation import utility
from nexus_jax.envs.nexus.trust import reputation

PAIR_FEATURES = ("active", "give", "want", "resource", "age")  # of one proposal or signal
OWN_FEATURES = (("available", 2), ("escrow", 2), ("vault", 2), ("pending_withdrawals", 2), ("collateral", 1),
                ("tax_immunity", 1), ("utility", 1), ("reputation", 1), ("last_error", NUM_ERROR_CODES),
                ("last_outcome", NUM_OUTCOMES), ("shock", NUM_SHOCK_KINDS), ("shock_remaining", 1), ("time", 1))
SEAT_FEATURES = (("liquid", 2), ("collateral", 1), ("reputation", 1), ("trust_mine", 1), ("trust_theirs", 1),
                 ("proposal_to_them", 5), ("proposal_to_me", 5), ("signal_to_them", 5), ("signal_to_me", 5),
                 ("signals_open_out", 1), ("signals_open_in", 1))
EVENT_FEATURES = (("kind", NUM_EVENT_KINDS - 1), ("age", 1), ("amount_1", 1), ("amount_2", 1), ("resource", 1),
                  ("actor_is_me", 1), ("target_is_me", 1), ("actor_is_other", 1), ("target_is_other", 1))
F_OWN = sum(k for _, k in OWN_FEATURES)
F_SEAT = sum(k for _, k in SEAT_FEATURES)
F_EVENT = sum(k for _, k in EVENT_FEATURES)


@struct.dataclass
class EntityObs:
    """One observer's entity view (leading batch axes allowed on every leaf)."""

    own: jax.Array  # (F_OWN,) float32
    seats: jax.Array  # (R, F_SEAT) float32, zero on padded rows
    seat_mask: jax.Array  # (R,) bool, the row is a real seat
    seat_id: jax.Array  # (R,) int32 absolute seat of the row (-1 padded); for the action's target, not a feature
    events: jax.Array  # (K, F_EVENT) float32, zero on empty slots
    event_mask: jax.Array  # (K,) bool, the slot holds an event
    event_actor: jax.Array  # (K,) int32 seat row of the event's actor, -1 for me, none or an empty slot
    event_target: jax.Array  # (K,) int32 seat row of the event's target, likewise


def layout(features) -> dict[str, slice]:
    """Name -> slice of each feature block of a row (OWN_FEATURES, SEAT_FEATURES or EVENT_FEATURES)."""
    out, start = {}, 0
    for name, size in features:
        out[name] = slice(start, start + size)
        start += size
    return out


def _pair(table, i, cols, scale, window, to_them: bool):
    """Features [active, give, want, resource, age] of table entries (i, cols) or (cols, i)."""
    take = (lambda x: x[i, cols]) if to_them else (lambda x: x[cols, i])  # noqa: E731
    active = take(table.active)
    f = active.astype(jnp.float32)
    return jnp.stack([f, take(table.give) / scale * f, take(table.want) / scale * f,
                      take(table.resource).astype(jnp.float32) * f, take(table.age) / window * f], -1)


def observe_one(state, params, i, pad_to: int | None = None) -> EntityObs:
    """The entity view of seat `i` (may be traced). `pad_to` (static, >= N): rows for that many seats."""
    n, scale = params.num_agents, params.obs_scale
    rows = n - 1 if pad_to is None else pad_to - 1
    if rows < n - 1:
        raise ValueError(f"entity view: pad_to={pad_to} is below num_agents={n}")
    i = jnp.asarray(i, jnp.int32)
    cols = (i + 1 + jnp.arange(n - 1)) % n  # the other seats, in order relative to i
    rep = reputation(state.trust)
    pending = small_sum(state.withdrawals, 1)
    own = jnp.concatenate([
        state.available[i] / scale, state.escrow[i] / scale, state.vault[i] / scale, pending[i] / scale,
        (state.collateral[i] / scale)[None], (state.tax_immunity[i] / jnp.maximum(params.work_immunity, 1))[None],
        (utility(state)[i] / scale)[None], rep[i][None],
        jax.nn.one_hot(state.last_error[i], NUM_ERROR_CODES), state.last_outcome[i].astype(jnp.float32),
        jax.nn.one_hot(state.shock_kind, NUM_SHOCK_KINDS), (state.shock_remaining / params.shock_duration)[None],
        (state.step / params.max_steps)[None],
    ])

    p, s = state.proposals, state.signals
    liquid = state.available + state.escrow
    open_out = s.active.sum(1) - s.active[:, i]  # each seat's open signals to seats other than i
    open_in = s.active.sum(0) - s.active[i, :]
    seats = jnp.concatenate([
        liquid[cols] / scale, (state.collateral[cols] / scale)[:, None], rep[cols][:, None],
        state.trust[i, cols][:, None], state.trust[cols, i][:, None],
        _pair(p, i, cols, scale, params.proposal_ttl, True), _pair(p, i, cols, scale, params.proposal_ttl, False),
        _pair(s, i, cols, scale, params.signal_window, True), _pair(s, i, cols, scale, params.signal_window, False),
        open_out[cols].astype(jnp.float32)[:, None], open_in[cols].astype(jnp.float32)[:, None],
    ], 1)
    pad = rows - (n - 1)
    seats = jnp.pad(seats, ((0, pad), (0, 0)))
    seat_mask = jnp.arange(rows) < n - 1
    seat_id = jnp.where(seat_mask, jnp.pad(cols, (0, pad)), -1)

    lg, k = state.ledger, params.obs_ledger_events
    idx = newest(lg, k)
    kind, actor, target = lg.kind[idx], lg.actor[idx], lg.target[idx]
    valid = (kind > 0) & (jnp.arange(k) < lg.count)
    row_of = lambda j: jnp.where(valid & (j >= 0) & (j != i), (j - i - 1) % n, -1)  # noqa: E731
    f = lambda x: x.astype(jnp.float32)[:, None]  # noqa: E731
    events = jnp.concatenate([
        jax.nn.one_hot(kind - 1, NUM_EVENT_KINDS - 1), f(state.step - lg.step[idx]) / params.max_steps,
        f(lg.amount_1[idx]) / scale, f(lg.amount_2[idx]) / scale, f(lg.resource[idx]),
        f(actor == i), f(target == i), f((actor >= 0) & (actor != i)), f((target >= 0) & (target != i)),
    ], 1) * valid[:, None]
    return EntityObs(own=own.astype(jnp.float32), seats=seats.astype(jnp.float32), seat_mask=seat_mask,
                     seat_id=seat_id.astype(jnp.int32), events=events.astype(jnp.float32), event_mask=valid,
                     event_actor=row_of(actor).astype(jnp.int32), event_target=row_of(target).astype(jnp.int32))


def observe_entities(state, params, seats=None, pad_to: int | None = None) -> EntityObs:
    """Entity views of `seats` (a sequence or array of seat indices; None: all N), stacked on a leading axis."""
    who = jnp.arange(params.num_agents) if seats is None else jnp.asarray(seats, jnp.int32)
    return jax.vmap(lambda i: observe_one(state, params, i, pad_to))(who)
