"""Prompt text of what one Nexus agent sees (host side: reads a NexusState into NumPy, never jit).

`render(state, agent, params)` writes, for agent i: the step and any shock, its own
holdings, the result of its last action (the env's error code, and the parser's feedback
when given), every agent's visible state with the trust both ways, the proposals to and
from it, the open public signals, the newest ledger events, and (optionally) the action
syntax. Agents are named by their seat index, the number an action targets.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import jax
import numpy as np

from nexus_jax.envs.nexus.constants import Archetype, ErrorCode, EventKind, Outcome, Shock

__all__ = ["ERROR_MESSAGES", "OUTCOME_MESSAGES", "SYNTAX_HELP", "render", "render_event"]

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


def render(
    state: Any,
    agent: Any,
    params: Any,
    *,
    feedback: Optional[str] = None,
    include_help: bool = True,
    ledger_events: Optional[int] = None,
    title: str = "Protocol: Nexus",
) -> str:
    """Prompt text of what `agent` (seat index or "agent_i") sees in `state`.

    `feedback`: a line about the agent's last reply (the play loop passes the parser's
    error or the action it read). `ledger_events`: how many of the newest ledger events
    to list (default `params.obs_ledger_events`, like the observation vector).
    """
    s = jax.device_get(state)
    n = params.num_agents
    me = _agent_index(agent, n)
    g = lambda x: np.asarray(x)  # noqa: E731
    available, escrow, vault = g(s.available), g(s.escrow), g(s.vault)
    withdrawals, collateral, trust = g(s.withdrawals), g(s.collateral), g(s.trust)
    liquid = available + escrow
    rep = (trust.sum(0) - np.diagonal(trust)) / max(n - 1, 1)
    step = int(s.step)
    max_steps = int(np.asarray(params.max_steps))
    out: list[str] = []
    add = out.append

    add(f"=== {title} | you are agent {me} ({_arch(g(s.archetype)[me])}) | step {step} of {max_steps} ===")
    shock = int(s.shock_kind)
    if shock != Shock.NONE and int(s.shock_remaining) > 0:
        add(f"SHOCK ACTIVE: {_SHOCK_TEXT.get(Shock(shock), str(shock))}, {int(s.shock_remaining)} step(s) left")
    else:
        add("Shock: none active")

    # ---- last action -------------------------------------------------------------------
    if feedback:
        add(f"Your last reply: {feedback}")
    if step > 0:
        err = int(g(s.last_error)[me])
        if err != ErrorCode.OK:
            name = ErrorCode(err).name if err in ErrorCode._value2member_map_ else str(err)
            add(f"Your last action was INVALID ({name}: {ERROR_MESSAGES.get(err, '?')}); it counted as WAIT.")
        else:
            add("Your last action was valid.")
        flags = [OUTCOME_MESSAGES[o] for o in Outcome if bool(g(s.last_outcome)[me, int(o)])]
        if flags:
            add("Last step: " + "; ".join(flags) + ".")

    # ---- own holdings ----------------------------------------------------------------------
    util = float(min(liquid[me]))
    add("")
    add("Your resources:")
    add(f"  available  E {_num(available[me, 0])}  C {_num(available[me, 1])}")
    add(f"  in escrow  E {_num(escrow[me, 0])}  C {_num(escrow[me, 1])}   (locked in your proposals)")
    add(f"  vault      E {_num(vault[me, 0])}  C {_num(vault[me, 1])}   (shock-proof, not tradable, not in utility)")
    q = withdrawals.shape[1]
    arrivals = []
    for slot in range(q):
        for r in range(2):
            amt = float(withdrawals[me, slot, r])
            if amt > 0:
                arrive = step + (slot - step) % q
                arrivals.append(f"{_num(amt)}{_RES[r]} at step {arrive}")
    if arrivals:
        add("  withdrawals on the way: " + ", ".join(arrivals))
    limit = float(np.asarray(params.base_limit)) + float(np.asarray(params.limit_per_rep)) * rep[me]
    add(f"  collateral {_num(collateral[me])}   tax immunity {int(g(s.tax_immunity)[me])} step(s)   "
        f"utility min(E, C liquid) = {_num(util)}")
    add(f"  your reputation {rep[me]:.2f}; credit limit (give + want) {_num(limit)}")

    # ---- others -----------------------------------------------------------------------------
    add("")
    add("Agents (liquid = available + escrow):")
    add("  agent  archetype      liquid E  liquid C  collateral  reputation  your trust in them  their trust in you")
    for j in range(n):
        tag = " (you)" if j == me else ""
        mine = "-" if j == me else f"{trust[me, j]:.2f}"
        theirs = "-" if j == me else f"{trust[j, me]:.2f}"
        add(f"  {j:<5d}  {_arch(g(s.archetype)[j]):<13s}  {_num(liquid[j, 0]):>8s}  {_num(liquid[j, 1]):>8s}  "
            f"{_num(collateral[j]):>10s}  {rep[j]:>10.2f}  {mine:>18s}  {theirs:>18s}{tag}")

    # ---- proposals ------------------------------------------------------------------------
    p = s.proposals
    active, give, want, res, age = g(p.active), g(p.give), g(p.want), g(p.resource), g(p.age)
    ttl = int(np.asarray(params.proposal_ttl))
    add("")
    incoming = [j for j in range(n) if active[j, me]]
    if incoming:
        add("Proposals to you (ACCEPT <agent> to take, REJECT <agent> to refuse):")
        for j in incoming:
            left = ttl - int(age[j, me])
            when = f"can be accepted for {left} more step(s)" if left > 0 else "too late to accept: expires next step"
            add(f"  from agent {j}: they give {_num(give[j, me])}{_RES[res[j, me]]}, you give "
                f"{_num(want[j, me])}{_RES[1 - res[j, me]]}; {when}")
    else:
        add("Proposals to you: none")
    outgoing = [j for j in range(n) if active[me, j]]
    if outgoing:
        add("Your proposals:")
        for j in outgoing:
            left = ttl - int(age[me, j])
            when = f"{left} more step(s) to be accepted" if left > 0 else "expires next step (escrow and deposit come back)"
            add(f"  to agent {j}: you give {_num(give[me, j])}{_RES[res[me, j]]} for "
                f"{_num(want[me, j])}{_RES[1 - res[me, j]]}; {when}")
    else:
        add("Your proposals: none")

    # ---- signals (public) ---------------------------------------------------------------
    sg = s.signals
    sa, sgv, swt, sres, sage = g(sg.active), g(sg.give), g(sg.want), g(sg.resource), g(sg.age)
    window = int(np.asarray(params.signal_window))
    sigs = [(i, j) for i in range(n) for j in range(n) if sa[i, j]]
    if sigs:
        add("Open signals (public promises to propose):")
        for i, j in sigs:
            who_i = "you" if i == me else f"agent {i}"
            who_j = "you" if j == me else f"agent {j}"
            left = window - int(sage[i, j])
            when = f"{left} step(s) left to honour" if left > 0 else "window over: breaks at the start of next step"
            add(f"  {who_i} -> {who_j}: at least {_num(sgv[i, j])}{_RES[sres[i, j]]} for at most "
                f"{_num(swt[i, j])}{_RES[1 - sres[i, j]]}; {when}")
    else:
        add("Open signals: none")

    # ---- ledger ------------------------------------------------------------------------------
    lg = s.ledger
    k = params.obs_ledger_events if ledger_events is None else int(ledger_events)
    size = g(lg.kind).shape[0]
    count = int(lg.count)
    k = min(k, size, count)
    add("")
    if k > 0:
        add(f"Public ledger (newest first, last {k}):")
        head = int(lg.head)
        for m in range(k):
            idx = (head - 1 - m) % size
            add("  " + render_event(g(lg.step)[idx], g(lg.kind)[idx], g(lg.actor)[idx], g(lg.target)[idx],
                                    g(lg.amount_1)[idx], g(lg.amount_2)[idx], g(lg.resource)[idx], me))
    else:
        add("Public ledger: empty")

    if include_help:
        add("")
        grid: Sequence[float] = params.amount_grid
        add(SYNTAX_HELP)
        add("Amount levels: " + ", ".join(_num(v) for v in grid) + f". Agents: 0..{n - 1} (you are {me}).")
    return "\n".join(out)
