"""Pictures of a crisis-v0 state (host side, never jit): the facts a replay shows, and a matplotlib figure of them.

`frame(state, params)` reads one unbatched state into plain numbers and text (JSON-ready) through
the text protocol's reading of it (`protocol.crisis.render.facts`): the clock, the cluster
(capacity, in use, crises in force), every task (seat, status, demand, work done, deadline),
every seat's request, yield, error and outcomes of the last step, the open contracts and the
trust matrix. `figure(frame)` draws it: the tasks by seat against their deadlines on an hours
axis, the cluster's use against its capacity, and the negotiation of the last step.
`CrisisEnv.render(state)` is `figure(frame(state, params))`; `nexus_jax.viz` draws the same
frames as an animation or an HTML replay (whose timeline also shows when each task ran).
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from nexus_jax.envs.crisis.constants import ROLE_NAMES, Crisis, Error, Outcome
from nexus_jax.protocol.crisis.render import crises_in_force, facts, task_names, task_status

SEAT_COLOURS = ("#1d4ed8", "#b45309", "#7c3aed", "#0f766e", "#be185d", "#374151")
RESOURCES = ("cpu", "memory GB", "gpu")
LATE_COLOUR, DONE_COLOUR, CRISIS_COLOUR = "#dc2626", "#15803d", "#fecaca"

KIND, TITLE = "crisis", "CrisisCompute replay"  # the HTML replay's layout and default title


def palette() -> dict:
    """The colours by name, as the HTML replay reads them."""
    return {"seat": list(SEAT_COLOURS), "late": LATE_COLOUR, "done": DONE_COLOUR, "crisis": CRISIS_COLOUR}


def _r(x) -> Any:
    return np.round(np.asarray(x, np.float64), 2).tolist()


def role(i: int) -> str:
    return ROLE_NAMES[i] if i < len(ROLE_NAMES) else f"seat {i}"


def frame(state: Any, params: Any, info: Optional[dict] = None) -> dict:
    """The facts of one unbatched CrisisState as plain numbers and text (`info` is accepted for symmetry with
    nexus-v0 and unused: the state holds the last step's requests and outcomes)."""
    del info
    if np.ndim(np.asarray(state.step)) != 0:
        raise ValueError(f"frame: one unbatched state is drawn at a time; got a batch of shape "
                         f"{np.shape(state.step)}")
    s = facts(state, params)
    A, K = s["done"].shape
    names = task_names(params)
    per_step_h = float(np.asarray(params.minutes_per_step)) / 60.0
    tasks = [{
        "seat": i, "slot": k, "name": names[i][k], "status": task_status(s, i, k),
        "demand": _r(s["demand"][i, k]), "duration_min": _r(s["duration"][i, k]), "progress_min": _r(s["progress"][i, k]),
        "deadline_h": _r(s["deadline_h"][i, k]), "completed_h": _r(s["completed_h"][i, k]) if s["done"][i, k] else None,
        "released": bool(s["released"][i, k]), "missed": bool(s["missed"][i, k]), "urgent": bool(s["urgent"][i, k]),
    } for i in range(A) for k in range(K) if s["exists"][i, k]]
    seats = [{
        "seat": i, "role": role(i), "running": int(s["running_slot"][i]),
        "requested": bool(s["last_requested"][i]), "demand": _r(s["last_demand"][i]), "yielded": bool(s["last_yielded"][i]),
        "error": Error(int(s["last_error"][i])).name if 0 <= int(s["last_error"][i]) < len(Error) else str(s["last_error"][i]),
        "outcomes": [Outcome(o).name.lower().replace("_", " ") for o in range(len(Outcome)) if s["last_outcome"][i, o]],
    } for i in range(A)]
    schedule = [[Crisis(int(k)).name, _r(st * per_step_h), _r(en * per_step_h)]
                for k, st, en, on in zip(s["kind"], s["start"], s["end"], s["enabled"]) if on]
    f = {
        "step": int(s["step"]), "hour": _r(s["now"]), "episode_hours": _r(np.asarray(params.episode_hours)),
        "level": int(s["level"]), "negotiation": bool(s["nego_on"]),
        "capacity": _r(s["capacity"]), "used": _r(s["used"]), "crises": crises_in_force(s), "schedule": schedule,
        "tasks": tasks, "seats": seats, "trust": _r(s["trust"]),
        "contracts": [[int(c), int(d)] for c, d in zip(*np.nonzero(s["contract_open"]))],
    }
    f["messages"] = negotiation_lines(f)
    return f


def negotiation_lines(f: dict) -> list:
    """The last step's requests, yields, outcomes and open contracts as lines of text."""
    lines = []
    for seat in f["seats"]:
        head = f"agent {seat['seat']} ({seat['role']}): "
        if seat["error"] != Error.NONE.name:
            what = f"invalid action ({seat['error']})"
        elif seat["requested"]:
            c, r, g = seat["demand"]
            what = f"requested cpu {c:g}, memory {r:g}, gpu {g:g}" + (", yielded" if seat["yielded"] else ", held")
        else:
            what = "no request"
        lines.append(head + what + ("; " + ", ".join(seat["outcomes"]) if seat["outcomes"] else ""))
    for creditor, debtor in f["contracts"]:
        lines.append(f"contract: agent {debtor} owes agent {creditor} a yield")
    return lines


def render(state: Any, params: Any, info: Optional[dict] = None):
    """A matplotlib Figure of one unbatched state (`frame`, then `figure`)."""
    return figure(frame(state, params, info))


def figure(f: dict):
    """A matplotlib Figure of a `frame`: task timeline, cluster use, last step's negotiation."""
    from matplotlib.figure import Figure  # imported when drawing: importing the env stays light

    fig = Figure(figsize=(11.2, 6.4), dpi=100)  # fixed margins: a constrained layout doubles the drawing time
    grid = fig.add_gridspec(2, 2, height_ratios=(3.2, 1.4), width_ratios=(2.2, 1), left=0.17, right=0.98,
                            top=0.88, bottom=0.03, wspace=0.08, hspace=0.28)
    crises = ", ".join(f["crises"]) or "no crisis"
    fig.suptitle(f"CrisisCompute  hour {f['hour']:g} of {f['episode_hours']:g} (step {f['step']})   level "
                 f"{f['level']}, negotiation {'on' if f['negotiation'] else 'off'}   {crises}", fontsize=12,
                 color=LATE_COLOUR if f["crises"] else "black")
    draw_timeline(fig.add_subplot(grid[0, 0]), f)
    draw_cluster(fig.add_subplot(grid[0, 1]), f)
    ax = fig.add_subplot(grid[1, :])
    ax.axis("off")
    ax.set_title("last step's negotiation", fontsize=9, loc="left")
    lines = f["messages"]
    for m, line in enumerate(lines):
        ax.text(0.0, 1.0 - (m + 0.5) / max(len(lines), 5), line, transform=ax.transAxes, fontsize=8.5,
                va="center", family="monospace")
    return fig


def draw_timeline(ax, f: dict) -> None:
    """Tasks by seat (rows) on an hours axis: deadlines, where each finished or runs now, crises shaded; each
    task's status and work done at the right. (One state holds how much work a task got, not when it ran:
    the HTML replay, which has every state, draws when.)"""
    now, hours = f["hour"], f["episode_hours"]
    windows = {}
    for kind, start, end in f["schedule"]:
        if kind != Crisis.URGENT_TASK.name:
            windows.setdefault((start, end), []).append(kind)
    for w, ((start, end), kinds) in enumerate(windows.items()):
        ax.axvspan(start, end, color=CRISIS_COLOUR, alpha=0.6, zorder=1.5)
        ax.text(start, -0.75 - 0.75 * w, f"{' + '.join(kinds)} {start:g}h-{end:g}h", fontsize=7.5, color=LATE_COLOUR)
    for row, t in enumerate(f["tasks"]):
        colour = SEAT_COLOURS[t["seat"] % len(SEAT_COLOURS)]
        ax.barh(row, hours, 0.7, color="#f3f4f6", zorder=1)
        late = t["missed"] or (t["completed_h"] is not None and t["completed_h"] > t["deadline_h"] + 1e-6)
        if t["released"]:
            ax.plot([t["deadline_h"]] * 2, [row - 0.45, row + 0.45], color=LATE_COLOUR if late else "black", lw=2,
                    zorder=3)
        if t["completed_h"] is not None:
            ax.plot(t["completed_h"], row, "o", color=DONE_COLOUR, ms=7, zorder=4)
        elif t["status"] == "RUNNING":
            ax.plot(now, row, ">", color=colour, ms=9, zorder=4)
        text = t["status"] if t["completed_h"] is not None else (
            f"{t['status'].split(' (')[0]}, {t['progress_min']:g} of {t['duration_min']:g} min done")
        ax.text(hours * 1.02, row, text, va="center", fontsize=7.5, color=LATE_COLOUR if late else "#374151")
    ax.axvline(now, color="black", ls="--", lw=1, zorder=4)
    ax.set_yticks(range(len(f["tasks"])), [f"{t['seat']} {t['name']}" for t in f["tasks"]], fontsize=8)
    for tick, t in zip(ax.get_yticklabels(), f["tasks"]):
        tick.set_color(SEAT_COLOURS[t["seat"] % len(SEAT_COLOURS)])
    ax.set_ylim(len(f["tasks"]) - 0.4, -1.0 - 0.75 * len(windows))
    ax.set_xlim(0, hours * 1.4)
    ax.set_xticks(range(int(hours) + 1))
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.set_xlabel("hour")
    ax.set_title("tasks by seat: deadline (tick, red when late), finished (green dot), running (arrow), now (dashed)",
                 fontsize=9)


def draw_cluster(ax, f: dict) -> None:
    cap, used = np.asarray(f["capacity"]), np.asarray(f["used"])
    share = np.divide(used, cap, out=np.zeros(3), where=cap > 0)
    ax.barh(range(3), np.ones(3), 0.6, color="#f3f4f6")
    ax.barh(range(3), np.minimum(share, 1.0), 0.6, color="#0284c7")
    for r in range(3):
        ax.text(0.02, r, f"{RESOURCES[r]}: {used[r]:g} of {cap[r]:g}", va="center", fontsize=9)
    ax.set_yticks([])
    ax.set_xticks([])
    ax.set_xlim(0, 1)
    ax.invert_yaxis()
    ax.set_title("cluster in use / capacity now", fontsize=9)
