"""Trust ("social lattice") arithmetic shared by every phase.

Every move is multiplicative: toward 1 scales (1 - T), toward 0 scales T, so T stays in
[0, 1] by construction and moves of one kind commute within a step.
"""
import jax.numpy as jnp

from nexus_jax.envs.nexus.arith import small_sum


def reputation(trust: jnp.ndarray) -> jnp.ndarray:
    """Reputation_j = mean over i != j of T[i, j]."""
    n = trust.shape[-1]
    diagonal = small_sum(jnp.where(jnp.eye(n, dtype=bool), trust, 0.0), -1)  # one term per row: exact, no gather
    return (small_sum(trust, -2) - diagonal) / (n - 1)


def volume_weight(volume: jnp.ndarray, params) -> jnp.ndarray:
    """log1p(clip(volume, 1, cap)) / log1p(cap): the trade-size weight of trust and collateral gains."""
    cap = params.trust_volume_cap
    return jnp.log1p(jnp.clip(volume, 1.0, cap)) / jnp.log1p(cap)


def toward_one(trust, rate):
    return 1.0 - (1.0 - trust) * (1.0 - rate)


def toward_zero(trust, rate):
    return trust * (1.0 - rate)


def credit_limit(rep: jnp.ndarray, params) -> jnp.ndarray:
    """Largest proposal volume (give + want) an agent of this reputation may offer."""
    return params.base_limit + params.limit_per_rep * rep
