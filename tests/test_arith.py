"""`arith.materialize`: exact for every dtype the state holds, and a reduction in the optimized HLO
(the property the env step relies on: XLA:CPU does not fuse through a reduction's result)."""
import jax
import jax.numpy as jnp
import numpy as np

from nexus_jax.envs.nexus.arith import (LARGE_TABLE, chain_sum, materialize, materialize_large, min_resource,
                                        pairwise_sum, small_sum)


def test_materialize_is_bitwise_identity():
    f32 = jnp.asarray([0.0, -0.0, 1.5, -3.25, jnp.inf, -jnp.inf, jnp.nan, np.finfo(np.float32).min,
                       np.finfo(np.float32).tiny], jnp.float32)  # (subnormals flush, as in every XLA:CPU op)
    i32 = jnp.asarray([0, -1, 7, np.iinfo(np.int32).min, np.iinfo(np.int32).max], jnp.int32)
    b = jnp.asarray([True, False, True])
    for x in (f32, i32, b, f32.reshape(3, 3)):
        y = jax.jit(materialize)(x)
        assert y.dtype == x.dtype and y.shape == x.shape
        np.testing.assert_array_equal(np.asarray(y).view(np.uint8), np.asarray(x).view(np.uint8))


def test_materialize_large_stores_only_large_tables():
    """The same values at every size; a reduction (a stored value) from LARGE_TABLE elements on, none below."""
    for n in (4, 16):
        x = jnp.arange(n * n, dtype=jnp.float32).reshape(n, n) - 7.5
        fn = jax.jit(lambda t: materialize_large(t > 0.0))
        np.testing.assert_array_equal(np.asarray(fn(x)), np.asarray(x > 0.0))
        hlo = fn.lower(x).compile().as_text()
        assert ("reduce" in hlo) == (n * n >= LARGE_TABLE), n


def test_materialize_ends_in_a_reduction():
    """A reduction (XLA's own kernel, never YNNPACK's library call: a float is reduced as integers)."""
    for shape in ((4, 3), (4096, 4, 2)):
        hlo = jax.jit(lambda x: materialize(x * 2.0 + 1.0)).lower(jnp.ones(shape)).compile().as_text()
        assert (" reduce(" in hlo or "reduce-" in hlo or "_reduce_fusion" in hlo) and "__ynn_fusion" not in hlo


def test_chain_sum_and_min_resource_match_the_reductions_and_lower_without_one():
    """The sums and minima the step writes out as adds: bit for bit `x.sum`/`x.min` as XLA computes
    them on a small batch (its own left-to-right loop), and no reduce op at a batch where XLA:CPU
    would hand the reduction to its YNNPACK library (another summation order, a kernel of its own)."""
    x = jax.random.normal(jax.random.PRNGKey(0), (16, 4, 8, 2)) * 50.0
    for axis in (1, 2, 3):
        np.testing.assert_array_equal(np.asarray(jax.jit(lambda v: chain_sum(v, axis))(x)),
                                      np.asarray(jax.jit(lambda v: v.sum(axis))(x)))
    np.testing.assert_array_equal(np.asarray(jax.jit(min_resource)(x)), np.asarray(jax.jit(lambda v: v.min(-1))(x)))
    big = jnp.ones((4096, 4, 8, 2))
    for f in (lambda v: chain_sum(v, 2), min_resource):
        hlo = jax.jit(f).lower(big).compile().as_text()
        assert " reduce(" not in hlo and "__ynn_fusion" not in hlo


def test_pairwise_sum_adds_by_halves_in_one_order_at_every_batch():
    """The long sums of the step (N >= 5): the first half plus the second, an odd row's last element carried.
    The same bits for a row alone and inside 4,096 rows (XLA's reduce changes order there), no reduce op."""
    x = jax.random.normal(jax.random.PRNGKey(1), (4096, 5)) * jnp.logspace(-3, 3, 5)
    v = np.asarray(x, np.float32)
    f32 = np.float32
    by_halves = ((v[:, 0] + v[:, 2]).astype(f32) + (v[:, 1] + v[:, 3]).astype(f32)).astype(f32) + v[:, 4]
    batched = np.asarray(jax.jit(jax.vmap(lambda r: pairwise_sum(r)))(x))
    np.testing.assert_array_equal(batched, by_halves.astype(f32))
    alone = np.asarray(jax.jit(lambda r: pairwise_sum(r))(x[123]))
    np.testing.assert_array_equal(alone, batched[123])
    table = jax.random.normal(jax.random.PRNGKey(2), (4096, 16, 16))
    np.testing.assert_allclose(np.asarray(jax.jit(jax.vmap(lambda t: small_sum(t, 0)))(table)),
                               np.asarray(table.sum(1)), rtol=1e-5, atol=1e-5)
    hlo = jax.jit(jax.vmap(lambda t: small_sum(t, 0))).lower(table).compile().as_text()
    assert " reduce(" not in hlo and "__ynn_fusion" not in hlo
