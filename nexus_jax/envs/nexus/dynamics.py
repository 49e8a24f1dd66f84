"""The phases of one Nexus step, one function each, in the order `core.step` runs them.

1. expire      proposals past their TTL return escrow and deposit; unhonoured signals break
2. settle      ACCEPT and REJECT against the proposals live at the start of the step (with `signal_prepay`,
               an ACCEPT naming an open signal and no live proposal pays the signal's want ahead)
3. commit      new PROPOSE (escrow, deposit, honouring signals; a paid-ahead signal delivers at once) and SIGNAL
4. own_actions WORK, VAULT, UNVAULT, WAIT (invalid actions arrive here as WAIT)
5. economy     vault arrivals, income, upkeep, isolation decay
6. shock       tick the active shock, maybe start one, take resources from the seats it reaches, void
               uncovered escrow;
               mark signals the loss left short (held the promised amount before, not after)
7. trust_decay pairs that did not interact drift toward 0.5
Each returns the new state, its ledger events, and what it changed that the reward,
metrics and conservation checks need (`Flows`).
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from nexus_jax.envs.nexus.constants import NUM_OUTCOMES, EventKind as K, Outcome as O, Shock, ActionType as T
from nexus_jax.envs.nexus.arith import (UNROLL_MAX, chain_sum, column, flags_t, materialize, materialize_large, pick,
                                        set_column, small_sum)
from nexus_jax.envs.nexus.ledger import Events, make_events, pairwise_events
from nexus_jax.envs.nexus.trust import toward_one, toward_zero, volume_weight


class StepNoise(NamedTuple):
    """All randomness of one step, drawn from the key up front (the reference takes the same)."""

    shock_u: jnp.ndarray  # () uniform: which shock, if any, starts
    end_u: jnp.ndarray  # () uniform: stochastic episode end
    reach_u: jnp.ndarray | None = None  # (N,) uniforms: a starting shock hits seat i when reach_u[i] < shock_reach


def by_resource(amount: jnp.ndarray, resource: jnp.ndarray) -> jnp.ndarray:
    """(..., ) amounts of `resource` -> (..., 2) split over [E, C]."""
    return amount[..., None] * (resource[..., None] == jnp.arange(2))


def resource_sums(amount: jnp.ndarray, resource: jnp.ndarray, axis: int) -> jnp.ndarray:
    """(N, N) amounts of (N, N) `resource` -> (N, 2): `by_resource(amount, resource).sum(axis)`.

    Summed per resource over the (N, N) table, without building the (N, N, 2) one.
    """
    return jnp.stack([small_sum(jnp.where(resource == r, amount, 0.0), axis) for r in range(2)], -1)


def _outcome(outcome: tuple, flag: O, mask):
    """Set `flag` where `mask`. `core.step` carries the flags as a tuple of (N,) columns and
    stacks them once at the end (each `.at[:, flag].set` was its own copy)."""
    return outcome[:flag] + (outcome[flag] | mask,) + outcome[flag + 1:]


# ---- 1. expire -------------------------------------------------------------------------------
def action_snapshot(state, params):
    """The state the next step's actions are judged on (after its expiry phase): what masks and NPCs read."""
    n = params.num_agents
    return expire(state, params, (jnp.zeros(n, bool),) * NUM_OUTCOMES)[0]  # outcome columns, as core.step


