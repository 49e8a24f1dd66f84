"""`arith.materialize`: exact for every dtype the state holds, and a reduction in the optimized HLO
(the property the env step relies on: XLA:CPU does not fuse through a reduction's result)."""
import jax
import jax.numpy as jnp
import numpy as np

from nexus_jax.envs.nexus.arith import LARGE_TABLE, materialize, materialize_large


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
    from nexus_jax.envs.nexus.arith import chain_sum, min_resource
    x = jax.random.normal(jax.random.PRNGKey(0), (16, 4, 8, 2)) * 50.0
    for axis in (1, 2, 3):
        np.testing.assert_array_equal(np.asarray(jax.jit(lambda v: chain_sum(v, axis))(x)),
                                      np.asarray(jax.jit(lambda v: v.sum(axis))(x)))
    np.testing.assert_array_equal(np.asarray(jax.jit(min_resource)(x)), np.asarray(jax.jit(lambda v: v.min(-1))(x)))
    big = jnp.ones((4096, 4, 8, 2))
    for f in (lambda v: chain_sum(v, 2), min_resource):
        hlo = jax.jit(f).lower(big).compile().as_text()
        assert " reduce(" not in hlo and "__ynn_fusion" not in hlo
