"""Jittable spaces with the attributes JaxMARL and gymnax code reads (`n`, `shape`, `dtype`)."""
from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np


class Space:
    """A set of values an action or observation may take."""

    shape: tuple
    dtype: jnp.dtype

    def sample(self, key: jax.Array) -> jax.Array:
        raise NotImplementedError

    def contains(self, x: jax.Array) -> jax.Array:
        raise NotImplementedError


class Discrete(Space):
    """Integers 0..n-1 (the default, flat action space)."""

    def __init__(self, n: int, dtype=jnp.int32):
        if n < 1:
            raise ValueError(f"Discrete: n must be >= 1, got {n}")
        self.n = int(n)
        self.shape = ()
        self.dtype = dtype

    def sample(self, key: jax.Array) -> jax.Array:
        return jax.random.randint(key, self.shape, 0, self.n).astype(self.dtype)

    def contains(self, x: jax.Array) -> jax.Array:
        x = jnp.asarray(x)
        return (x >= 0) & (x < self.n) & (x.astype(self.dtype) == x)

    def __repr__(self) -> str:
        return f"Discrete({self.n})"


class MultiDiscrete(Space):
    """One integer per head, head k in 0..nvec[k]-1 (the factored action view)."""

    def __init__(self, nvec: Sequence[int], dtype=jnp.int32):
        self.nvec = np.asarray(nvec, dtype=np.int32)
        if self.nvec.ndim != 1 or (self.nvec < 1).any():
            raise ValueError(f"MultiDiscrete: nvec must be positive ints, got {nvec}")
        self.num_categories = self.nvec  # JaxMARL's attribute name
        self.shape = (len(self.nvec),)
        self.dtype = dtype

    def sample(self, key: jax.Array) -> jax.Array:
        return jax.random.randint(key, self.shape, 0, jnp.asarray(self.nvec)).astype(self.dtype)

    def contains(self, x: jax.Array) -> jax.Array:
        x = jnp.asarray(x)
        return jnp.all((x >= 0) & (x < jnp.asarray(self.nvec)))

    def __repr__(self) -> str:
        return f"MultiDiscrete({self.nvec.tolist()})"


class Box(Space):
    """A real-valued array between `low` and `high`."""

    def __init__(self, low, high, shape: tuple, dtype=jnp.float32):
        self.low = low
        self.high = high
        self.shape = tuple(shape)
        self.dtype = dtype

    def sample(self, key: jax.Array) -> jax.Array:
        low = jnp.maximum(jnp.asarray(self.low, self.dtype), -1e6)
        high = jnp.minimum(jnp.asarray(self.high, self.dtype), 1e6)
        return jax.random.uniform(key, self.shape, self.dtype, low, high)

    def contains(self, x: jax.Array) -> jax.Array:
        x = jnp.asarray(x)
        return (x.shape == self.shape) & jnp.all((x >= self.low) & (x <= self.high))

    def __repr__(self) -> str:
        return f"Box({self.low}, {self.high}, {self.shape})"