def expire(state, params, outcome):
    p, s = state.proposals, state.signals
    p_age = jnp.where(p.active, p.age + 1, p.age)
    expired = materialize_large(p.active & (p_age > params.proposal_ttl))
    refund = resource_sums(jnp.where(expired, p.give, 0.0), p.resource, 1)  # (N, 2) per proposer
    n_expired = expired.sum(1)

    s_age = jnp.where(s.active, s.age + 1, s.age)
    broken = materialize_large(s.active & (s_age > params.signal_window))
    n_broken = broken.sum(1)  # per signaller
    collateral = state.collateral + n_expired * params.proposal_deposit
    collateral = jnp.maximum(collateral - n_broken * params.signal_break_penalty, 0.0)

    # Broken signal: the target's trust in the signaller drops (x1.5 alpha), then everyone's.
    trust = jnp.where(flags_t(broken), toward_zero(state.trust, params.betrayal_multiplier * params.trust_alpha), state.trust)
    public = (1.0 - params.public_betrayal_rate) ** n_broken  # per signaller (column)
    off_diag = ~jnp.eye(params.num_agents, dtype=bool)
    trust = jnp.where(off_diag, trust * public[None, :], trust)

    state = state.replace(
        available=state.available + refund,
        escrow=state.escrow - refund,
        collateral=collateral,
        tax_immunity=jnp.maximum(state.tax_immunity - 1, 0),
        trust=trust,
        proposals=p.replace(active=p.active & ~expired, age=p_age),
        signals=s.replace(active=s.active & ~broken, age=s_age,
                          prepaid=s.prepaid & ~broken if params.signal_prepay else s.prepaid),
    )
    events = [
        pairwise_events(expired, K.EXPIRY, p.give, p.want, p.resource),
        pairwise_events(broken, jnp.where(s.shock_hit, K.FORCE_MAJEURE, K.BROKEN), s.give, s.want, s.resource),
    ]
    outcome = _outcome(outcome, O.MY_PROPOSAL_EXPIRED, n_expired > 0)
    outcome = _outcome(outcome, O.SIGNAL_BROKEN, n_broken > 0)
    interacted = broken | flags_t(broken)
    stats = {"signals_broken": broken, "broken_force_majeure": broken & s.shock_hit}
    return state, events, outcome, interacted, stats


