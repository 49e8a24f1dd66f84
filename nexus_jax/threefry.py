"""`jax.random.split` and `jax.random.bits` for threefry keys, bit for bit, as one fused kernel each on XLA:CPU.

JAX lowers its threefry hash on CPU as a rolled loop (5 iterations of ~16 small kernels, to
keep compile times short); on other platforms it is unrolled. An env step makes about nine
draws and splits, and on the 2-core CPU they were a large share of `env.step`: the NPC
policy's draws alone cost 1.18x of it (issue 15, eighth pass). Written out here as the same
uint32 operations, unrolled, XLA fuses each call into one loop kernel.

The values are JAX's own: under the default `jax_threefry_partitionable`, `split(key, n)`
hashes the counters 0..n-1 and `bits(key, shape)` hashes the row-major index of each element
(`jax._src.random.threefry2x32`). For any other key implementation, or with partitionable
threefry off, both call `jax.random` itself. `tests/test_threefry.py` checks every path
against `jax.random`, raw and typed keys, under `vmap` and `jit`.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = np.uint32(0x1BD11BDA)


def is_fast(key) -> bool:
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


def _stored(x):
    """x (uint32), computed once: a max with 0 is a reduction, the root of its own kernel on XLA:CPU, so the
    unrolled hash is not fused into (and re-evaluated by) every consumer (see `arith.materialize`)."""
    return jnp.stack([x, jnp.zeros_like(x)]).max(0)


def _words(key):
    """-> (k1, k2, typed): the two key words of a raw (..., 2) uint32 key or a typed key array."""
    typed = jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
    data = jax.random.key_data(key) if typed else jnp.asarray(key)
    return data[..., 0], data[..., 1], typed


def _counters(k, shape: tuple):
    """Key words (...,) and the row-major index over `shape` -> broadcast (..., *shape) operands."""
    lo = jnp.arange(math.prod(shape), dtype=jnp.uint32).reshape(shape)
    return jnp.expand_dims(k, tuple(range(k.ndim, k.ndim + len(shape)))), lo


def split(key, num: int = 2):
    """`jax.random.split(key, num)` for one key (raw or typed)."""
    if not is_fast(key) or jnp.ndim(key) != (0 if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else 1):
        return jax.random.split(key, num)
    k1, k2, typed = _words(key)
    k1b, lo = _counters(k1, (num,))
    b1, b2 = hash2x32(k1b, _counters(k2, (num,))[0], jnp.zeros_like(lo), lo)
    data = _stored(jnp.stack([b1, b2], -1))
    return jax.random.wrap_key_data(data, impl=jax.random.key_impl(key)) if typed else data


def bits(keys, shape: tuple):
    """uint32 `jax.random.bits(k, shape)` of every key in `keys` (raw (..., 2) or typed (...,)): leading axes
    of the keys, then `shape`. Only for keys where `is_fast` holds (the caller falls back otherwise)."""
    if not is_fast(keys):
        raise ValueError("threefry.bits: not a partitionable threefry key; use jax.random")
    k1, k2, _ = _words(keys)
    k1b, lo = _counters(k1, tuple(shape))
    b1, b2 = hash2x32(k1b, _counters(k2, tuple(shape))[0], jnp.zeros_like(lo), lo)
    return _stored(b1 ^ b2)


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
