"""Jittable spaces with the attributes JaxMARL and gymnax code reads (`n`, `shape`, `dtype`).

Ecosystem code checks spaces with `isinstance` against its own classes (JaxMARL's
`CTRolloutManager`, gymnax's and PureJaxRL's `FlattenObservationWrapper`, gymnax's
`StickyActionWrapper`). jaxmarl and gymnax are optional extras, and importing either costs
seconds, so we never import them: a space built while `jaxmarl.environments.spaces` and/or
`gymnax.environments.spaces` is already imported is an instance of a subclass of our class
*and* of their class of the same name (`Discrete`, `Box`, `MultiDiscrete`). Any code that runs
such a check has imported its space module first; `compatible(space)` upgrades a space built
before that import (the envs call it whenever a space is requested). Their classes are plain
classes, not ABCs, so `ABC.register` is not available; real subclassing is the only way.
"""
from __future__ import annotations

import functools
import sys
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np


ECOSYSTEM_SPACE_MODULES = ("jaxmarl.environments.spaces", "gymnax.environments.spaces")


def _ecosystem_bases(name: str) -> tuple:
    """The ecosystem's classes called `name`, from the space modules imported so far."""
    mods = (sys.modules.get(m) for m in ECOSYSTEM_SPACE_MODULES)
    return tuple(getattr(m, name) for m in mods if m is not None and isinstance(getattr(m, name, None), type))


@functools.lru_cache(maxsize=None)
def _with_bases(cls: type, bases: tuple) -> type:
    """`cls` extended with the ecosystem `bases` (our methods first in the MRO)."""
    return type(cls.__name__, (cls, *bases), {"__module__": cls.__module__, "__doc__": cls.__doc__,
                                              "__qualname__": cls.__qualname__})


def _our_class(cls: type) -> type:
    """The nexus_jax class under a possibly extended one."""
    return next(c for c in cls.__mro__ if c.__module__ == __name__ and c.__dict__.get("_ours", False))


def compatible(space: "Space") -> "Space":
    """`space`, as an instance of every ecosystem class of its name imported now (a copy if it was not)."""
    cls = _our_class(type(space))
    bases = _ecosystem_bases(cls.__name__)
    if all(isinstance(space, b) for b in bases):
        return space
    out = object.__new__(_with_bases(cls, bases))
    out.__dict__.update(space.__dict__)
    return out


class Space:
    """A set of values an action or observation may take."""

    _ours = True
    shape: tuple
    dtype: jnp.dtype

    def __new__(cls, *args, **kwargs):
        bases = _ecosystem_bases(cls.__name__)
        return object.__new__(_with_bases(cls, bases) if bases else cls)

    def sample(self, key: jax.Array) -> jax.Array:
        raise NotImplementedError

    def contains(self, x: jax.Array) -> jax.Array:
        raise NotImplementedError


class Discrete(Space):
    """Integers 0..n-1 (the default, flat action space)."""

    _ours = True

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

    _ours = True

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

    _ours = True

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