# ---- 2. settle -------------------------------------------------------------------------------
def settle(state, params, act, valid, outcome):
    """ACCEPT then REJECT. Matrices are indexed [proposer, target]; the target acts."""
    n = params.num_agents
    p, s = state.proposals, state.signals
    kind, tgt = act[:, 0], act[:, 1]
    chosen = materialize_large((jnp.arange(n)[None, :] == tgt[:, None]).T)  # [j, i]: agent i's action names j
    accepted = materialize(chosen & (valid & (kind == T.ACCEPT))[None, :] & p.active)  # each read by ~15 kernels
    rejected = materialize(chosen & (valid & (kind == T.REJECT))[None, :] & p.active)
    # Reliance (`signal_prepay`, static): a valid ACCEPT with no live proposal from the partner pays its open signal's
    # want ahead, to the signaller at once ([signaller, target], as the signal table). Off, none.
    relied = (chosen & (valid & (kind == T.ACCEPT))[None, :] & ~p.active & s.active if params.signal_prepay
              else jnp.zeros((n, n), bool))

    give = jnp.where(accepted, p.give, 0.0)
    want = jnp.where(accepted, p.want, 0.0)
    # per resource: give moves proposer -> target, want moves target -> proposer
    want_res = 1 - p.resource
    available = (state.available + resource_sums(give, p.resource, 0) - resource_sums(want, want_res, 0)
                 + resource_sums(want, want_res, 1))
    escrow = state.escrow - resource_sums(give, p.resource, 1)

    weight = jnp.where(accepted, volume_weight(p.give + p.want, params), 0.0)
    bonus = params.trade_collateral_bonus * weight
    collateral = state.collateral + accepted.sum(1) * params.proposal_deposit + small_sum(bonus, 1) + small_sum(bonus, 0)

    # Trust: both sides of a trade move toward 1; an honoured signal multiplies the gain of
    # the target's trust in the signaller once. Then a rejecter's trust in the proposer drops.
    # A trade's terms are the proposer's: the proposer's trust in the acceptor always rises, the acceptor's in the
    # proposer only when the terms were fair to it (it got at least `trust_fair_ratio` of what it gave); an unfair
    # trade moves it toward 0 by how far short it fell (v0: ratio 0, every trade is fair).
    traded = accepted | flags_t(accepted)  # [a, b] symmetric
    fair = p.give >= params.trust_fair_ratio * p.want  # [proposer, acceptor]: fair to the acceptor
    shortfall = jnp.clip(1.0 - p.give / jnp.maximum(params.trust_fair_ratio * p.want, 1e-6), 0.0, 1.0)
    rate = params.trust_alpha * jnp.where(flags_t(s.trust_bonus), params.signal_trust_multiplier, 1.0)
    trust = toward_one(state.trust, jnp.where(accepted, rate * weight, 0.0))
    # The gain is computed for every trade and an unfair one selects the loss instead (a select, not a masked rate):
    # v0, where no trade is unfair, keeps its program's arithmetic and so its bits on every path.
    gained = toward_one(trust, jnp.where(flags_t(accepted), rate * weight.T, 0.0))
    unfair = flags_t(accepted & ~fair)
    trust = jnp.where(unfair, toward_zero(trust, (params.trust_alpha * weight * shortfall).T), gained)
    trust = jnp.where(flags_t(rejected), toward_zero(trust, params.reject_trust_step), trust)

    # REJECT: escrow back to the proposer, deposit back minus the penalty.
    r_give = resource_sums(jnp.where(rejected, p.give, 0.0), p.resource, 1)
    available = available + r_give
    escrow = escrow - r_give
    collateral = jnp.maximum(collateral + rejected.sum(1) * (params.proposal_deposit - params.reject_penalty), 0.0)

    if params.signal_prepay:
        paid = jnp.where(relied, s.want, 0.0)
        available = available + resource_sums(paid, 1 - s.resource, 1) - resource_sums(paid, 1 - s.resource, 0)

    did_trade = traded.any(1)
    state = state.replace(
        available=available,
        escrow=escrow,
        collateral=collateral,
        trust=trust,
        last_trade_step=jnp.where(did_trade, state.step, state.last_trade_step),
        proposals=p.replace(active=p.active & ~accepted & ~rejected),
        signals=s.replace(trust_bonus=s.trust_bonus & ~traded, prepaid=s.prepaid | relied if params.signal_prepay
                          else s.prepaid),
    )
    events = [
        pairwise_events(accepted, K.TRADE, p.give, p.want, p.resource),
        pairwise_events(flags_t(rejected), K.REJECT, p.give.T, p.want.T, p.resource.T),  # actor = rejecter
    ]
    outcome = _outcome(outcome, O.TRADE_DONE, did_trade)
    outcome = _outcome(outcome, O.MY_PROPOSAL_REJECTED, rejected.any(1))
    stats = {"trades": accepted, "trade_volume": jnp.where(accepted, p.give + p.want, 0.0), "rejects": rejected,
             "relied": relied}
    interacted = traded | rejected | flags_t(rejected)
    if params.signal_prepay:
        interacted = interacted | relied | flags_t(relied)
    return state, events, outcome, interacted, stats


