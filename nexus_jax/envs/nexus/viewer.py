"""Pictures of a Nexus state (host side, never jit): the facts a replay shows, and a matplotlib figure of them.

`frame(state, params, info)` reads one unbatched state into plain numbers and text (JSON-ready):
every seat's holdings, the trust matrix, the open proposals and signals, the shock, and the
public ledger in the text protocol's words (`protocol.render`). `figure(frame)` draws it: the
trust graph (seats as nodes sized by liquid wealth and coloured by archetype, an arrow i -> j
coloured and thickened by how far T[i, j] is from the neutral 0.5, a red ring on the seats a
shock took from), available / escrow / vault bars per seat, and the newest ledger events.
`NexusEnv.render(state)` is `figure(frame(state, params))`; `nexus_jax.viz` draws the same
frames as an animation or an HTML replay. matplotlib is imported when a figure is drawn, not
when the env is.
"""
from __future__ import annotations

from typing import Any, Optional

import jax
import numpy as np

from nexus_jax.envs.nexus.constants import Archetype, ErrorCode, EventKind, Shock
from nexus_jax.protocol.render import render_event, view_from_state

# One palette for the figure and the HTML replay (nexus_jax/viz/replay.js reads it from the page's data).
ARCHETYPE_COLOURS = {
    Archetype.LEARNER: "#1d4ed8",
    Archetype.BULLY: "#b45309",
    Archetype.ALTRUIST: "#7c3aed",
    Archetype.TIT_FOR_TAT: "#0f766e",
    Archetype.RECIPROCATOR: "#be185d",
    Archetype.CHEATER: "#374151",
}
EVENT_COLOURS = {
    EventKind.PROPOSAL: "#6b7280",
    EventKind.TRADE: "#15803d",
    EventKind.REJECT: "#b45309",
    EventKind.EXPIRY: "#9ca3af",
    EventKind.SIGNAL: "#1d4ed8",
    EventKind.HONOURED: "#0f766e",
    EventKind.BROKEN: "#dc2626",
    EventKind.FORCE_MAJEURE: "#7c3aed",
    EventKind.SHOCK: "#991b1b",
}
RESOURCE_COLOURS = ("#ea580c", "#0284c7")  # Energy, Compute
VAULT_COLOUR = "#1f2937"
TRUST_COLOURS = ("#dc2626", "#d1d5db", "#16a34a")  # T = 0, 0.5 (neutral), 1
SHOCK_RESOURCE = {Shock.SOLAR_FLARE: "E", Shock.GRID_FAILURE: "C"}

KIND, TITLE = "nexus", "Protocol: Nexus replay"  # the HTML replay's layout and default title


def palette() -> dict:
    """The colours by name, as the HTML replay reads them."""
    return {"archetype": {a.name: c for a, c in ARCHETYPE_COLOURS.items()},
            "event": {k.name: c for k, c in EVENT_COLOURS.items()},
            "resource": list(RESOURCE_COLOURS), "vault": VAULT_COLOUR, "trust": list(TRUST_COLOURS)}


def _r(x) -> Any:
    """Rounded for the page: 2 decimals (lists stay lists)."""
    return np.round(np.asarray(x, np.float64), 2).tolist()


def _name(enum, value: int) -> str:
    try:
        return enum(int(value)).name
    except ValueError:
        return f"{enum.__name__}_{int(value)}"


