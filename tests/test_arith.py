"""`arith.materialize`: exact for every dtype the state holds, and a reduction in the optimized HLO
(the property the env step relies on: XLA:CPU does not fuse through a reduction's result)."""
import jax
import jax.numpy as jnp
import numpy as np

from nexus_jax.envs.nexus.arith import materialize


def test_materialize_is_bitwise_identity():
    f32 = jnp.asarray([0.0, -0.0, 1.5, -3.25, jnp.inf, -jnp.inf, jnp.nan, np.finfo(np.float32).min,
                       np.finfo(np.float32).tiny], jnp.float32)  # (subnormals flush, as in every XLA:CPU op)
    i32 = jnp.asarray([0, -1, 7, np.iinfo(np.int32).min, np.iinfo(np.int32).max], jnp.int32)
    b = jnp.asarray([True, False, True])
    for x in (f32, i32, b, f32.reshape(3, 3)):
        y = jax.jit(materialize)(x)
        assert y.dtype == x.dtype and y.shape == x.shape
        np.testing.assert_array_equal(np.asarray(y).view(np.uint8), np.asarray(x).view(np.uint8))


def test_materialize_ends_in_a_reduction():
    hlo = jax.jit(lambda x: materialize(x * 2.0 + 1.0)).lower(jnp.ones((4, 3))).compile().as_text()
    assert " reduce(" in hlo or "reduce-" in hlo or "__ynn_fusion" in hlo
