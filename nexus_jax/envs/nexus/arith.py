"""Small-array arithmetic that compiles well under `vmap` on XLA:CPU.

XLA:CPU turns every float `reduce` into its own library call (a separate kernel per
reduction, ~20 per step at N=4), which for the (N,) and (N, N) tables of a Nexus step costs
far more than the few additions it does. Float sums are therefore written out as additions
(left to right over short axes, by halves over longer ones), which fuse with their producers
and consumers and add in one order at every batch size, on every backend (that order is part
of the values). The rest are fast paths (`nexus_jax.fastpaths`, on for XLA:CPU by default):
lookups into short tables (`pick`, `pick_shared`, `column`, `set_column`) as chains of selects
instead of batched gathers and scatters, values stored once (`materialize`), boolean transposes
through uint8 (`flags_t`), running counts as adds (`small_cumsum`); where the fast paths are off
each is its plain `jnp` form, with the same values. See docs/performance.md.
"""
from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from nexus_jax import fastpaths

UNROLL_MAX = 4  # longer axes are summed by halves (`pairwise_sum`): log2(n) adds deep; unrolled 8- and
# 16-term chains got duplicated into many fusions inside the scanned step (2-8x slower at N=8 and N=16)
CUMSUM_UNROLL_MAX = 16  # the ledger's candidate grid is ceil(sqrt(events)) wide: 10 at N=4, 16 up to N=7


def small_sum(x: jnp.ndarray, axis: int = -1) -> jnp.ndarray:
    """`x.sum(axis)` for a float array: a left-to-right chain of adds when the axis is short, by halves beyond."""
    x = jnp.asarray(x)
    n = x.shape[axis % x.ndim]
    return x.sum(axis) if n == 0 else chain_sum(x, axis) if n <= UNROLL_MAX else pairwise_sum(x, axis)


def pairwise_sum(x: jnp.ndarray, axis: int = -1) -> jnp.ndarray:
    """`x.sum(axis)` by halves: the first half plus the second, until one row is left (an odd row's last element
    is carried to the next level). No reduce op, so the order is this one whatever the batch, the layout or the
    backend: XLA:CPU's reduction added a row of 16 in one order for one env and in another (YNNPACK's) from
    4,096 elements on, so an episode's bits at N >= 5 depended on how many envs ran beside it, and a batch-last
    step (`base/batch_minor.py`) could not reproduce either (docs/performance.md)."""
    x = jnp.asarray(x)
    axis = axis % x.ndim
    while x.shape[axis] > 1:
        n, half = x.shape[axis], x.shape[axis] // 2
        top = lax.slice_in_dim(x, 0, half, axis=axis) + lax.slice_in_dim(x, half, 2 * half, axis=axis)
        x = top if n % 2 == 0 else lax.concatenate([top, lax.slice_in_dim(x, 2 * half, n, axis=axis)], axis)
    return lax.index_in_dim(x, 0, axis, keepdims=False)


def chain_sum(x: jnp.ndarray, axis: int = -1) -> jnp.ndarray:
    """`x.sum(axis)` as a left-to-right chain of adds, whatever the axis length: no reduce op.

    XLA:CPU hands a float reduction over 4,096 or more elements (any batch of a vmapped step) to
    its YNNPACK library, a kernel of its own that costs 5-20x the few adds it does here, and sums
    in another order than below that size, so the same episode's bits depended on the batch.
    The chain is XLA's own order for short rows: what a step vmapped over 64
    envs computed before.
    """
    x = jnp.asarray(x)
    axis = axis % x.ndim
    take = lambda i: lax.index_in_dim(x, i, axis, keepdims=False)  # noqa: E731  a static slice
    acc = take(0)
    for i in range(1, x.shape[axis]):
        acc = acc + take(i)
    return acc


def min_resource(x: jnp.ndarray) -> jnp.ndarray:
    """`x.min(-1)` over the (..., 2) [Energy, Compute] axis, as one elementwise minimum (no reduce op)."""
    x = jnp.asarray(x)
    return jnp.minimum(x[..., 0], x[..., 1]) if fastpaths.enabled() else x.min(-1)


def small_cumsum(x: jnp.ndarray, axis: int = -1) -> jnp.ndarray:
    """Inclusive `jnp.cumsum(x, axis)` as running adds when the axis is short (XLA:CPU lowers
    cumsum to a reduce-window, its own kernel: 2.5% of env.step for the ledger's 10 x 10 grid).
    Exact for integers; used for counts."""
    x = jnp.asarray(x)
    axis = axis % x.ndim
    n = x.shape[axis]
    if not fastpaths.enabled():
        return jnp.cumsum(x, axis)
    if n > CUMSUM_UNROLL_MAX:  # an associative scan: jnp.cumsum's reduce-window is O(n^2) on XLA:CPU
        return lax.associative_scan(jnp.add, x, axis=axis)
    if n == 0:
        return jnp.cumsum(x, axis)
    parts = [lax.index_in_dim(x, 0, axis, keepdims=False)]
    for i in range(1, n):
        parts.append(parts[-1] + lax.index_in_dim(x, i, axis, keepdims=False))
    return jnp.stack(parts, axis)