# ---- 3. commit -------------------------------------------------------------------------------
def commit(state, params, act, valid, outcome):
    """New proposals (replacing any pending one to the same target) and signals."""
    n = params.num_agents
    p, s = state.proposals, state.signals
    kind, tgt, a1, a2, res = (act[:, k] for k in range(5))
    grid = params.grid()
    give = materialize(pick(grid, jnp.clip(a1, 0, params.num_levels - 1)))  # each read by ~10 kernels
    want = materialize(pick(grid, jnp.clip(a2, 0, params.num_levels - 1)))
    onehot = jnp.arange(n)[None, :] == tgt[:, None]  # [i, j]
    new_p = materialize(onehot & (valid & (kind == T.PROPOSE))[:, None])
    new_s = materialize(onehot & (valid & (kind == T.SIGNAL))[:, None])

    # A proposal honours the open signal to the same target if it offers at least as much for no more. With
    # `signal_prepay` (static), honouring a signal its target paid ahead delivers `give` at once: a trade, no proposal
    # left live (`_deliver`). Off, every new proposal stays live.
    honoured = new_p & s.active & (s.resource == res[:, None]) & (give[:, None] >= s.give) & (want[:, None] <= s.want)
    prepay = bool(params.signal_prepay)
    delivered = honoured & s.prepaid if prepay else jnp.zeros((n, n), bool)
    made = new_p & ~delivered if prepay else new_p  # proposals left live

    replaced = new_p & p.active
    back = resource_sums(jnp.where(replaced, p.give, 0.0), p.resource, 1)
    lock = by_resource(jnp.where(made.any(1), give, 0.0), res)
    available = state.available + back - lock
    escrow = state.escrow - back + lock
    collateral = state.collateral + replaced.sum(1) * params.proposal_deposit - made.any(1) * params.proposal_deposit
    collateral = collateral + honoured.any(1) * params.signal_honour_bonus

    bcast = lambda x: jnp.broadcast_to(x[:, None], (n, n))  # noqa: E731
    proposals = p.replace(
        active=(p.active & ~replaced) | made if prepay else p.active | new_p,
        give=jnp.where(made, bcast(give), p.give),
        want=jnp.where(made, bcast(want), p.want),
        resource=jnp.where(made, bcast(res), p.resource),
        age=jnp.where(made, 0, p.age),
    )
    signals = s.replace(
        active=(s.active & ~honoured) | new_s,
        give=jnp.where(new_s, bcast(give), s.give),
        want=jnp.where(new_s, bcast(want), s.want),
        resource=jnp.where(new_s, bcast(res), s.resource),
        age=jnp.where(new_s, 0, s.age),
        shock_hit=jnp.where(new_s, False, s.shock_hit),
        trust_bonus=s.trust_bonus | (honoured & ~delivered) if prepay else s.trust_bonus | honoured,
        prepaid=s.prepaid & ~honoured & ~new_s if prepay else s.prepaid,
    )
    state = state.replace(available=available, escrow=escrow, collateral=collateral,
                          proposals=proposals, signals=signals)
    i = jnp.arange(n)
    events = [make_events(made.any(1), K.PROPOSAL, i, tgt, give, want, res)]
    if prepay:
        state, outcome = _deliver(state, params, delivered, give, res, s.want, outcome)
        events.append(make_events(delivered.any(1), K.TRADE, i, tgt, give, want, res))
    events += [
        make_events(honoured.any(1), K.HONOURED, i, tgt, give, want, res),
        make_events(new_s.any(1), K.SIGNAL, i, tgt, give, want, res),
    ]
    outcome = _outcome(outcome, O.SIGNAL_HONOURED, honoured.any(1))
    stats = {"proposals": new_p, "signals_made": new_s, "signals_honoured": honoured, "forwards": delivered}
    return state, events, outcome, new_p | flags_t(new_p) | new_s | flags_t(new_s), stats


def _deliver(state, params, delivered, give, res, paid, outcome):
    """Forwards on signals paid ahead (`signal_prepay`): `delivered` [signaller, target] moves each signaller's `give`
    (N,) of `res` (N,) to its target at once. A trade: both earn the trade bonus, the signaller's trust in the target
    moves toward 1 and the target's in it at the honoured signal's multiplier (w of give + the want `paid` ahead),
    neither is isolated."""
    n = params.num_agents
    sent = jnp.where(delivered, give[:, None], 0.0)
    res_b = jnp.broadcast_to(res[:, None], (n, n))
    weight = jnp.where(delivered, volume_weight(give[:, None] + paid, params), 0.0)
    bonus = params.trade_collateral_bonus * weight
    trust = jnp.where(delivered, toward_one(state.trust, params.trust_alpha * weight), state.trust)
    trust = jnp.where(flags_t(delivered),
                      toward_one(trust, params.trust_alpha * params.signal_trust_multiplier * weight.T), trust)
    forward = (delivered | flags_t(delivered)).any(1)
    state = state.replace(
        available=state.available - resource_sums(sent, res_b, 1) + resource_sums(sent, res_b, 0),
        collateral=state.collateral + small_sum(bonus, 1) + small_sum(bonus, 0),
        trust=trust,
        last_trade_step=jnp.where(forward, state.step, state.last_trade_step),
    )
    return state, _outcome(outcome, O.TRADE_DONE, forward)