def frame(state: Any, params: Any, info: Optional[dict] = None) -> dict:
    """The facts of one unbatched NexusState as plain numbers and text.

    `info` (optional): the info of the step that led to `state` from an env made with
    `info_mode="full"`; its per-seat shock losses mark the seats a shock took from.
    """
    s = jax.device_get(state)
    if np.ndim(s.step) != 0:
        raise ValueError(f"frame: one unbatched state is drawn at a time; got a batch of shape {np.shape(s.step)}")
    n = params.num_agents
    view = view_from_state(s, 0, params, ledger_events=params.ledger_size)
    avail, escrow, vault = np.asarray(s.available), np.asarray(s.escrow), np.asarray(s.vault)
    pending = np.asarray(s.withdrawals).sum(1)
    loss = np.zeros(n)
    if info is not None and "flows" in info:
        loss = np.asarray(jax.device_get(info["flows"]["shock_loss"])).sum(-1)
    seats = [{
        "seat": i,
        "archetype": _name(Archetype, view.archetype[i]),
        "available": _r(avail[i]), "escrow": _r(escrow[i]), "vault": _r(vault[i]), "pending": _r(pending[i]),
        "wealth": _r(view.liquid[i].sum()), "utility": _r(view.liquid[i].min()),
        "collateral": _r(view.collateral[i]), "reputation": _r(view.reputation[i]),
        "error": _name(ErrorCode, np.asarray(s.last_error)[i]), "shock_loss": _r(loss[i]),
    } for i in range(n)]
    p = s.proposals
    proposals = [[i, j, *_r([p.give[i, j], p.want[i, j]]), int(p.resource[i, j]), int(p.age[i, j])]
                 for i in range(n) for j in range(n) if p.active[i, j]]
    count = int(s.ledger.count)
    shock = Shock(view.shock_kind) if view.shock_remaining > 0 else Shock.NONE
    return {
        "step": view.step,
        "max_steps": int(np.asarray(params.max_steps)),
        "shock": None if shock == Shock.NONE else {"kind": shock.name, "resource": SHOCK_RESOURCE[shock],
                                                    "remaining": view.shock_remaining},
        "seats": seats,
        "trust": _r(np.asarray(s.trust)),
        "proposals": proposals,
        "signals": [[i, j, *_r([give, want]), res, age] for i, j, give, want, res, age in view.signals],
        "ledger_count": count,
        "ledger": [{"id": count - 1 - m, "step": ev[0], "kind": _name(EventKind, ev[1]), "actor": ev[2],
                    "target": ev[3], "text": render_event(*ev, me=-1)} for m, ev in enumerate(view.ledger)],
    }


def render(state: Any, params: Any, info: Optional[dict] = None):
    """A matplotlib Figure of one unbatched state (`frame`, then `figure`)."""
    return figure(frame(state, params, info))


def figure(f: dict, ledger_lines: int = 8):
    """A matplotlib Figure of a `frame`: trust graph, holdings bars, newest ledger events."""
    from matplotlib.figure import Figure  # imported when drawing: importing the env stays light

    fig = Figure(figsize=(11.2, 6.4), dpi=100)  # fixed margins: a constrained layout doubles the drawing time
    grid = fig.add_gridspec(2, 2, height_ratios=(3.2, 1.6), width_ratios=(1, 1.25), left=0.01, right=0.98,
                            top=0.9, bottom=0.02, wspace=0.22, hspace=0.18)
    shock = f["shock"]
    title = f"Protocol: Nexus  step {f['step']} of {f['max_steps']}"
    title += f"   SHOCK {shock['kind']} (hits {shock['resource']})" if shock else "   no shock"
    fig.suptitle(title, fontsize=13, color=EVENT_COLOURS[EventKind.SHOCK] if shock else "black")
    draw_trust_graph(fig.add_subplot(grid[0, 0]), f)
    draw_holdings(fig.add_subplot(grid[0, 1]), f)
    draw_ledger(fig.add_subplot(grid[1, :]), f, ledger_lines)
    return fig


def seat_positions(n: int) -> np.ndarray:
    """(n, 2) points on the unit circle, seat 0 on top, clockwise."""
    a = np.pi / 2 - 2 * np.pi * np.arange(n) / n
    return np.stack([np.cos(a), np.sin(a)], 1)


def trust_colour(t: float) -> str:
    """Red (0) through grey (0.5) to green (1)."""
    from matplotlib.colors import LinearSegmentedColormap, to_hex
    return to_hex(LinearSegmentedColormap.from_list("trust", TRUST_COLOURS)(float(np.clip(t, 0.0, 1.0))))


