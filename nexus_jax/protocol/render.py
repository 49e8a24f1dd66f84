"""Prompt text of what one Nexus agent sees (host side: reads a NexusState into NumPy, never jit).

`render(state, agent, params)` writes, for agent i (from a state, or from its flat
observation vector, decoded with the env's observation layout): the step and any shock, its own
holdings, the result of its last action (the env's error code, and the parser's feedback
when given), every agent's visible state with the trust both ways, the proposals to and
from it, the open public signals, the newest ledger events, and (optionally) the action
syntax. Agents are named by their seat index, the number an action targets.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional, Sequence

import jax
import numpy as np

from nexus_jax.envs.nexus.constants import NUM_EVENT_KINDS, Archetype, ErrorCode, EventKind, Outcome, Shock
from nexus_jax.envs.nexus.observation import observation_layout

__all__ = ["ERROR_MESSAGES", "OUTCOME_MESSAGES", "SYNTAX_HELP", "View", "render", "render_event", "render_view",
           "view_from_obs", "view_from_state"]

ERROR_MESSAGES = {
    ErrorCode.OK: "ok",
    ErrorCode.BAD_TYPE: "unknown action type",
    ErrorCode.BAD_TARGET: "target is not an agent",
    ErrorCode.SELF_TARGET: "you cannot target yourself",
    ErrorCode.BAD_AMOUNT: "amount level or resource out of range",
    ErrorCode.EMPTY_TRADE: "empty trade: give and want both 0 (or VAULT/UNVAULT of 0)",
    ErrorCode.INSUFFICIENT_RESOURCE: "not enough of the resource available (or vaulted)",
    ErrorCode.INSUFFICIENT_COLLATERAL: "not enough collateral for the proposal deposit",
    ErrorCode.CREDIT_LIMIT: "trade volume (give + want) above your credit limit",
    ErrorCode.NO_PROPOSAL: "that agent has no live proposal to you",
    ErrorCode.SIGNAL_PENDING: "you already have an open signal to that agent",
    ErrorCode.BAD_INDEX: "action index out of range",
}

OUTCOME_MESSAGES = {
    Outcome.TRADE_DONE: "a trade you were party to settled",
    Outcome.MY_PROPOSAL_REJECTED: "a proposal of yours was rejected",
    Outcome.MY_PROPOSAL_EXPIRED: "a proposal of yours expired",
    Outcome.MY_PROPOSAL_VOIDED: "a proposal of yours was voided by a shock (force majeure)",
    Outcome.SIGNAL_HONOURED: "you honoured a signal",
    Outcome.SIGNAL_BROKEN: "a signal of yours broke (window passed)",
    Outcome.STARVING: "you could not pay upkeep (starving)",
}

_SHOCK_TEXT = {Shock.NONE: "none", Shock.SOLAR_FLARE: "SOLAR_FLARE (hits Energy)",
               Shock.GRID_FAILURE: "GRID_FAILURE (hits Compute)"}
_RES = ("E", "C")

SYNTAX_HELP = """\
Reply with ONE action (case-insensitive; text around it is ignored; amounts snap to the nearest level):
  WAIT                          do nothing (costs collateral unless tax-immune)
  PROPOSE <agent> <give>E <want>C   offer Energy for Compute (PROPOSE <agent> <give>C <want>E: the reverse)
  ACCEPT <agent>                accept that agent's live proposal to you
  REJECT <agent>                reject it
  WORK E | WORK C               spend 5 of it, gain 2 of the other; 5 steps of tax immunity
  VAULT <amount>E|C             move available into the shock-proof vault
  UNVAULT <amount>E|C           withdraw from the vault (arrives after a delay)
  SIGNAL <agent> <give>E <want>C    public promise to PROPOSE at least that to <agent> soon"""


def _num(x: float) -> str:
    x = float(x)
    return f"{x:.0f}" if abs(x - round(x)) < 5e-3 else f"{x:.2f}"


def _arch(a: int) -> str:
    try:
        return Archetype(int(a)).name
    except ValueError:
        return f"ARCHETYPE_{int(a)}"


def _trade(give: float, want: float, res: int) -> str:
    r = int(res)
    return f"{_num(give)}{_RES[r]} for {_num(want)}{_RES[1 - r]}"


def render_event(step: int, kind: int, actor: int, target: int, a1: float, a2: float, res: int, me: int) -> str:
    """One ledger event as a line of text ("you" for the reader's own seat)."""
    who = lambda i: "you" if int(i) == me else f"agent {int(i)}"  # noqa: E731
    its = "your" if int(actor) == me else "its"
    whose = lambda i: "your" if int(i) == me else f"agent {int(i)}'s"  # noqa: E731
    k = int(kind)
    t = _trade(a1, a2, res) if 0 <= int(res) < 2 else "?"
    if k == EventKind.PROPOSAL:
        s = f"{who(actor)} proposed to {who(target)}: {t}"
    elif k == EventKind.TRADE:
        s = f"trade: {who(actor)} gave {_num(a1)}{_RES[int(res)]} to {who(target)} for {_num(a2)}{_RES[1 - int(res)]}"
    elif k == EventKind.REJECT:
        s = f"{who(actor)} rejected {whose(target)} proposal ({t})"
    elif k == EventKind.EXPIRY:
        s = f"{whose(actor)} proposal to {who(target)} expired ({t})"
    elif k == EventKind.SIGNAL:
        s = f"{who(actor)} signalled to {who(target)}: will offer at least {_num(a1)}{_RES[int(res)]} for at most {_num(a2)}{_RES[1 - int(res)]}"
    elif k == EventKind.HONOURED:
        s = f"{who(actor)} honoured {its} signal to {who(target)} ({t})"
    elif k == EventKind.BROKEN:
        s = f"{who(actor)} BROKE {its} signal to {who(target)} ({t})"
    elif k == EventKind.FORCE_MAJEURE:
        s = f"force majeure: a shock left {who(actor)} unable to keep its deal with {who(target)} ({t})"
    elif k == EventKind.SHOCK:
        name = "SOLAR_FLARE" if int(res) == 0 else "GRID_FAILURE"
        s = f"shock {name}: {_num(a1)}{_RES[int(res)] if 0 <= int(res) < 2 else ''} lost in total"
    else:
        s = f"event kind {k}"
    return f"step {int(step)}: {s}"


def _agent_index(agent: Any, n: int) -> int:
    if isinstance(agent, str):
        agent = int(agent.rsplit("_", 1)[-1])
    agent = int(agent)
    if not 0 <= agent < n:
        raise ValueError(f"agent {agent} out of range 0..{n - 1}")
    return agent


@dataclasses.dataclass
class View:
    """What one agent sees, in plain numbers: read from a state or decoded from an observation vector."""

    me: int
    step: int
    archetype: np.ndarray  # (N,) int
    shock_kind: int
    shock_remaining: int
    last_error: int
    last_outcome: np.ndarray  # (NUM_OUTCOMES,) bool
    available: np.ndarray  # (2,)
    escrow: np.ndarray  # (2,)
    vault: np.ndarray  # (2,)
    pending: np.ndarray  # (2,) total of withdrawals in flight
    arrivals: Optional[list]  # [(amount, resource, arrival step)] when known (from a state)
    tax_immunity: int
    liquid: np.ndarray  # (N, 2)
    collateral: np.ndarray  # (N,)
    reputation: np.ndarray  # (N,)
    trust_row: np.ndarray  # (N,) my trust in each
    trust_col: np.ndarray  # (N,) each one's trust in me
    incoming: list  # [(j, give, want, resource, age)]
    outgoing: list  # [(j, give, want, resource, age)]
    signals: list  # [(i, j, give, want, resource, age)]: all open signals (a state), or mine both ways (an obs)
    ledger: list  # [(step, kind, actor, target, amount_1, amount_2, resource)], newest first


def view_from_state(state: Any, agent: Any, params: Any, ledger_events: Optional[int] = None) -> View:
    s = jax.device_get(state)
    n = params.num_agents
    me = _agent_index(agent, n)
    g = np.asarray
    trust = g(s.trust)
    step = int(s.step)
    q = g(s.withdrawals).shape[1]
    arrivals = [(float(g(s.withdrawals)[me, slot, r]), r, step + (slot - step) % q)
                for slot in range(q) for r in range(2) if float(g(s.withdrawals)[me, slot, r]) > 0]
    p = s.proposals
    pa, pg, pw, pr, page = g(p.active), g(p.give), g(p.want), g(p.resource), g(p.age)
    sg = s.signals
    sa, sgv, swt, sres, sage = g(sg.active), g(sg.give), g(sg.want), g(sg.resource), g(sg.age)
    lg = s.ledger
    size = g(lg.kind).shape[0]
    k = min(params.obs_ledger_events if ledger_events is None else int(ledger_events), size, int(lg.count))
    idxs = [(int(lg.head) - 1 - m) % size for m in range(k)]
    return View(
        me=me, step=step, archetype=g(s.archetype), shock_kind=int(s.shock_kind),
        shock_remaining=int(s.shock_remaining), last_error=int(g(s.last_error)[me]),
        last_outcome=g(s.last_outcome)[me].astype(bool),
        available=g(s.available)[me], escrow=g(s.escrow)[me], vault=g(s.vault)[me],
        pending=g(s.withdrawals)[me].sum(0), arrivals=arrivals, tax_immunity=int(g(s.tax_immunity)[me]),
        liquid=g(s.available) + g(s.escrow), collateral=g(s.collateral),
        reputation=(trust.sum(0) - np.diagonal(trust)) / max(n - 1, 1),
        trust_row=trust[me], trust_col=trust[:, me],
        incoming=[(j, pg[j, me], pw[j, me], int(pr[j, me]), int(page[j, me])) for j in range(n) if pa[j, me]],
        outgoing=[(j, pg[me, j], pw[me, j], int(pr[me, j]), int(page[me, j])) for j in range(n) if pa[me, j]],
        signals=[(i, j, sgv[i, j], swt[i, j], int(sres[i, j]), int(sage[i, j]))
                 for i in range(n) for j in range(n) if sa[i, j]],
        ledger=[(int(g(lg.step)[i]), int(g(lg.kind)[i]), int(g(lg.actor)[i]), int(g(lg.target)[i]),
                 float(g(lg.amount_1)[i]), float(g(lg.amount_2)[i]), int(g(lg.resource)[i])) for i in idxs],
    )


def view_from_obs(obs: Any, params: Any, agent: Any = None) -> View:
    """Decode one agent's flat observation vector (the env's documented layout) back into a View.

    Amounts come back as obs values x `obs_scale` (float32 rounding); the seat comes from the
    `self_id` block. An observation does not carry withdrawal arrival steps or the signals
    between other agents, so those parts are less detailed than a state's render.
    """
    n, scale = params.num_agents, float(np.asarray(params.obs_scale))
    x = np.asarray(jax.device_get(obs), np.float64)
    if x.ndim == 2:
        if agent is None:
            raise ValueError("stacked observations (N, D) need `agent`")
        x = x[_agent_index(agent, x.shape[0])]
    lay = observation_layout(params)
    b = {name: x[sl] for name, sl in lay.items()}
    me = int(np.argmax(b["self_id"]))
    if agent is not None and _agent_index(agent, n) != me:
        raise ValueError(f"observation is agent {me}'s, not agent {agent}'s")
    ri = lambda v: int(round(float(v)))  # noqa: E731
    own = b["own"]
    ttl, window = float(np.asarray(params.proposal_ttl)), float(np.asarray(params.signal_window))
    max_steps = float(np.asarray(params.max_steps))
    step = ri(b["time"][0] * max_steps)

    def pairs(block, window_):
        rows = block.reshape(n, 5)
        return [(j, r[1] * scale, r[2] * scale, ri(r[3]), ri(r[4] * window_)) for j, r in enumerate(rows) if r[0] > 0.5]

    others = b["others"].reshape(n, 4)
    sig_in, sig_out = pairs(b["incoming_signals"], window), pairs(b["outgoing_signals"], window)
    k = params.obs_ledger_events
    lg = b["ledger"].reshape(k, -1)
    nk = NUM_EVENT_KINDS - 1
    n_scale = max(n - 1, 1)
    ledger = []
    for row in lg:
        if row[0] < 0.5:
            continue
        kind = int(np.argmax(row[1:1 + nk])) + 1
        f = row[1 + nk:]
        ledger.append((step - ri(f[0] * max_steps), kind, ri(f[1] * n_scale), ri(f[2] * n_scale),
                       f[3] * scale, f[4] * scale, ri(f[5])))
    shock = b["shock"]
    return View(
        me=me, step=step, archetype=np.asarray(params.archetypes), shock_kind=int(np.argmax(shock[:-1])),
        shock_remaining=ri(shock[-1] * float(np.asarray(params.shock_duration))),
        last_error=int(np.argmax(b["last_error"])), last_outcome=b["last_outcome"] > 0.5,
        available=own[0:2] * scale, escrow=own[2:4] * scale, vault=own[4:6] * scale, pending=own[6:8] * scale,
        arrivals=None, tax_immunity=ri(own[9] * max(float(np.asarray(params.work_immunity)), 1.0)),
        liquid=others[:, 0:2] * scale, collateral=others[:, 2] * scale, reputation=others[:, 3],
        trust_row=b["trust_row"], trust_col=b["trust_col"],
        incoming=pairs(b["incoming_proposals"], ttl), outgoing=pairs(b["outgoing_proposals"], ttl),
        signals=[(j, me) + t[1:] for t in sig_in for j in [t[0]]] + [(me,) + t for t in sig_out],
        ledger=ledger,
    )


def render(
    state: Any,
    agent: Any = None,
    params: Any = None,
    *,
    feedback: Optional[str] = None,
    include_help: bool = True,
    ledger_events: Optional[int] = None,
    title: str = "Protocol: Nexus",
) -> str:
    """Prompt text of what `agent` (seat index or "agent_i") sees.

    `state`: a NexusState, or an observation: one agent's flat vector (D,) (the seat is read
    from it; `agent` may be omitted) or stacked (N, D) with `agent`. `params`: the env's
    params (required). `feedback`: a line about the agent's last reply (the play loop
    passes the parser's error or the action it read). `ledger_events`: how many of the
    newest ledger events to list from a state (default `params.obs_ledger_events`, like
    the observation vector).
    """
    if params is None:
        raise TypeError("render needs the env's params")
    if hasattr(state, "proposals"):
        if agent is None:
            raise TypeError("rendering a state needs `agent`")
        view = view_from_state(state, agent, params, ledger_events)
    else:
        view = view_from_obs(state, params, agent)
    return render_view(view, params, feedback=feedback, include_help=include_help, title=title)


def render_view(view: View, params: Any, *, feedback: Optional[str] = None, include_help: bool = True,
                title: str = "Protocol: Nexus") -> str:
    """The prompt text of a View."""
    v = view
    n = params.num_agents
    me = v.me
    max_steps = int(np.asarray(params.max_steps))
    out: list[str] = []
    add = out.append

    add(f"=== {title} | you are agent {me} ({_arch(v.archetype[me])}) | step {v.step} of {max_steps} ===")
    if v.shock_kind != Shock.NONE and v.shock_remaining > 0:
        add(f"SHOCK ACTIVE: {_SHOCK_TEXT.get(Shock(v.shock_kind), str(v.shock_kind))}, {v.shock_remaining} step(s) left")
    else:
        add("Shock: none active")

    # ---- last action -------------------------------------------------------------------
    if feedback:
        add(f"Your last reply: {feedback}")
    if v.step > 0:
        err = v.last_error
        if err != ErrorCode.OK:
            name = ErrorCode(err).name if err in ErrorCode._value2member_map_ else str(err)
            add(f"Your last action was INVALID ({name}: {ERROR_MESSAGES.get(err, '?')}); it counted as WAIT.")
        else:
            add("Your last action was valid.")
        flags = [OUTCOME_MESSAGES[o] for o in Outcome if bool(v.last_outcome[int(o)])]
        if flags:
            add("Last step: " + "; ".join(flags) + ".")

    # ---- own holdings ----------------------------------------------------------------------
    util = float(min(v.available[0] + v.escrow[0], v.available[1] + v.escrow[1]))
    add("")
    add("Your resources:")
    add(f"  available  E {_num(v.available[0])}  C {_num(v.available[1])}")
    add(f"  in escrow  E {_num(v.escrow[0])}  C {_num(v.escrow[1])}   (locked in your proposals)")
    add(f"  vault      E {_num(v.vault[0])}  C {_num(v.vault[1])}   (shock-proof, not tradable, not in utility)")
    if v.arrivals:
        add("  withdrawals on the way: " + ", ".join(f"{_num(a)}{_RES[r]} at step {t}" for a, r, t in v.arrivals))
    elif v.arrivals is None and (v.pending > 5e-3).any():
        add(f"  withdrawals on the way: E {_num(v.pending[0])}  C {_num(v.pending[1])}")
    limit = float(np.asarray(params.base_limit)) + float(np.asarray(params.limit_per_rep)) * v.reputation[me]
    add(f"  collateral {_num(v.collateral[me])}   tax immunity {v.tax_immunity} step(s)   "
        f"utility min(E, C liquid) = {_num(util)}")
    add(f"  your reputation {v.reputation[me]:.2f}; credit limit (give + want) {_num(limit)}")

    # ---- others -----------------------------------------------------------------------------
    add("")
    add("Agents (liquid = available + escrow):")
    add("  agent  archetype      liquid E  liquid C  collateral  reputation  your trust in them  their trust in you")
    for j in range(n):
        tag = " (you)" if j == me else ""
        mine = "-" if j == me else f"{v.trust_row[j]:.2f}"
        theirs = "-" if j == me else f"{v.trust_col[j]:.2f}"
        add(f"  {j:<5d}  {_arch(v.archetype[j]):<13s}  {_num(v.liquid[j, 0]):>8s}  {_num(v.liquid[j, 1]):>8s}  "
            f"{_num(v.collateral[j]):>10s}  {v.reputation[j]:>10.2f}  {mine:>18s}  {theirs:>18s}{tag}")

    # ---- proposals ------------------------------------------------------------------------
    ttl = int(np.asarray(params.proposal_ttl))
    add("")
    if v.incoming:
        add("Proposals to you (ACCEPT <agent> to take, REJECT <agent> to refuse):")
        for j, give, want, res, age in v.incoming:
            left = ttl - age
            when = f"can be accepted for {left} more step(s)" if left > 0 else "too late to accept: expires next step"
            add(f"  from agent {j}: they give {_num(give)}{_RES[res]}, you give {_num(want)}{_RES[1 - res]}; {when}")
    else:
        add("Proposals to you: none")
    if v.outgoing:
        add("Your proposals:")
        for j, give, want, res, age in v.outgoing:
            left = ttl - age
            when = f"{left} more step(s) to be accepted" if left > 0 else "expires next step (escrow and deposit come back)"
            add(f"  to agent {j}: you give {_num(give)}{_RES[res]} for {_num(want)}{_RES[1 - res]}; {when}")
    else:
        add("Your proposals: none")

    # ---- signals (public) ---------------------------------------------------------------
    window = int(np.asarray(params.signal_window))
    if v.signals:
        add("Open signals (public promises to propose):")
        for i, j, give, want, res, age in v.signals:
            who_i = "you" if i == me else f"agent {i}"
            who_j = "you" if j == me else f"agent {j}"
            left = window - age
            when = f"{left} step(s) left to honour" if left > 0 else "window over: breaks at the start of next step"
            add(f"  {who_i} -> {who_j}: at least {_num(give)}{_RES[res]} for at most {_num(want)}{_RES[1 - res]}; {when}")
    else:
        add("Open signals: none")

    # ---- ledger ------------------------------------------------------------------------------
    add("")
    if v.ledger:
        add(f"Public ledger (newest first, last {len(v.ledger)}):")
        for ev in v.ledger:
            add("  " + render_event(*ev, me=me))
    else:
        add("Public ledger: empty")

    if include_help:
        add("")
        grid: Sequence[float] = params.amount_grid
        add(SYNTAX_HELP)
        add("Amount levels: " + ", ".join(_num(x) for x in grid) + f". Agents: 0..{n - 1} (you are {me}).")
    return "\n".join(out)