# ---- 4. own actions --------------------------------------------------------------------------
def own_actions(state, params, act, valid):
    """WORK, VAULT, UNVAULT, then the patience rule: every action pays `wait_cost` x its type's share in
    `wait_cost_types` (invalid actions pay as WAIT) unless tax-immune."""
    kind, a1, res = act[:, 0], act[:, 2], jnp.clip(act[:, 4], 0, 1)
    amount = pick(params.grid(), jnp.clip(a1, 0, params.num_levels - 1))
    work = valid & (kind == T.WORK)
    vault = valid & (kind == T.VAULT)
    unvault = valid & (kind == T.UNVAULT)
    share = pick(params.wait_cost_types, jnp.where(valid, jnp.clip(kind, 0, len(T) - 1), T.WAIT))

    work_spent = by_resource(jnp.where(work, params.work_cost, 0.0), res)
    work_gained = by_resource(jnp.where(work, params.work_gain, 0.0), 1 - res)
    to_vault = by_resource(jnp.where(vault, amount, 0.0), res)
    from_vault = by_resource(jnp.where(unvault, amount, 0.0), res)
    slot = (state.step + params.vault_delay) % state.withdrawals.shape[1]
    in_slot = (jnp.arange(state.withdrawals.shape[1]) == slot)[None, :, None]
    withdrawals = jnp.where(in_slot, state.withdrawals + from_vault[:, None, :], state.withdrawals)
    tax_immunity = jnp.where(work, params.work_immunity, state.tax_immunity)
    wait_cost = jnp.where(tax_immunity == 0, params.wait_cost * share, 0.0)

    state = state.replace(
        available=state.available - work_spent + work_gained - to_vault,
        vault=state.vault + to_vault - from_vault,
        withdrawals=withdrawals,
        tax_immunity=tax_immunity,
        collateral=jnp.maximum(state.collateral - wait_cost, 0.0),
    )
    return state, {"work_spent": work_spent, "work_gained": work_gained}


# ---- 5. economy ------------------------------------------------------------------------------
def economy(state, params, outcome):
    """Vault arrivals, income, upkeep (never below zero: shortfall is starving), isolation decay."""
    slot = state.step % state.withdrawals.shape[1]
    in_slot = (jnp.arange(state.withdrawals.shape[1]) == slot)[None, :, None]
    arrivals = chain_sum(jnp.where(in_slot, state.withdrawals, 0.0), 1)  # one slot: exact
    income = pick(jnp.asarray(params.income, jnp.float32), state.archetype)
    available = state.available + arrivals + income
    upkeep_paid = jnp.minimum(available, params.upkeep)
    starving = (available < params.upkeep).any(1)
    available = available - upkeep_paid
    isolated = (state.step - state.last_trade_step >= params.isolation_window) & (state.tax_immunity == 0)
    decay = available * jnp.where(isolated, params.isolation_decay, 0.0)[:, None]
    state = state.replace(
        available=available - decay,
        withdrawals=jnp.where(in_slot, 0.0, state.withdrawals),
    )
    outcome = _outcome(outcome, O.STARVING, starving)
    flows = {"income": income, "upkeep": upkeep_paid, "decay": decay}
    return state, outcome, flows, {"starving": starving, "isolated": isolated}


