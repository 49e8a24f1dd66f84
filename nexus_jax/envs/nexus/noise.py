"""Several `jax.random.uniform` draws in one threefry hash, bit for bit what the separate calls give.

Draws of the same size from several keys are one `threefry.bits` call over the stacked keys
(under JAX's default partitionable threefry each element's bits depend only on its key and
row-major index), which XLA:CPU fuses into one kernel (`nexus_jax/threefry.py`). Sharing one
call between sizes, the smaller draws taken as prefixes of the largest, was slower (0.96x
env.step, issue 15). `tests/test_noise.py` checks every draw against `jax.random`.

With another key implementation or `jax_threefry_partitionable=False` the draws are made one
call each, exactly as `jax.random` would.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from nexus_jax import threefry


def uniforms(keys, draws: list[tuple[tuple, float, float]]) -> list[jnp.ndarray]:
    """Draw i is `jax.random.uniform(keys[i], shape_i, minval=lo_i, maxval=hi_i)` (float32), for
    `draws[i] = (shape_i, lo_i, hi_i)`: one hash per distinct size when the keys are threefry's."""
    if not threefry.is_fast(keys):
        return [jax.random.uniform(keys[i], shape, minval=lo, maxval=hi) for i, (shape, lo, hi) in enumerate(draws)]
    out = [None] * len(draws)
    for size in sorted({math.prod(shape) for shape, _, _ in draws}):  # one call per size: no counter is wasted
        which = [i for i, (shape, _, _) in enumerate(draws) if math.prod(shape) == size]
        bits = threefry.bits(keys[jnp.asarray(which)], (size,))
        for row, i in enumerate(which):
            shape, lo, hi = draws[i]
            out[i] = threefry.to_uniform(bits[row].reshape(shape), lo, hi)
    return out


def gumbel_from(u: jnp.ndarray) -> jnp.ndarray:
    """`jax.random.gumbel` (its default "low" mode) from the uniform draw it makes internally:
    `uniform(key, shape, minval=GUMBEL_LOW, maxval=1.0)`."""
    return -jnp.log(-jnp.log(u))


GUMBEL_LOW = float(np.finfo(np.float32).tiny)  # the lower bound of the uniform behind `gumbel_from`
