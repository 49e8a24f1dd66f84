"""Prompt text of what one crisis-v0 seat sees (host side: reads a CrisisState into NumPy, never jit).

`render(state, seat, params)` writes: the clock and curriculum level, whether negotiation is
on, the crises in force, the cluster (capacity, in use, free), the seat's own tasks (id, status,
demand, work left, deadline and slack), its last action's result (the env's error code and
outcome flags, and the parser's feedback when given), every peer (what it runs and asked for,
trust both ways, reputation, this seat's beliefs about it, contracts), the valid actions as
JSON, and (optionally) the action syntax. Task ids are those `parse` reads (`task_names`).
"""
from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from nexus_jax.envs.crisis.constants import ROLE_NAMES, Crisis, Error, Nego, Outcome
from nexus_jax.envs.crisis.negotiation import avail_actions, now_hours, ready, used
from nexus_jax.envs.crisis.tasks import default_task_arrays, task_names as default_names
from nexus_jax.protocol.crisis.parser import format_action, slot_names

__all__ = ["ERROR_MESSAGES", "OUTCOME_MESSAGES", "SYNTAX_HELP", "crises_in_force", "facts", "render", "seat_demands", "task_names",
           "task_status"]

ERROR_MESSAGES = {
    Error.NONE: "ok",
    Error.OUT_OF_RANGE: "your reply could not be read as an action (or its index was out of range)",
    Error.NOTHING_TO_RELEASE: "release_resource with no running task",
    Error.ALREADY_RUNNING: "request_resource while one of your tasks holds resources (release it first)",
    Error.TASK_NOT_READY: "that task is not ready (not released, done, or its dependencies are unfinished)",
    Error.EXCEEDS_CAPACITY: "that task needs more than the cluster has now (e.g. a GPU during an outage)",
}
OUTCOME_MESSAGES = {
    Outcome.ALLOCATED: "your request won its resources",
    Outcome.DENIED: "your request lost the bargaining (not enough free capacity)",
    Outcome.YIELDED: "you yielded under contention",
    Outcome.CHARTER: "your request fell under the emergency charter (deadline close)",
    Outcome.PREEMPTED: "a crisis took your running task's resources (its progress is kept)",
    Outcome.COMPLETED: "one of your tasks finished",
    Outcome.CONTRACT_HONOURED: "a contract owed to you was honoured",
    Outcome.CONTRACT_BROKEN: "a contract owed to you was broken",
}
_CRISIS_TEXT = {Crisis.GPU_OUTAGE: "GPU_OUTAGE", Crisis.URGENT_TASK: "URGENT_TASK",
                Crisis.RESOURCE_PRESSURE: "RESOURCE_PRESSURE"}

SYNTAX_HELP = """\
Reply with ONE JSON object (text around it is ignored):
  {"action_type": "request_resource", "task_id": "<task id>", "negotiation": "hold"}
      claim the resources of one of your ready tasks; "negotiation": "yield" withdraws the
      request if requests exceed free capacity this hour (a contract: the others owe you a yield)
  {"action_type": "release_resource"}   free your running task's resources (its progress is kept)
  {"action_type": "wait"}               do nothing this step
Optional: "cpu", "memory", "gpu" (must equal the task's demand), "reasoning" (ignored)."""


def task_names(params) -> list:
    """Slot ids per seat: the default set's names when params hold the default set (task_source 0 and
    the default arrays), else `task_<k>`."""
    A, K = params.num_agents, params.max_tasks
    default = default_task_arrays(A, K)
    is_default = int(np.asarray(params.task_source)) == 0 and default is not None and all(
        np.array_equal(np.asarray(getattr(params, f)), v) for f, v in default.items())
    names = default_names(A, K) if is_default else [[""] * K for _ in range(A)]
    return [slot_names(K, row) for row in names]


def seat_demands(state, seat: int) -> np.ndarray:
    """(K, 3) cores, RAM, GPU of the seat's slots (what a claim in a reply is checked against)."""
    t = state.tasks
    return np.stack([np.asarray(t.cores)[seat], np.asarray(t.ram)[seat], np.asarray(t.gpu)[seat]], -1)


def _n(v: float) -> str:
    return np.format_float_positional(float(v), precision=2, trim="-")


def task_status(s: dict, i: int, k: int) -> str:
    """Seat i's slot k in words ("" for an empty slot), from `facts`."""
    if not s["exists"][i, k]:
        return ""
    if not s["released"][i, k]:
        return "not released yet (urgent task, arrives with a crisis)"
    if s["done"][i, k]:
        return "done" + (" (late)" if s["completed_h"][i, k] > s["deadline_h"][i, k] + 1e-6 else " (on time)")
    if s["running_slot"][i] == k:
        return "RUNNING"
    if s["ready"][i, k]:
        return "ready"
    return "waiting for dependencies"


def facts(state: Any, params: Any) -> dict:
    """What the prompt (and `CrisisEnv.render`'s picture) reads of an unbatched state, as NumPy."""
    return jax.device_get({
        "step": state.step, "level": state.level, "exists": state.tasks.exists, "released": state.released,
        "done": state.done, "running_slot": state.running_slot, "deadline_h": state.tasks.deadline_h,
        "completed_h": state.completed_h, "progress": state.progress_min, "duration": state.tasks.duration_min,
        "missed": state.missed, "urgent": state.tasks.urgent, "capacity": state.capacity, "trust": state.trust,
        "beliefs": state.beliefs, "contract_open": state.contract_open, "last_requested": state.last_requested,
        "last_demand": state.last_demand, "last_yielded": state.last_yielded, "last_error": state.last_error,
        "last_outcome": state.last_outcome, "kind": state.schedule.kind, "start": state.schedule.start_step,
        "end": state.schedule.end_step, "enabled": state.schedule.enabled, "mag": state.schedule.magnitude,
        "now": now_hours(state.step, params), "ready": ready(state), "mask": avail_actions(state, params),
        "nego_on": state.level >= params.negotiation_min_level,
        "demand": jnp.stack([state.tasks.cores, state.tasks.ram, state.tasks.gpu], -1), "used": used(state),
    })


