"""Shared pieces of the benchmarks: cheap random actions and timing."""
from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

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









