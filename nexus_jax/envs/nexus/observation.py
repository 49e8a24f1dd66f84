"""Per-agent observation: a flat float vector built from named blocks (the documented layout).

`observation_blocks` is the single source: `observe` concatenates it, and
`observation_layout` reads names and sizes from it; `BLOCK_DOCS` says what each block holds
(the documentation's observation table is generated from these). Resources and collateral are divided
by `params.obs_scale`; ages by their window; agents are indexed absolutely (the action
target index), with a one-hot of the observer's own seat.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from nexus_jax.envs.nexus.constants import NUM_ERROR_CODES, NUM_EVENT_KINDS, NUM_SHOCK_KINDS
from nexus_jax.envs.nexus.arith import chain_sum, materialize, min_resource, small_sum
from nexus_jax.envs.nexus.ledger import newest
from nexus_jax.envs.nexus.state import initial_state
from nexus_jax.envs.nexus.trust import reputation


# Block -> (size as an expression in N seats and K = obs_ledger_events, what it holds), in layout order.
# Seats are indexed absolutely (the index an action targets); resources and collateral are / obs_scale.
BLOCK_DOCS = {
    "own": ("11", "my available E, C; escrow E, C; vault E, C; withdrawals in flight E, C; collateral; "
                  "tax immunity / work_immunity; utility"),
    "self_id": ("N", "one-hot of my seat"),
    "others": ("4*N", "per seat j: liquid E, liquid C (available + escrow), collateral, reputation"),
    "trust_row": ("N", "T[me, j]: my trust in each seat"),
    "trust_col": ("N", "T[j, me]: each seat's trust in me"),
    "incoming_proposals": ("5*N", "per proposer j, its open proposal to me: active, give, want, resource, "
                                  "age / proposal_ttl"),
    "outgoing_proposals": ("5*N", "per target j, my open proposal to it: active, give, want, resource, "
                                  "age / proposal_ttl"),
    "incoming_signals": ("5*N", "per signaller j, its open SIGNAL to me: active, give, want (0 once I paid it "
                                "ahead), resource, "
                                "age / signal_window"),
    "outgoing_signals": ("5*N", "per target j, my open SIGNAL to it: active, give, want (0 once paid ahead), "
                                "resource, "
                                "age / signal_window"),
    "open_signals": ("5*N", "public, the same for every observer; per seat j: open signals j made / (N - 1), "
                            "Energy and Compute j promised, age of j's oldest open signal / signal_window, "
                            "open signals made to j / (N - 1)"),
    "ledger": ("18*K", "the newest K ledger events, newest first, 18 each: valid, kind one-hot (9), "
                       "steps ago / max_steps, actor / (N - 1), target / (N - 1), amount_1, amount_2, resource, "
                       "actor is me, target is me"),
    "shock": ("4", "one-hot of the active shock (none, SOLAR_FLARE, GRID_FAILURE), steps remaining / "
                   "shock_duration"),
    "last_error": ("12", "one-hot of the ErrorCode of my last action (OK when it was valid)"),
    "last_outcome": ("7", "Outcome flags of my last step: trade done, my proposal rejected / expired / voided, "
                          "signal honoured / broken, starving"),
    "time": ("1", "step / max_steps"),
}


def utility(state) -> jnp.ndarray:
    """U_i = min(E_liquid, C_liquid), liquid = available + escrow (vault does not count)."""
    liquid = state.available + state.escrow
    return min_resource(liquid)


def _pairs(active, give, want, resource, age, window, scale):
    """(N, N) tables -> (N, N, 5) features [active, give, want, resource, age/window]."""
    f = lambda x: x.astype(jnp.float32)  # noqa: E731
    return jnp.stack([f(active), give / scale * active, want / scale * active, f(resource) * active,
                      f(age) / window * active], -1)


def public_signals(signals, params) -> jnp.ndarray:
    """(N, 5) summary of the open signals, one row per seat, the same in every observation.

    A SIGNAL is a public commitment: every seat sees, for each seat j, [open signals j made
    / (N - 1), Energy promised by j / obs_scale, Compute promised by j / obs_scale, age of
    j's oldest open signal / signal_window, open signals made to j / (N - 1)]. O(N) per
    observer (the full (N, N) table would make the observation O(N^2), 64 x 64 x 5 floats
    per seat at N = 64); who promised what to whom is in the pair blocks of the two parties
    and in the ledger.
    """
    n, scale = params.num_agents, params.obs_scale
    active = signals.active
    f = active.astype(jnp.float32)
    n_scale = max(n - 1, 1)
    give = jnp.where(active, signals.give, 0.0)
    promised = [small_sum(jnp.where(signals.resource == r, give, 0.0), 1) / scale for r in range(2)]
    oldest = jnp.where(active, signals.age, 0).max(1).astype(jnp.float32) / params.signal_window
    return jnp.stack([small_sum(f, 1) / n_scale, promised[0], promised[1], oldest, small_sum(f, 0) / n_scale], 1)


def _rows(x: jnp.ndarray, seats: tuple | None) -> jnp.ndarray:
    """Rows `seats` of x (static slices, in the given order); all of x when `seats` is None."""
    return x if seats is None else jnp.concatenate([x[i:i + 1] for i in seats])


def observation_blocks(state, params, seats: tuple | None = None) -> list[tuple[str, jnp.ndarray]]:
    """Named (M, size) blocks of the observations of `seats` (a static tuple; None: all N), in layout order.

    Rows are taken before the per-observer work (the pair tables, the ledger block, the
    final concatenate), so observing only the learner seats costs a fraction of all N;
    each row is the same whichever other rows are computed.
    """
    n, scale = params.num_agents, params.obs_scale
    me = jnp.arange(n) if seats is None else jnp.asarray(seats, jnp.int32)
    m = me.shape[0]
    rows = lambda x: _rows(x, seats)  # noqa: E731
    rep = reputation(state.trust)
    liquid = state.available + state.escrow
    pending = chain_sum(state.withdrawals, 1)
    own = jnp.concatenate([
        state.available / scale, state.escrow / scale, state.vault / scale, pending / scale,
        (state.collateral / scale)[:, None],
        (state.tax_immunity / jnp.maximum(params.work_immunity, 1))[:, None],
        (utility(state) / scale)[:, None],
    ], 1)
    others = jnp.concatenate([liquid / scale, (state.collateral / scale)[:, None], rep[:, None]], 1)
    p, s = state.proposals, state.signals
    props = _pairs(p.active, p.give, p.want, p.resource, p.age, params.proposal_ttl, scale)  # [from, to]
    # a signal's want is what its target still owes: 0 once paid ahead (`signal_prepay`)
    owed = jnp.where(s.prepaid, 0.0, s.want) if params.signal_prepay else s.want
    sigs = _pairs(s.active, s.give, owed, s.resource, s.age, params.signal_window, scale)

    lg = state.ledger
    k = params.obs_ledger_events
    idx = newest(lg, k)
    kind, actor, target = lg.kind[idx], lg.actor[idx], lg.target[idx]
    valid = (kind > 0) & (jnp.arange(k) < lg.count)
    n_scale = jnp.maximum(n - 1, 1)
    shared = jnp.concatenate([
        valid[:, None].astype(jnp.float32),
        jax.nn.one_hot(kind - 1, NUM_EVENT_KINDS - 1),
        ((state.step - lg.step[idx]) / params.max_steps)[:, None],
        (actor / n_scale)[:, None], (target / n_scale)[:, None],
        (lg.amount_1[idx] / scale)[:, None], (lg.amount_2[idx] / scale)[:, None],
        lg.resource[idx][:, None].astype(jnp.float32),
    ], 1) * valid[:, None]  # (k, F)
    mine = jnp.stack([actor[None, :] == me[:, None], target[None, :] == me[:, None]], -1) * valid[None, :, None]
    # Materialize the (k, F) event features once: fused into the (N, k, F + 2) block below,
    # XLA re-gathers and re-derives them for every observer. (An optimization barrier is dropped
    # before fusion on XLA:CPU. A product with the identity is not used: in a batch-minor core step
    # that vmapped dot gave results changing from run to run.)
    shared = materialize(shared)
    ledger = jnp.concatenate([jnp.broadcast_to(shared, (m,) + shared.shape), mine], -1)

    shock = jnp.concatenate([jax.nn.one_hot(state.shock_kind, NUM_SHOCK_KINDS),
                             (state.shock_remaining / params.shock_duration)[None]])
    bcast = lambda x: jnp.broadcast_to(x, (m,) + x.shape)  # noqa: E731
    return [
        ("own", rows(own)),
        ("self_id", jax.nn.one_hot(me, n)),
        ("others", bcast(others.reshape(-1))),
        ("trust_row", rows(state.trust)),
        ("trust_col", rows(state.trust.T)),
        ("incoming_proposals", rows(props.transpose(1, 0, 2)).reshape(m, -1)),
        ("outgoing_proposals", rows(props).reshape(m, -1)),
        ("incoming_signals", rows(sigs.transpose(1, 0, 2)).reshape(m, -1)),
        ("outgoing_signals", rows(sigs).reshape(m, -1)),
        ("open_signals", bcast(public_signals(s, params).reshape(-1))),
        ("ledger", ledger.reshape(m, -1)),
        ("shock", bcast(shock)),
        ("last_error", jax.nn.one_hot(rows(state.last_error), NUM_ERROR_CODES)),
        ("last_outcome", rows(state.last_outcome).astype(jnp.float32)),
        ("time", bcast((state.step / params.max_steps)[None])),
    ]


def observe(state, params, seats: tuple | None = None) -> jnp.ndarray:
    """(M, D) float32 observations of `seats` (a static tuple, in its order; None: every agent, M = N)."""
    return jnp.concatenate([b.astype(jnp.float32) for _, b in observation_blocks(state, params, seats)], 1)


def observation_layout(params) -> dict[str, slice]:
    """Name -> slice of each block in the flat observation vector."""
    names: list[str] = []

    def shapes(jitter):
        blocks = observation_blocks(initial_state(params, jitter), params)
        names.extend(name for name, _ in blocks)
        return [b for _, b in blocks]

    sizes = jax.eval_shape(shapes, jnp.zeros((params.num_agents, 2)))
    out, start = {}, 0
    for name, shape in zip(names, sizes):
        out[name] = slice(start, start + shape.shape[1])
        start += shape.shape[1]
    return out
