"""The public ledger: a fixed-size ring buffer that each step appends a variable number of events to."""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from nexus_jax.envs.nexus.arith import CUMSUM_UNROLL_MAX, chain_sum, small_cumsum
from nexus_jax.envs.nexus.state import Ledger


FANOUT = CUMSUM_UNROLL_MAX  # counts per group of the rank tree: each level's running counts are unrolled adds


class Events(NamedTuple):
    """A batch of candidate events (flat arrays); only those with `valid` are written, in order."""

    valid: jnp.ndarray
    kind: jnp.ndarray
    actor: jnp.ndarray
    target: jnp.ndarray
    amount_1: jnp.ndarray
    amount_2: jnp.ndarray
    resource: jnp.ndarray


def make_events(valid, kind, actor, target, amount_1, amount_2, resource) -> Events:
    shape = jnp.shape(valid)
    b = lambda x, dt: jnp.broadcast_to(jnp.asarray(x, dt), shape).ravel()  # noqa: E731
    return Events(b(valid, bool), b(kind, jnp.int32), b(actor, jnp.int32), b(target, jnp.int32),
                  b(amount_1, jnp.float32), b(amount_2, jnp.float32), b(resource, jnp.int32))


def pairwise_events(valid, kind, give, want, resource) -> Events:
    """Events over an (N, N) [actor, target] table, in row-major order."""
    n = valid.shape[0]
    actor, target = jnp.meshgrid(jnp.arange(n), jnp.arange(n), indexing="ij")
    return make_events(valid, kind, actor, target, give, want, resource)


def concat(batches: list[Events]) -> Events:
    return Events(*(jnp.concatenate(parts) for parts in zip(*batches)))


def append(ledger: Ledger, batches: list[Events], step) -> Ledger:
    """Write the valid events in order; when more than fit arrive, the oldest of them are dropped.

    Written slot-first: each ring slot gathers the newest valid event that lands on it. The
    event of a given rank is found by walking down a tree of counts: the m candidates' valid
    flags are counted in groups of `fanout` (at most FANOUT), those counts again, up to one
    group; each slot then descends from the root one group per level, gathering the group's
    counts and its running sums. The work over all candidates is one pass of integer sums,
    O(m); the walk is O(size * fanout * log m). With two levels (up to FANOUT**2 candidates,
    N <= 7) the leaves' running counts are computed for every candidate instead of gathered:
    the ~sqrt(m) x sqrt(m) grid that was the whole method before, 1.1x faster there.
    (A scatter of every candidate event was a serial loop on CPU; a (size, m) rank comparison
    the largest single cost of the step under vmap; the grid's running counts at large m a
    quarter of the step at N = 64; `lax.top_k` 3-7x slower than the grid. docs/performance.md.)
    """
    size = ledger.kind.shape[0]
    m = sum(b.valid.shape[0] for b in batches)
    depth = 1  # levels of the tree: the fewest whose groups hold at most FANOUT counts each
    while FANOUT ** depth < m:
        depth += 1
    fanout = 2
    while fanout ** depth < m:
        fanout += 1
    valid = jnp.concatenate([b.valid for b in batches]).astype(jnp.int32)
    if depth <= 2:  # the grid: every leaf group's running counts, for all candidates
        grid = small_cumsum(_groups(valid, fanout), 1)
        levels = [grid[:, -1]]  # levels[k]: valid events per node of level k
    else:
        grid, levels = None, [valid]
    while levels[-1].shape[0] > fanout:
        levels.append(_groups(levels[-1], fanout).sum(1))
    root = levels[-1]
    total = chain_sum(root)
    offset = (jnp.arange(size) - ledger.head) % size  # order of the first new event landing on each slot
    written = offset < total
    rank = offset + size * (jnp.maximum(total - 1 - offset, 0) // size)  # 0-based rank of the last one there
    ends = small_cumsum(root)
    node = jnp.minimum((ends <= rank[:, None]).sum(1), root.shape[0] - 1)  # each slot's event's node at the root
    rank = rank - (ends - root)[node]  # ... and its rank among that node's events
    for counts in reversed(levels[:-1]):  # one level down: the node's children
        children = _groups(counts, fanout)[node]
        ends = small_cumsum(children, 1)
        child = jnp.minimum((ends <= rank[:, None]).sum(1), fanout - 1)
        rank = rank - jnp.take_along_axis(ends - children, child[:, None], 1)[:, 0]
        node = node * fanout + child
    if grid is not None:  # the leaf: the candidate within the node's group
        node = node * fanout + (grid[node] <= rank[:, None]).sum(1)
    src = jnp.minimum(node, m - 1)

    if depth <= 2:
        events = concat(batches)
        at_src = lambda field: getattr(events, field)[src]  # noqa: E731
    else:  # many candidates: gather from each batch, not from a copy of all of them
        starts = np.cumsum([0] + [b.valid.shape[0] for b in batches])

        def at_src(field):
            out = jnp.zeros(size, getattr(batches[0], field).dtype)
            for b, lo, hi in zip(batches, starts[:-1], starts[1:]):
                out = jnp.where((src >= lo) & (src < hi), getattr(b, field)[jnp.clip(src - lo, 0, hi - lo - 1)], out)
            return out

    def take(buf, field):
        return jnp.where(written, at_src(field).astype(buf.dtype), buf)

    return Ledger(
        step=jnp.where(written, jnp.asarray(step, ledger.step.dtype), ledger.step),
        kind=take(ledger.kind, "kind"),
        actor=take(ledger.actor, "actor"),
        target=take(ledger.target, "target"),
        amount_1=take(ledger.amount_1, "amount_1"),
        amount_2=take(ledger.amount_2, "amount_2"),
        resource=take(ledger.resource, "resource"),
        head=(ledger.head + total) % size,
        count=ledger.count + total,
    )


def _groups(counts: jnp.ndarray, fanout: int) -> jnp.ndarray:
    """(n,) -> (ceil(n / fanout), fanout), zero-padded."""
    n = counts.shape[0]
    return jnp.pad(counts, (0, -n % fanout)).reshape(-1, fanout)


def newest(ledger: Ledger, k: int):
    """Indices of the k newest slots, newest first."""
    size = ledger.kind.shape[0]
    return (ledger.head - 1 - jnp.arange(k)) % size
