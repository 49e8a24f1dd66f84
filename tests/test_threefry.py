"""noise.py: split, bits and uniform are bit for bit `jax.random`'s, raw and typed keys, under jit and vmap."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from nexus_jax.envs.nexus import noise


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_array_equal(a.view(np.uint32) if a.dtype == np.float32 else a,
                                  b.view(np.uint32) if b.dtype == np.float32 else b)


@pytest.mark.parametrize("make_key", [jax.random.PRNGKey, jax.random.key], ids=["raw", "typed"])
def test_split_bits_and_uniform_equal_jax_random(make_key):
    keys = jax.random.split(make_key(7), 6)
    data = (lambda k: jax.random.key_data(k)) if keys.dtype != jnp.uint32 else (lambda k: k)
    for k in keys:
        assert noise.is_fast(k)
        for num in (1, 2, 3, 5):
            _same(data(noise.split(k, num)), data(jax.random.split(k, num)))
        for shape in ((), (4,), (3, 5), (4, 4, 2)):
            _same(noise.bits(k, shape), jax.random.bits(k, shape, jnp.uint32))
            _same(noise.uniform(k, shape, -1.0, 1.0), jax.random.uniform(k, shape, minval=-1.0, maxval=1.0))
    # several keys at once: leading axes of the keys, then the shape
    _same(noise.bits(keys, (4, 4)), jax.vmap(lambda k: jax.random.bits(k, (4, 4), jnp.uint32))(keys))


def test_under_jit_and_vmap():
    keys = jax.random.split(jax.random.PRNGKey(0), 8)
    got = jax.jit(jax.vmap(lambda k: (noise.split(k, 3), noise.uniform(k, (4, 2)))))(keys)
    want = jax.vmap(lambda k: (jax.random.split(k, 3), jax.random.uniform(k, (4, 2))))(keys)
    for g, w in zip(got, want):
        _same(g, w)


def test_other_key_kinds_use_jax_random():
    k = jax.random.key(1, impl="rbg")
    assert not noise.is_fast(k)
    _same(jax.random.key_data(noise.split(k, 3)), jax.random.key_data(jax.random.split(k, 3)))
    _same(noise.uniform(k, (4,)), jax.random.uniform(k, (4,)))
    with pytest.raises(ValueError, match="threefry"):
        noise.bits(k, (4,))


def test_the_hash_is_one_fused_kernel_not_a_loop():
    hlo = jax.jit(jax.vmap(lambda k: noise.bits(k, (4, 4)))).lower(jax.random.split(jax.random.PRNGKey(0), 64)).compile().as_text()
    assert " while(" not in hlo
