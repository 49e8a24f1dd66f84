"""The compact action space: a small Discrete(K) subset of the flat enumeration, for unmasked learners.

SPEC's default space enumerates every structured action (823 for N=4, L=7); about two thirds
of uniform picks are invalid, and an unmasked policy-gradient learner (JaxMARL's IPPO/MAPPO,
PureJaxRL's PPO use no masks) starts with near-uniform logits over all of them. The compact
space keeps every action *type* but only two amount levels, the two middle ones of the grid
(`compact_levels`: 5 and 10 on the default grid), and trades of equal give and want:

    WAIT; ACCEPT j; REJECT j; WORK r; VAULT (r, a); UNVAULT (r, a);
    PROPOSE (r, j, a, a); SIGNAL (r, j, a, a)          for a in the two compact levels

K = 3 + 2N + 8 + 8N (51 for N=4). Each compact index names one flat index (`compact_table`),
so the rules are untouched: the env maps the index to the flat action and the step judges
it as any other (invalid -> WAIT with the invalid penalty and its error code); an index
outside 0..K-1 becomes an out-of-range flat index (BAD_INDEX). The mask is the flat mask's
columns at the table (`compact_mask`). Self-targets are kept (always invalid), so index
arithmetic is the same for every seat.
"""
from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np

from nexus_jax.envs.nexus import actions as A
from nexus_jax.envs.nexus.constants import ActionType as T


def compact_levels(num_levels: int) -> tuple[int, int]:
    """The two amount levels (grid indices) the compact space uses: the middle two."""
    lo = max(num_levels // 2, 1) if num_levels > 1 else 0
    return lo, min(lo + 1, num_levels - 1)


@functools.lru_cache(maxsize=None)
def compact_rows(num_agents: int, num_levels: int) -> np.ndarray:
    """(K, 5) int32: compact index -> structured action, in the order of the module docstring."""
    n, levels = num_agents, compact_levels(num_levels)
    rows = [(T.WAIT, 0, 0, 0, 0)]
    rows += [(T.ACCEPT, j, 0, 0, 0) for j in range(n)]
    rows += [(T.REJECT, j, 0, 0, 0) for j in range(n)]
    rows += [(T.WORK, 0, 0, 0, r) for r in range(2)]
    rows += [(kind, 0, a, 0, r) for kind in (T.VAULT, T.UNVAULT) for r in range(2) for a in levels]
    rows += [(kind, j, a, a, r) for kind in (T.PROPOSE, T.SIGNAL) for r in range(2) for j in range(n) for a in levels]
    return np.asarray(rows, np.int32)


@functools.lru_cache(maxsize=None)
def compact_table(num_agents: int, num_levels: int) -> np.ndarray:
    """(K,) int32: compact index -> flat index of the default enumeration (host-side numpy: usable under jit)."""
    index = {tuple(r): i for i, r in enumerate(A.action_table(num_agents, num_levels).tolist())}
    return np.asarray([index[tuple(r)] for r in compact_rows(num_agents, num_levels).tolist()], np.int32)


def num_compact_actions(num_agents: int) -> int:
    return 3 + 2 * num_agents + 8 + 8 * num_agents


def to_flat(compact: jnp.ndarray, num_agents: int, num_levels: int) -> jnp.ndarray:
    """Compact indices (...,) -> flat indices (...,); out-of-range compact indices -> -1 (BAD_INDEX)."""
    table = jnp.asarray(compact_table(num_agents, num_levels))
    k = table.shape[0]
    ok = (compact >= 0) & (compact < k)
    return jnp.where(ok, table[jnp.clip(compact, 0, k - 1)], -1)


def compact_mask(flat_mask: jnp.ndarray, num_agents: int, num_levels: int) -> jnp.ndarray:
    """(..., n) flat mask -> (..., K) mask of the compact actions."""
    return flat_mask[..., jnp.asarray(compact_table(num_agents, num_levels))]
