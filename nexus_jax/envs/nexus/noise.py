"""The step's randomness: `jax.random`'s split, bits and uniform for threefry keys, bit for bit, as fused kernels.

JAX lowers its threefry hash on CPU as a rolled loop (5 iterations of ~16 small kernels, to
keep compile times short; it is unrolled on other platforms). A Nexus step makes about nine
draws and splits, and the NPC policy's draws alone cost 1.18x of `env.step` (docs/performance.md). `hash2x32` is the same uint32 operations written out, which XLA fuses into one kernel;
each result is stored once (`arith.materialize`), or XLA fuses the ~100-op hash into every
consumer. Under JAX's default `jax_threefry_partitionable`, `split(key, n)` hashes the counters
0..n-1 and `bits(key, shape)` the row-major index of each element, exactly as JAX's own
threefry does. It is a fast path (`nexus_jax.fastpaths`, on for XLA:CPU by default): where those
are off, for any other key implementation, or with partitionable threefry off, everything here
calls `jax.random` itself (the same bits).

Draws of the same size from several keys are one hash over the stacked keys (`uniforms`).
Sharing one hash between sizes, the smaller draws taken as prefixes of the largest, was slower
(0.96x env.step). `tests/test_noise.py` and `tests/test_threefry.py` check every
function against `jax.random`: raw and typed keys, under `jit` and `vmap`.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from nexus_jax import fastpaths
from nexus_jax.envs.nexus.arith import materialize

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = np.uint32(0x1BD11BDA)


def is_fast(key) -> bool:
    """Draw with the written-out hash? Where the fast paths are on and `key` is a threefry key (`is_threefry`)."""
    return fastpaths.enabled() and is_threefry(key)


def is_threefry(key) -> bool:
    """Are `key`'s draws JAX's partitionable threefry (so this module's values are `jax.random`'s)?"""
    if not jax.config.jax_threefry_partitionable:
        return False
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return "threefry" in str(jax.random.key_impl(key)).lower()
    return "threefry" in str(jax.config.jax_default_prng_impl).lower()


def _rotl(x, r: int):
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def hash2x32(k1, k2, x1, x2):
    """The Threefry-2x32 hash (20 rounds) of counters (x1, x2) under key (k1, k2), all uint32, broadcast."""
    ks = (k1, k2, k1 ^ k2 ^ _PARITY)
    x1, x2 = x1 + ks[0], x2 + ks[1]
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x1 = x1 + x2
            x2 = _rotl(x2, r) ^ x1
        x1 = x1 + ks[(i + 1) % 3]
        x2 = x2 + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x1, x2


def _words(key):
    """-> (k1, k2, typed): the two key words of a raw (..., 2) uint32 key or a typed key array."""
    typed = jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
    data = jax.random.key_data(key) if typed else jnp.asarray(key)
    return data[..., 0], data[..., 1], typed


def _hash(keys, shape: tuple):
    """The hash of every key in `keys` over the row-major index of `shape` (high word 0): (..., *shape) x 2."""
    k1, k2, _ = _words(keys)
    lo = jnp.arange(math.prod(shape), dtype=jnp.uint32).reshape(shape)
    expand = lambda k: jnp.expand_dims(k, tuple(range(k.ndim, k.ndim + len(shape))))  # noqa: E731
    return hash2x32(expand(k1), expand(k2), jnp.zeros_like(lo), lo)


def split(key, num: int = 2):
    """`jax.random.split(key, num)` for one key (raw or typed)."""
    k1, _, typed = _words(key)
    if not is_fast(key) or k1.ndim:
        return jax.random.split(key, num)
    data = materialize(jnp.stack(_hash(key, (num,)), -1))  # stored once: else fused into every consumer
    return jax.random.wrap_key_data(data, impl=jax.random.key_impl(key)) if typed else data


def bits(keys, shape: tuple):
    """uint32 `jax.random.bits(k, shape)` of every key in `keys` (raw (..., 2) or typed (...,)): leading axes
    of the keys, then `shape`. Only for keys where `is_threefry` holds (the caller falls back otherwise)."""
    if not is_threefry(keys):
        raise ValueError("noise.bits: not a partitionable threefry key; use jax.random")
    b1, b2 = _hash(keys, tuple(shape))
    return materialize(b1 ^ b2)


def to_uniform(b, minval=0.0, maxval=1.0):
    """uint32 bits -> float32 in [minval, maxval): `jax.random.uniform`'s own mapping."""
    mantissa = jax.lax.shift_right_logical(b, jnp.uint32(32 - 23))
    one = jnp.uint32(np.array(1.0, np.float32).view(np.uint32))
    floats = jax.lax.bitcast_convert_type(mantissa | one, jnp.float32) - jnp.float32(1.0)
    lo, hi = jnp.float32(minval), jnp.float32(maxval)
    return jax.lax.max(lo, floats * (hi - lo) + lo)


def uniform(key, shape: tuple = (), minval=0.0, maxval=1.0):
    """`jax.random.uniform(key, shape, float32, minval, maxval)` for one key, with scalar bounds."""
    if not is_fast(key):
        return jax.random.uniform(key, shape, minval=minval, maxval=maxval)
    return to_uniform(bits(key, shape), minval, maxval)


def uniforms(keys, draws: list[tuple[tuple, float, float]]) -> list[jnp.ndarray]:
    """Draw i is `jax.random.uniform(keys[i], shape_i, minval=lo_i, maxval=hi_i)` (float32), for
    `draws[i] = (shape_i, lo_i, hi_i)`: one hash per distinct size when the keys are threefry's."""
    if not is_fast(keys):
        return [jax.random.uniform(keys[i], shape, minval=lo, maxval=hi) for i, (shape, lo, hi) in enumerate(draws)]
    out = [None] * len(draws)
    for size in sorted({math.prod(shape) for shape, _, _ in draws}):  # one call per size: no counter is wasted
        which = [i for i, (shape, _, _) in enumerate(draws) if math.prod(shape) == size]
        drawn = bits(keys[jnp.asarray(which)], (size,))
        for row, i in enumerate(which):
            shape, lo, hi = draws[i]
            out[i] = to_uniform(drawn[row].reshape(shape), lo, hi)
    return out


def gumbel_from(u: jnp.ndarray) -> jnp.ndarray:
    """`jax.random.gumbel` (its default "low" mode) from the uniform draw it makes internally:
    `uniform(key, shape, minval=GUMBEL_LOW, maxval=1.0)`."""
    return -jnp.log(-jnp.log(u))


GUMBEL_LOW = float(np.finfo(np.float32).tiny)  # the lower bound of the uniform behind `gumbel_from`
