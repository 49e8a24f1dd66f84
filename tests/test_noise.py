"""noise.py: stacked draws are bit for bit the separate `jax.random` draws, for both key kinds."""
import re

import jax
import jax.numpy as jnp
import numpy as np

from nexus_jax.envs.nexus.noise import GUMBEL_LOW, gumbel_from, uniforms
from nexus_jax.envs.nexus.noise import is_fast

DRAWS = [((4,), -1.0, 1.0), ((4,), 0.0, 1.0), ((3, 5), 0.0, 1.0), ((4, 4), GUMBEL_LOW, 1.0), ((), 0.0, 1.0)]


def test_stacked_draws_equal_jax_random_for_raw_and_typed_keys():
    for root in (jax.random.PRNGKey(3), jax.random.key(3)):
        keys = jax.random.split(root, len(DRAWS))
        assert is_fast(keys)
        got = jax.jit(lambda k: uniforms(k, DRAWS))(keys)
        for i, ((shape, lo, hi), g) in enumerate(zip(DRAWS, got)):
            want = jax.random.uniform(keys[i], shape, minval=lo, maxval=hi)
            assert g.shape == shape and g.dtype == jnp.float32
            np.testing.assert_array_equal(np.asarray(g).view(np.uint32), np.asarray(want).view(np.uint32))
        np.testing.assert_array_equal(np.asarray(gumbel_from(got[3])), np.asarray(jax.random.gumbel(keys[3], (4, 4))))


def test_stacked_draws_under_vmap_are_fused_hashes_not_loops():
    keys = jax.vmap(lambda k: jax.random.split(k, len(DRAWS)))(jax.random.split(jax.random.PRNGKey(0), 8))
    hlo = jax.jit(jax.vmap(lambda k: uniforms(k, DRAWS))).lower(keys).compile().as_text()
    assert not re.findall(r" while\(", hlo)  # jax.random's threefry is a rolled loop on XLA:CPU; ours is unrolled
    got = jax.jit(jax.vmap(lambda k: uniforms(k, DRAWS)))(keys)
    want = jax.vmap(lambda k: [jax.random.uniform(k[i], s, minval=lo, maxval=hi) for i, (s, lo, hi) in enumerate(DRAWS)])(keys)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_other_key_kinds_fall_back_to_separate_draws():
    keys = jax.random.split(jax.random.key(1, impl="rbg"), len(DRAWS))
    assert not is_fast(keys)
    for i, ((shape, lo, hi), g) in enumerate(zip(DRAWS, uniforms(keys, DRAWS))):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(jax.random.uniform(keys[i], shape, minval=lo, maxval=hi)))