def draw_trust_graph(ax, f: dict) -> None:
    from matplotlib.patches import Circle, FancyArrowPatch

    seats, trust = f["seats"], np.asarray(f["trust"])
    n = len(seats)
    pos = seat_positions(n)
    wealth = np.array([s["wealth"] for s in seats])
    radius = 0.07 + 0.13 * np.sqrt(wealth / max(wealth.max(), 1e-9))
    colours = palette()["archetype"]
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            t = trust[i, j]
            u = (pos[j] - pos[i]) / np.linalg.norm(pos[j] - pos[i])
            ax.add_patch(FancyArrowPatch(pos[i] + u * radius[i], pos[j] - u * (radius[j] + 0.02),
                                         connectionstyle="arc3,rad=0.18", arrowstyle="-|>", mutation_scale=12,
                                         lw=0.6 + 9 * abs(t - 0.5), color=trust_colour(t), zorder=1))
    for i, s in enumerate(seats):
        colour = colours.get(s["archetype"], "#555555")
        if s["shock_loss"] > 0:
            ax.add_patch(Circle(pos[i], radius[i] + 0.05, color=EVENT_COLOURS[EventKind.SHOCK], zorder=2))
        ax.add_patch(Circle(pos[i], radius[i], color=colour, zorder=3))
        ax.text(*pos[i], str(i), ha="center", va="center", color="white", fontsize=12, weight="bold", zorder=4)
        label = f"{s['archetype']}\nU {s['utility']:.0f}  liquid {s['wealth']:.0f}"
        if s["shock_loss"] > 0:
            label += f"\nshock -{s['shock_loss']:.1f}"
        above = pos[i, 1] > 0.3  # labels above the top seats, below the others (clear of the side arrows)
        ax.text(pos[i, 0], pos[i, 1] + (radius[i] + 0.08) * (1 if above else -1), label, ha="center",
                va="bottom" if above else "top", fontsize=8.5, zorder=4)
    ax.set_xlim(-1.75, 1.75)
    ax.set_ylim(-1.75, 1.75)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title("trust: arrow i -> j = T[i, j] (red 0, grey 0.5, green 1)", fontsize=9)


def draw_holdings(ax, f: dict) -> None:
    seats = f["seats"]
    n = len(seats)
    y = np.arange(n)
    h = 0.36
    for r, name in enumerate(("E", "C")):
        yy = y + (r - 0.5) * h * 1.05
        avail = np.array([s["available"][r] for s in seats])
        esc = np.array([s["escrow"][r] for s in seats])
        vault = np.array([s["vault"][r] for s in seats])
        pend = np.array([s["pending"][r] for s in seats])
        ax.barh(yy, avail, h, color=RESOURCE_COLOURS[r], label=f"{name} available")
        ax.barh(yy, esc, h, left=avail, color="white", edgecolor=RESOURCE_COLOURS[r], hatch="///",
                label=f"{name} escrow")
        ax.barh(yy, vault, h, left=avail + esc, color=VAULT_COLOUR, edgecolor=RESOURCE_COLOURS[r], lw=1.5,
                label="vault" if r == 0 else None)
        ax.barh(yy, pend, h, left=avail + esc + vault, color="white", edgecolor=VAULT_COLOUR, ls="--",
                label="withdrawing" if r == 0 else None)
        for k in range(n):
            total = avail[k] + esc[k] + vault[k] + pend[k]
            text = f"{name} {avail[k] + esc[k]:.0f}" + (f" | vault {vault[k]:.0f}" if vault[k] >= 0.5 else "")
            ax.text(total + 1, yy[k], text, va="center", fontsize=8)
    ax.set_yticks(y, [f"{s['seat']} {s['archetype']}" for s in seats], fontsize=9)
    ax.invert_yaxis()
    right = max(max(sum(s[k][r] for k in ("available", "escrow", "vault", "pending")) for s in seats)
                for r in range(2))
    ax.set_xlim(0, right * 1.3 + 5)
    ax.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=6, frameon=False)
    ax.set_title("holdings: available, escrow (hatched), vault (dark)", fontsize=9)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def draw_ledger(ax, f: dict, lines: int) -> None:
    ax.axis("off")
    events = f["ledger"][:lines]
    ax.set_title(f"public ledger, newest first ({len(events)} of {f['ledger_count']} events)", fontsize=9,
                 loc="left")
    colours = palette()["event"]
    for m, ev in enumerate(events):
        ax.text(0.0, 1.0 - (m + 0.5) / max(lines, 1), ev["text"], transform=ax.transAxes, fontsize=8.5,
                va="center", color=colours.get(ev["kind"], "black"), family="monospace")