def crises_in_force(s: dict) -> list:
    """The capacity crises active at the step of `facts` (an urgent injection is an event, not a condition)."""
    step = int(s["step"])
    on = s["enabled"] & (s["start"] <= step) & (step < s["end"])
    return [f"{_CRISIS_TEXT[Crisis(int(k))]} (-{_n(100 * m)}%)" for k, m, a in zip(s["kind"], s["mag"], on)
            if a and int(k) != Crisis.URGENT_TASK]


def render(state: Any, seat: int, params: Any, feedback: Optional[str] = None, include_help: bool = True) -> str:
    """The prompt for seat `seat` of an (unbatched) crisis-v0 state."""
    s = facts(state, params)
    A, K = s["done"].shape
    i = int(seat)
    names = task_names(params)
    dem = s["demand"]
    now, step = float(s["now"]), int(s["step"])
    role = ROLE_NAMES[i] if i < len(ROLE_NAMES) else f"seat {i}"
    lines = [f"You are agent {i} ({role}) in CrisisCompute, a shared cluster. Hour {_n(now)} of "
             f"{_n(params.episode_hours)} (step {step}, {_n(params.minutes_per_step)} min per step); "
             f"curriculum level {int(s['level'])}; negotiation {'ON' if s['nego_on'] else 'OFF'}."]
    crises = crises_in_force(s)
    lines.append("Crises in force: " + (", ".join(crises) if crises else "none"))
    cap, used_ = s["capacity"], s["used"]
    lines.append(f"Cluster: capacity cpu {_n(cap[0])}, memory {_n(cap[1])} GB, gpu {_n(cap[2])}; in use cpu "
                 f"{_n(used_[0])}, memory {_n(used_[1])}, gpu {_n(used_[2])}; free cpu {_n(cap[0] - used_[0])}, "
                 f"memory {_n(cap[1] - used_[1])}, gpu {_n(cap[2] - used_[2])}")

    lines.append("Your tasks (task_id: status; cpu/memory/gpu; work left; deadline):")
    for k in range(K):
        st = task_status(s, i, k)
        if not st:
            continue
        left_min = max(float(s["duration"][i, k] - s["progress"][i, k]), 0.0)
        dl = float(s["deadline_h"][i, k])
        row = f"  {names[i][k]}: {st}; {_n(dem[i, k, 0])}/{_n(dem[i, k, 1])}/{_n(dem[i, k, 2])}"
        if s["released"][i, k]:
            slack = dl - now - left_min / 60.0
            row += (f"; {_n(left_min)} min left; due hour {_n(dl)} ({_n(dl - now)} h from now, slack {_n(slack)} h)"
                    + ("; DEADLINE MISSED" if s["missed"][i, k] else "") + ("; urgent" if s["urgent"][i, k] else ""))
        lines.append(row)

    err = int(s["last_error"][i])
    last = f"Your last action: {ERROR_MESSAGES.get(Error(err), str(err)) if 0 <= err < len(Error) else err}"
    if err:
        last += f" (error {Error(err).name}; it counted as an invalid wait)"
    flags = [OUTCOME_MESSAGES[Outcome(o)] for o in range(len(Outcome)) if s["last_outcome"][i, o]]
    if flags:
        last += "; " + "; ".join(flags)
    lines.append(last)
    if feedback:
        lines.append(f"Your last reply: {feedback}")

    rep = (s["trust"].sum(0) - np.diag(s["trust"])) / max(A - 1, 1)
    lines.append("Peers:")
    for d in range(1, A):
        j = (i + d) % A
        r = int(s["running_slot"][j])
        runs = f"runs {names[j][r]}" if r >= 0 else "runs nothing"
        asked = (f"asked for cpu {_n(s['last_demand'][j, 0])}, memory {_n(s['last_demand'][j, 1])}, gpu "
                 f"{_n(s['last_demand'][j, 2])}" + (" and yielded" if s["last_yielded"][j] else "")
                 if s["last_requested"][j] else "asked for nothing")
        b = s["beliefs"][i, j]
        owe = []
        if s["contract_open"][j, i]:
            owe.append("you owe it a yield")
        if s["contract_open"][i, j]:
            owe.append("it owes you a yield")
        role_j = ROLE_NAMES[j] if j < len(ROLE_NAMES) else f"seat {j}"
        lines.append(f"  agent {j} ({role_j}): {runs}; last step {asked}; your trust in it {_n(s['trust'][i, j])}, "
                     f"its trust in you {_n(s['trust'][j, i])}, its reputation {_n(rep[j])}; you expect cpu "
                     f"{_n(b[0])}, memory {_n(b[1])}, gpu {_n(b[2])}, yield p {_n(b[3])}"
                     + ("; " + ", ".join(owe) if owe else ""))
    lines.append(f"Your reputation: {_n(rep[i])}")

    mask = s["mask"][i]
    valid = [format_action(a, K, names[i]) for a in range(mask.shape[0]) if mask[a] and a % 2 == Nego.HOLD]
    lines.append("Valid actions now (each also with \"negotiation\": \"yield\"): " + " | ".join(valid))
    if include_help:
        lines.append(SYNTAX_HELP)
    return "\n".join(lines)
