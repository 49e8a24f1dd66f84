"""The compact action space: a small Discrete(K) subset of the flat enumeration, for unmasked learners.

SPEC's default space enumerates every structured action (823 for N=4, L=7), and most JAX
baselines (JaxMARL's IPPO/MAPPO, PureJaxRL's PPO) sample it without masks. Measured with
JaxMARL's IPPO-FF defaults on nexus-v0 (experiments/ecosystem/README.md): over the full space the policy
stays near uniform; over a first compact draft (51 actions: every type, two amount levels,
absolute targets) the invalid rate went only from 58% to 36% in 2M steps. Three kinds of
action made uniform picks invalid: self-targets (always), ACCEPT/REJECT with no live proposal
(~90%), and PROPOSE once random SIGNALs had been broken and had drained the collateral that
proposal deposits need. So the compact space is, per seat i (K = 3N + 4, 16 for N=4):

    WAIT; ACCEPT (i+k mod N); WORK r; VAULT r a; UNVAULT r a; PROPOSE (i+k mod N) r a a
    for k = 1..N-1, r in {Energy, Compute}, a = the grid level nearest COMPACT_AMOUNT

Targets are relative (k-th seat after mine), so no action targets oneself and the same index
means the same thing from every seat. REJECT (it only costs trust: an unanswered proposal
expires) and SIGNAL (a promise whose break costs collateral) are left to the full and
structured formats. Each compact index names one flat action of its seat (`compact_table`), so
the rules are untouched: the step judges it as any other (invalid -> WAIT with the invalid
penalty and its error code); an index outside 0..K-1 becomes an out-of-range flat index
(BAD_INDEX). The mask is the seat's flat mask at its table row (`compact_mask`).
"""
from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np

from nexus_jax.envs.nexus import actions as A
from nexus_jax.envs.nexus.constants import ActionType as T

COMPACT_AMOUNT = 10.0  # [ours] the one trade/vault amount: a tenth of an endowment, inside the initial credit limit


def compact_level(amount_grid: tuple) -> int:
    """The grid level (index) the compact space trades and vaults: the nearest to COMPACT_AMOUNT."""
    grid = np.asarray(amount_grid, np.float64)
    return int(np.argmin(np.abs(grid - COMPACT_AMOUNT) + (grid == 0) * 1e9)) if (grid > 0).any() else 0


def num_compact_actions(num_agents: int) -> int:
    return 3 * num_agents + 4


@functools.lru_cache(maxsize=None)
def compact_rows(seat: int, num_agents: int, level: int) -> np.ndarray:
    """(K, 5) int32: seat's compact index -> structured action, in the order of the module docstring."""
    others = [(seat + k) % num_agents for k in range(1, num_agents)]
    rows = [(T.WAIT, 0, 0, 0, 0)]
    rows += [(T.ACCEPT, j, 0, 0, 0) for j in others]
    rows += [(T.WORK, 0, 0, 0, r) for r in range(2)]
    rows += [(kind, 0, level, 0, r) for kind in (T.VAULT, T.UNVAULT) for r in range(2)]
    rows += [(T.PROPOSE, j, level, level, r) for r in range(2) for j in others]
    return np.asarray(rows, np.int32)


@functools.lru_cache(maxsize=None)
def compact_table(num_agents: int, num_levels: int, level: int) -> np.ndarray:
    """(N, K) int32: [seat, compact index] -> flat index (host-side numpy, so it is a constant under jit)."""
    index = {tuple(r): i for i, r in enumerate(A.action_table(num_agents, num_levels).tolist())}
    return np.asarray([[index[tuple(r)] for r in compact_rows(s, num_agents, level).tolist()]
                       for s in range(num_agents)], np.int32)


def seat_table(params, seats: tuple) -> jnp.ndarray:
    """(len(seats), K) flat indices of the compact actions of `seats` (a static tuple) under `params`."""
    table = compact_table(params.num_agents, params.num_levels, compact_level(params.amount_grid))
    return jnp.asarray(table[list(seats)])


def to_flat(compact: jnp.ndarray, table: jnp.ndarray) -> jnp.ndarray:
    """Compact indices (L,) of the seats of `table` (L, K) -> flat indices (L,); out of range -> -1 (BAD_INDEX)."""
    k = table.shape[1]
    ok = (compact >= 0) & (compact < k)
    picked = jnp.take_along_axis(table, jnp.clip(compact, 0, k - 1)[:, None], axis=1)[:, 0]
    return jnp.where(ok, picked, -1)


def compact_mask(flat_mask: jnp.ndarray, table: jnp.ndarray) -> jnp.ndarray:
    """(L, n) flat masks of the seats of `table` (L, K) -> (L, K) masks of their compact actions."""
    return jnp.take_along_axis(flat_mask, table, axis=1)