def pick(table, index) -> jnp.ndarray:
    """`table[index]` for a short static or traced table, as a chain of selects (a batched
    gather is a scalar loop on XLA:CPU). Out-of-range indices give `table[0]`: clip first."""
    if not fastpaths.enabled():
        table, index = jnp.asarray(table), jnp.asarray(index)
        return table[jnp.where((index >= 0) & (index < table.shape[0]), index, 0)]
    out = jnp.broadcast_to(table[0], jnp.shape(index) + jnp.shape(table)[1:])
    idx = jnp.reshape(index, jnp.shape(index) + (1,) * (jnp.ndim(table) - 1))
    for k in range(1, jnp.shape(table)[0]):
        out = jnp.where(idx == k, table[k], out)
    return out


def pick_shared(values: list, index) -> jnp.ndarray:
    """`values[index]` for a static list of same-shaped arrays, as a one-hot sum over a stacked axis; 0 where
    `index` is out of range.

    Exact (one term is selected; integers, or floats but for the sign of a zero). Unlike `pick`'s chain of selects,
    this is a reduction, and XLA:CPU makes a reduction the root of its own kernel: the result
    is computed once and read by every consumer. A select chain is fused into each consumer
    instead, and inside `lax.scan` XLA then re-evaluates everything it depends on per element
    of every (N, N) table that reads it (the validity check: 3x the step time).
    """
    stacked = jnp.stack(jnp.broadcast_arrays(*values), -1)
    if not fastpaths.enabled():
        shape = jnp.broadcast_shapes(jnp.shape(index), stacked.shape[:-1])
        index = jnp.broadcast_to(index, shape)
        inside = (index >= 0) & (index < len(values))
        taken = jnp.take_along_axis(jnp.broadcast_to(stacked, shape + stacked.shape[-1:]),
                                    jnp.where(inside, index, 0)[..., None], -1)[..., 0]
        return jnp.where(inside, taken, jnp.zeros((), stacked.dtype))
    hot = jnp.expand_dims(index, -1) == jnp.arange(len(values))
    return jnp.where(hot, stacked, jnp.zeros((), stacked.dtype)).sum(-1)


def column(x: jnp.ndarray, index) -> jnp.ndarray:
    """`x[:, index]` for a traced scalar index into a short last axis, without a gather."""
    return pick(jnp.moveaxis(x, -1, 0), index)


def set_column(x: jnp.ndarray, index, values: jnp.ndarray) -> jnp.ndarray:
    """`x.at[:, index].set(values)` for a traced scalar index in range into the last axis, without a scatter."""
    if not fastpaths.enabled():
        return jnp.asarray(x).at[..., index].set(values)
    return jnp.where(jnp.arange(x.shape[-1]) == index, values[..., None], x)


def materialize(x: jnp.ndarray) -> jnp.ndarray:
    """x, computed once and stored: read by several kernels, it is not re-derived inside each.

    A max of x and the bottom of its dtype (an `any` with False for booleans; a float is
    bitcast to the integer of its width first): x is evaluated once, the result is x bit for
    bit (NaN, -0.0 and subnormals included), and it is a reduction, which XLA:CPU keeps as the
    root of its own kernel (see `pick_shared`). Without it, XLA fuses a cheap elementwise
    producer into every consumer; inside `lax.scan` that re-derives, say, the whole validity
    check for every cell of every table that reads a state field the step wrote.
    The integer max is XLA's own loop; a float max over 4,096 or more elements went to the
    YNNPACK library instead, 1.14x slower for env.step (docs/performance.md).
    """
    x = jnp.asarray(x)
    if not fastpaths.enabled():
        return x
    if x.dtype == jnp.bool_:
        return jnp.stack([x, jnp.zeros_like(x)]).any(0)
    if jnp.issubdtype(x.dtype, jnp.floating):
        bits = lax.bitcast_convert_type(x, jnp.dtype(f"int{8 * x.dtype.itemsize}"))
        return lax.bitcast_convert_type(materialize(bits), x.dtype)
    return jnp.stack([x, jnp.full_like(x, jnp.iinfo(x.dtype).min)]).max(0)


LARGE_TABLE = 256  # elements per env: the (N, N) tables from N = 16 on


def materialize_large(x: jnp.ndarray) -> jnp.ndarray:
    """`materialize(x)` for a table of LARGE_TABLE or more elements (per env), x itself for a smaller one.

    Whether storing a value beats re-deriving it in each consumer depends on its size: a stored
    value is a kernel more (~15-25 ns per kernel and env at N = 4), while the work
    of re-deriving grows with the table. Storing the expiry flags and the chosen-target table
    was 1.00x of the core at N = 8 and 1.08x at N = 64 (docs/performance.md); below the
    threshold the program is unchanged. The values are the same either way.
    """
    return materialize(x) if jnp.size(x) >= LARGE_TABLE else x


def flags_t(x: jnp.ndarray) -> jnp.ndarray:
    """`x.T` for a boolean (N, N) table; from LARGE_TABLE elements on, written through uint8. XLA
    moves the transpose back onto the `pred` values (the optimized HLO has no uint8 transpose),
    but a transpose of a fusion parameter alone is emitted as a layout-copy kernel that is slow
    for 1-byte elements, and with the conversion it is a loop fusion instead: `t | t.T` in a scan,
    B = 64, N = 64, 12.1 against 3.5 us per env-step; the core at N = 64 1.05-1.08x
    (docs/performance.md). At N = 4 either is ~free, and the plain transpose is kept. Exact."""
    large = jnp.size(x) >= LARGE_TABLE and fastpaths.enabled()
    return x.astype(jnp.uint8).T.astype(bool) if large else x.T