# ---- 6. shock --------------------------------------------------------------------------------
def shock(state, params, noise: StepNoise, outcome):
    """Tick the active shock; with none active, maybe start one and take from liquid holdings."""
    n = params.num_agents
    was_active = state.shock_remaining > 0
    remaining = jnp.maximum(state.shock_remaining - 1, 0)
    just_ended = was_active & (remaining == 0)
    factor = jnp.where(just_ended, params.shock_storm_factor, 1.0)
    p_flare, p_grid = params.p_solar_flare * factor, params.p_grid_failure * factor
    drawn = jnp.where(noise.shock_u < p_flare, Shock.SOLAR_FLARE,
                      jnp.where(noise.shock_u < p_flare + p_grid, Shock.GRID_FAILURE, Shock.NONE))
    kind = jnp.where(remaining > 0, state.shock_kind, drawn).astype(jnp.int32)
    started = (remaining == 0) & (drawn != Shock.NONE)
    hit = jnp.clip(kind - 1, 0, 1)  # SOLAR_FLARE -> Energy, GRID_FAILURE -> Compute

    avail_h, escrow_h = column(state.available, hit), column(state.escrow, hit)
    liquid = avail_h + escrow_h
    mean = small_sum(liquid) / liquid.shape[0]
    rel = jnp.where(mean > 0, liquid / jnp.where(mean > 0, mean, 1.0), 0.0)
    frac = jnp.minimum(params.shock_severity * (1.0 + params.shock_progressive * jnp.maximum(0.0, rel - 1.0)),
                       params.shock_max_fraction)
    reached = True if noise.reach_u is None else noise.reach_u < params.shock_reach  # (N,): the seats it hits
    loss = jnp.where(started & reached, frac * liquid, 0.0)
    from_avail = jnp.minimum(loss, avail_h)
    from_escrow = loss - from_avail
    # Escrow hit: every proposal of that resource is voided; what is left of the escrow comes back.
    p = state.proposals
    voids = (from_escrow > 0)[:, None] & p.active & (p.resource == hit)
    avail_h = jnp.where(from_escrow > 0, escrow_h - from_escrow, avail_h - from_avail)
    escrow_h = jnp.where(from_escrow > 0, 0.0, escrow_h)
    available = set_column(state.available, hit, avail_h)
    escrow = set_column(state.escrow, hit, escrow_h)
    collateral = state.collateral + voids.sum(1) * params.proposal_deposit

    # Force majeure only when the shock caused the shortfall: the signaller held the promised
    # amount before the loss and not after it. A promise it never could keep stays malicious.
    s = state.signals
    held_before = column(state.available, hit)[:, None] >= s.give
    short = started & s.active & (s.resource == hit) & held_before & (avail_h[:, None] < s.give)
    state = state.replace(
        available=available,
        escrow=escrow,
        collateral=collateral,
        proposals=p.replace(active=p.active & ~voids),
        signals=s.replace(shock_hit=s.shock_hit | short),
        shock_kind=kind,
        shock_remaining=jnp.where(started, params.shock_duration, remaining).astype(jnp.int32),
    )
    events = [
        pairwise_events(voids, K.FORCE_MAJEURE, p.give, p.want, p.resource),
        make_events(started[None], K.SHOCK, -1, -1, _total(loss)[None], 0.0, hit),
    ]
    outcome = _outcome(outcome, O.MY_PROPOSAL_VOIDED, voids.any(1))
    shock_loss = set_column(jnp.zeros((n, 2)), hit, loss)
    return state, events, outcome, {"shock_loss": shock_loss}, {"shock_started": started, "voided": voids}


# ---- 7. trust decay --------------------------------------------------------------------------
def trust_decay(state, params, interacted):
    drift = state.trust + params.trust_decay * (0.5 - state.trust)
    return state.replace(trust=jnp.where(interacted, state.trust, drift))


def _total(loss: jnp.ndarray) -> jnp.ndarray:
    """The shock's total loss for the ledger: up to UNROLL_MAX seats the reduction the recorded ledgers were made
    with (bit for bit), beyond it `small_sum`'s fixed order (the same bits at any batch size and layout)."""
    return loss.sum() if loss.shape[0] <= UNROLL_MAX else small_sum(loss)
