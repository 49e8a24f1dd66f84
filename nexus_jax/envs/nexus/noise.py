"""Several `jax.random` draws in one threefry call, bit for bit what the separate calls give.

XLA:CPU runs every `jax.random` call as its own rolled loop (about 16 small kernels per
iteration, 5 iterations), and a Nexus step made 13 of them: ~17% of `env.step` (issue 15).
Draws of the same size from several keys are one call when the keys are stacked: `jax.vmap`
batches the threefry primitive (under JAX's default partitionable threefry each element's
bits depend only on its key and row-major index). Sharing one call between sizes, the
smaller draws taken as prefixes of the largest, was slower (0.96x env.step): at B=4096 the
loops' cost is their arithmetic, and the padding added work. `uniform` below is `jax.random.uniform`'s own
mapping of bits to floats; `tests/test_noise.py` checks every draw against `jax.random`.

With another key implementation or `jax_threefry_partitionable=False` the draws are made one
call each, exactly as `jax.random` would.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


def batchable(keys) -> bool:
    """Do stacked draws from `keys` equal separate `jax.random` draws (threefry, partitionable)?"""
    if not jax.config.jax_threefry_partitionable:
        return False
    if jnp.issubdtype(keys.dtype, jax.dtypes.prng_key):
        return "threefry" in str(jax.random.key_impl(keys)).lower()
    return "threefry" in str(jax.config.jax_default_prng_impl).lower()


def _to_uniform(bits: jnp.ndarray, shape: tuple, minval: float, maxval: float) -> jnp.ndarray:
    """32 random bits -> float32 in [minval, maxval): `jax.random.uniform`'s mapping."""
    mantissa = lax.shift_right_logical(bits, jnp.uint32(32 - 23))
    one = jnp.uint32(np.array(1.0, np.float32).view(np.uint32))
    floats = lax.bitcast_convert_type(lax.bitwise_or(mantissa, one), jnp.float32) - jnp.float32(1.0)
    lo, hi = jnp.float32(minval), jnp.float32(maxval)
    return lax.max(lo, lax.reshape(floats * (hi - lo) + lo, shape))


def uniforms(keys, draws: list[tuple[tuple, float, float]]) -> list[jnp.ndarray]:
    """Draw i is `jax.random.uniform(keys[i], shape_i, minval=lo_i, maxval=hi_i)` (float32), for
    `draws[i] = (shape_i, lo_i, hi_i)`: one threefry call per distinct size when `batchable`."""
    if not batchable(keys):
        return [jax.random.uniform(keys[i], shape, minval=lo, maxval=hi) for i, (shape, lo, hi) in enumerate(draws)]
    out = [None] * len(draws)
    for size in sorted({math.prod(shape) for shape, _, _ in draws}):  # one call per size: no counter is wasted
        which = [i for i, (shape, _, _) in enumerate(draws) if math.prod(shape) == size]
        bits = jax.vmap(lambda k: jax.random.bits(k, (size,), jnp.uint32))(keys[jnp.asarray(which)])
        for row, i in enumerate(which):
            out[i] = _to_uniform(bits[row], draws[i][0], draws[i][1], draws[i][2])
    return out


def gumbel_from(u: jnp.ndarray) -> jnp.ndarray:
    """`jax.random.gumbel` (its default "low" mode) from the uniform draw it makes internally:
    `uniform(key, shape, minval=GUMBEL_LOW, maxval=1.0)`."""
    return -jnp.log(-jnp.log(u))


GUMBEL_LOW = float(np.finfo(np.float32).tiny)  # the lower bound of the uniform behind `gumbel_from`
