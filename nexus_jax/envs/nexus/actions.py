"""Action encodings: the flat Discrete(n) enumeration JaxMARL baselines use, and the factored view.

A structured action is int32 (type, target, amount_1, amount_2, resource); amounts are
indices into `params.amount_grid`. Fields a type does not use are ignored. The flat
enumeration lists, in order: WAIT; PROPOSE (resource, target, give, want); ACCEPT
(target); REJECT (target); WORK (resource); VAULT (resource, amount); UNVAULT
(resource, amount); SIGNAL (resource, target, give, want). Its size is
3 + 2N + 4L + 4NL^2 for N agents and L amount levels.
"""
from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np

from nexus_jax.envs.nexus.constants import NUM_ACTION_TYPES, NUM_RESOURCES, ActionType as T


def _rows(kind: int, n: int, levels: int) -> np.ndarray:
    """Structured rows of one action type, in flat order."""
    r, j, a, b = np.meshgrid(np.arange(2), np.arange(n), np.arange(levels), np.arange(levels), indexing="ij")
    zeros = lambda k: np.zeros(k, np.int32)  # noqa: E731
    if kind == T.WAIT or kind == T.WORK:
        res = np.arange(1 if kind == T.WAIT else 2)
        return np.stack([np.full(len(res), kind), zeros(len(res)), zeros(len(res)), zeros(len(res)), res], 1)
    if kind in (T.ACCEPT, T.REJECT):
        return np.stack([np.full(n, kind), np.arange(n), zeros(n), zeros(n), zeros(n)], 1)
    if kind in (T.VAULT, T.UNVAULT):
        rr, aa = np.meshgrid(np.arange(2), np.arange(levels), indexing="ij")
        k = rr.size
        return np.stack([np.full(k, kind), zeros(k), aa.ravel(), zeros(k), rr.ravel()], 1)
    # PROPOSE / SIGNAL
    k = r.size
    return np.stack([np.full(k, kind), j.ravel(), a.ravel(), b.ravel(), r.ravel()], 1)


def block_fields(kind: int, num_agents: int, num_levels: int) -> tuple[np.ndarray, ...]:
    """Block `kind` of the flat table as five broadcastable int32 field arrays (type, target, amount_1,
    amount_2, resource) over its natural axes: PROPOSE/SIGNAL (2, N, L, L) over (resource, target, give,
    want); ACCEPT/REJECT (N,); WORK (2,); VAULT/UNVAULT (2, L); WAIT (1,). Broadcast and flattened in C
    order they are the block's rows of `action_table`, in flat order."""
    n, L = num_agents, num_levels
    i32 = lambda x: np.asarray(x, np.int32)  # noqa: E731
    zero, kind_ = i32(0), i32(kind)
    if kind in (T.PROPOSE, T.SIGNAL):
        r, j, a, b = (i32(np.arange(k)).reshape([-1 if d == axis else 1 for d in range(4)])
                      for axis, k in enumerate((2, n, L, L)))
        return kind_, j, a, b, r
    if kind in (T.ACCEPT, T.REJECT):
        return kind_, i32(np.arange(n)), zero, zero, zero
    if kind in (T.VAULT, T.UNVAULT):
        return kind_, zero, i32(np.arange(L))[None, :], zero, i32(np.arange(2))[:, None]
    if kind == T.WORK:
        return kind_, zero, zero, zero, i32(np.arange(2))
    return kind_, zero, zero, zero, i32(np.zeros(1))  # WAIT


@functools.lru_cache(maxsize=None)
def table_blocks(num_agents: int, num_levels: int) -> tuple[np.ndarray, ...]:
    """The flat table's rows type by type: block t (int32 (n_t, 5)) holds every action of type t, in flat order."""
    return tuple(_rows(k, num_agents, num_levels).astype(np.int32) for k in range(NUM_ACTION_TYPES))


@functools.lru_cache(maxsize=None)
def action_table(num_agents: int, num_levels: int) -> np.ndarray:
    """(n, 5) int32: flat index -> structured action."""
    return np.concatenate(table_blocks(num_agents, num_levels))


@functools.lru_cache(maxsize=None)
def _offsets(num_agents: int, num_levels: int) -> np.ndarray:
    sizes = [len(_rows(k, num_agents, num_levels)) for k in range(NUM_ACTION_TYPES)]
    return np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int32)


def num_flat_actions(num_agents: int, num_levels: int) -> int:
    return 3 + 2 * num_agents + 4 * num_levels + 4 * num_agents * num_levels**2


def factored_nvec(num_agents: int, num_levels: int) -> tuple[int, ...]:
    """Head sizes of the factored MultiDiscrete view: (type, target, amount_1, amount_2, resource)."""
    return (NUM_ACTION_TYPES, num_agents, num_levels, num_levels, NUM_RESOURCES)


def decode(flat: jnp.ndarray, num_agents: int, num_levels: int) -> jnp.ndarray:
    """Flat indices (...,) -> structured (..., 5). Out-of-range indices decode to type -1 (invalid)."""
    table = jnp.asarray(action_table(num_agents, num_levels))
    n = table.shape[0]
    ok = (flat >= 0) & (flat < n)
    rows = table[jnp.clip(flat, 0, n - 1)]
    return jnp.where(ok[..., None], rows, jnp.array([-1, 0, 0, 0, 0], jnp.int32))


def encode(action: jnp.ndarray, num_agents: int, num_levels: int) -> jnp.ndarray:
    """Structured (..., 5) -> flat index (...,). Unused fields are ignored; fields must be in range."""
    off = jnp.asarray(_offsets(num_agents, num_levels))
    kind, j, a, b, r = (action[..., i] for i in range(5))
    n, L = num_agents, num_levels
    pair = ((r * n + j) * L + a) * L + b
    within = jnp.select(
        [kind == T.WAIT, kind == T.PROPOSE, (kind == T.ACCEPT) | (kind == T.REJECT), kind == T.WORK,
         (kind == T.VAULT) | (kind == T.UNVAULT), kind == T.SIGNAL],
        [0, pair, j, r, r * L + a, pair],
    )
    return off[jnp.clip(kind, 0, NUM_ACTION_TYPES - 1)] + within


def structured(kind, target=0, amount_1=0, amount_2=0, resource=0) -> jnp.ndarray:
    """Convenience constructor for one structured action."""
    return jnp.array([int(kind), target, amount_1, amount_2, resource], jnp.int32)
