"""The public ledger: a fixed-size ring buffer that each step appends a variable number of events to."""
from __future__ import annotations

import math
from typing import NamedTuple

import jax.numpy as jnp

from nexus_jax.envs.nexus.arith import small_cumsum
from nexus_jax.envs.nexus.state import Ledger


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


def append(ledger: Ledger, events: Events, step) -> Ledger:
    """Write the valid events in order; when more than fit arrive, the oldest of them are dropped.

    Written slot-first: each ring slot gathers the newest valid event that lands on it. The
    event of a given rank is found in two levels (the candidates as a ~sqrt(M) x sqrt(M)
    grid: first the row, then the column), so the work is O(size * sqrt(M)) and not
    O(size * M). (A scatter of every candidate event was a serial loop on CPU, and a
    (size, M) rank comparison the largest single cost of the step under vmap; see
    docs/performance.md.)
    """
    size = ledger.kind.shape[0]
    m = events.valid.shape[0]
    cols = max(1, math.isqrt(m - 1) + 1)  # ceil(sqrt(m))
    rows = -(-m // cols)
    grid = jnp.pad(events.valid.astype(jnp.int32), (0, rows * cols - m)).reshape(rows, cols)
    within = small_cumsum(grid, 1)  # rank of each candidate within its row (inclusive)
    row_end = small_cumsum(within[:, -1])  # valid events up to the end of each row
    total = row_end[-1]
    offset = (jnp.arange(size) - ledger.head) % size  # order of the first new event landing on each slot
    written = offset < total
    newest_rank = offset + size * (jnp.maximum(total - 1 - offset, 0) // size)  # 0-based rank of the last one there
    row = jnp.minimum((row_end[None, :] <= newest_rank[:, None]).sum(1), rows - 1)  # the row holding that event
    in_row = newest_rank - (row_end - within[:, -1])[row]  # its 0-based rank within the row
    col = (within[row] <= in_row[:, None]).sum(1)
    src = jnp.minimum(row * cols + col, m - 1)

    def take(buf, values):
        return jnp.where(written, values[src].astype(buf.dtype), buf)

    return Ledger(
        step=jnp.where(written, jnp.asarray(step, ledger.step.dtype), ledger.step),
        kind=take(ledger.kind, events.kind),
        actor=take(ledger.actor, events.actor),
        target=take(ledger.target, events.target),
        amount_1=take(ledger.amount_1, events.amount_1),
        amount_2=take(ledger.amount_2, events.amount_2),
        resource=take(ledger.resource, events.resource),
        head=(ledger.head + total) % size,
        count=ledger.count + total,
    )


def newest(ledger: Ledger, k: int):
    """Indices of the k newest slots, newest first."""
    size = ledger.kind.shape[0]
    return (ledger.head - 1 - jnp.arange(k)) % size
