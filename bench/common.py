"""Shared pieces of the benchmarks: cheap random actions, timing, a record of the machine, config overrides."""
from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from nexus_jax.cli import UserInputError, positive_int
from nexus_jax.envs.nexus.constants import ActionType as T


def plausible_actions(key, state, params) -> jnp.ndarray:
    """(N, 5) structured actions that are mostly valid, drawn in O(N^2) without the flat mask.

    The flat mask is (N, 3 + 2N + 4L + 4NL^2) (12,703 actions per agent at N=64), so sampling
    from it would cost more than the step. Instead: a uniform action type; ACCEPT/REJECT name
    an agent with a proposal to me, other targets are anyone but me; amounts are capped at
    what I hold. Expired proposals, credit limits and open signals still make a few invalid
    (they become WAIT, as any invalid action does).
    """
    n, levels = params.num_agents, params.num_levels
    grid = params.grid()
    u = jax.random.uniform(key, (n, 5 + n))  # one draw: every extra random call adds compile time
    pick = lambda col, lo, hi: lo + jnp.floor(u[:, col] * (hi - lo)).astype(jnp.int32)  # noqa: E731
    me = jnp.arange(n)
    kind = pick(0, 0, len(T))
    other = (me + pick(1, 1, n)) % n
    incoming = state.proposals.active.T  # [me, proposer]
    proposer = jnp.argmax(jnp.where(incoming, u[:, 5:], -1.0), axis=1)  # uniform among senders
    target = jnp.where((kind == T.ACCEPT) | (kind == T.REJECT), proposer, other)
    res = pick(2, 0, 2)
    pool = jnp.where((kind == T.UNVAULT)[:, None], state.vault, state.available)
    held = jnp.where(res == 0, pool[:, 0], pool[:, 1])  # pool[me, res] without a batched gather
    affordable = (grid[None, :] <= held[:, None]).sum(1) - 1
    a1 = jnp.minimum(pick(3, 1, levels), affordable)
    a2 = pick(4, 0, levels)
    a2 = jnp.where((a1 == 0) & (a2 == 0), 1, a2)
    return jnp.stack([kind, target, a1, a2, res], 1).astype(jnp.int32)


def host_plausible_actions(ref, rng: np.random.Generator) -> list[tuple]:
    """The same distribution as `plausible_actions`, for the pure-Python reference (host side)."""
    p = ref.rules
    n, grid = p.n, p.grid
    out = []
    for i, me in enumerate(ref.agents):
        kind = int(rng.integers(0, len(T)))
        target = (i + int(rng.integers(1, n))) % n
        if kind in (T.ACCEPT, T.REJECT):
            senders = [j for j in range(n) if ref.proposals[j][i].active]
            target = int(rng.choice(senders)) if senders else 0
        r = int(rng.integers(0, 2))
        held = me.vault[r] if kind == T.UNVAULT else me.available[r]
        affordable = sum(g <= held for g in grid) - 1
        a1 = min(int(rng.integers(1, len(grid))), affordable)
        a2 = int(rng.integers(0, len(grid)))
        if a1 == 0 and a2 == 0:
            a2 = 1
        out.append((kind, target, a1, a2, r))
    return out


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def timed(fn, *args, reps: int = 3, budget_s: float = 20.0, clock: str = "wall") -> float:
    """Best time of up to `reps` calls of an already compiled `fn` (the least disturbed by
    other load); stops early once `budget_s` has been spent, after at least one call.

    `clock`: "wall" (elapsed seconds) or "cpu" (CPU seconds of this process, all threads: on a
    machine shared with other jobs, the work done rather than the time waited for a core)."""
    best, spent = float("inf"), 0.0
    now = CLOCKS[clock]
    for _ in range(reps):
        t0 = now()
        jax.block_until_ready(fn(*args))
        dt = now() - t0
        best, spent = min(best, dt), spent + dt
        if spent > budget_s:
            break
    return best


def compile_timed(fn, *args):
    """-> (compiled, seconds to trace, lower and compile)."""
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    return compiled, time.perf_counter() - t0


def machine() -> dict:
    """What the numbers were measured on (load matters on a shared machine)."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "cpu_count": os.cpu_count(),
        "load_average_1_5_15": [round(x, 2) for x in load],
    }


def overrides(items: list[str], defaults: dict) -> dict:
    """`--set` KEY=VALUE strings -> {KEY: value of the default's type} for keys of an upstream config."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in defaults:
            raise UserInputError(f"--set {item!r}: expected KEY=VALUE with KEY one of {sorted(defaults)}")
        try:
            out[key] = type(defaults[key])(float(value)) if not isinstance(defaults[key], str) else value
        except ValueError:
            raise UserInputError(f"--set {item!r}: {value!r} is not a number") from None
    return out


def as_summary(result: dict) -> dict:
    """An evaluation result's {"return_mean", "return_ci95"} -> train.stats' {"mean", "ci95"} (for `ci_above`)."""
    return {"mean": result["return_mean"], "ci95": result["return_ci95"]}


def add_learning_run_args(ap, seed: int, eval_seed: int) -> None:
    """The arguments every bench script that trains an upstream-style learner on nexus shares: the env,
    the batch, the budget, the seeds and the evaluation (each script adds its own on top)."""
    ap.add_argument("--env-id", default="nexus-v0")
    ap.add_argument("--num-envs", type=positive_int, default=64)
    ap.add_argument("--total-timesteps", type=float, default=2e6)
    ap.add_argument("--episodes", type=positive_int, default=1024, help="evaluation episodes")
    ap.add_argument("--seed", type=int, default=seed)
    ap.add_argument("--num-seeds", type=positive_int, default=1, help="train seeds seed, seed+1, ... (vmapped)")
    ap.add_argument("--eval-seed", type=int, default=eval_seed, help="episode keys of every evaluation")


def write_report(path, report, indent: int = 1) -> Path:
    """Write `report` as JSON to `path` (its folder created) and say so: every bench script's output file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=indent))
    print(f"wrote {path}")
    return path
