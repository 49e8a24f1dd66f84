"""Archetypes as parameter vectors: each NPC seat reads its row of the per-archetype tables in params.

No Python branch per archetype: `traits(params, behaviour)` gathers every table at the seats'
behaviour ids, and the policy is one formula over those numbers. Changing an archetype, or
inventing a new mix, is a params change (traced: a sweep over it compiles once).
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from nexus_jax.envs.nexus.arith import pick

from nexus_jax.envs.nexus.constants import Archetype

# SPEC's five NPC archetypes (LEARNER seats may also be NPC-driven: they use the LEARNER row).
NPC_ARCHETYPES = (Archetype.BULLY, Archetype.ALTRUIST, Archetype.TIT_FOR_TAT, Archetype.RECIPROCATOR,
                  Archetype.CHEATER)


class Traits(NamedTuple):
    """(N,) per-seat values of every `npc_*` table (see NexusParams for meaning and origin)."""

    accept_min_give: jnp.ndarray
    accept_jitter: jnp.ndarray
    accept_min_ratio: jnp.ndarray
    accept_when_low: jnp.ndarray
    offer_size: jnp.ndarray
    offer_ratio: jnp.ndarray
    propose_rate: jnp.ndarray
    signal_rate: jnp.ndarray
    signal_generosity: jnp.ndarray
    break_rate: jnp.ndarray
    signal_cap: jnp.ndarray
    honour_delay: jnp.ndarray
    min_trust: jnp.ndarray
    trust_volume: jnp.ndarray
    reject_rate: jnp.ndarray
    trust_weight: jnp.ndarray
    mirror: jnp.ndarray
    cheat_sensitivity: jnp.ndarray
    fm_discount: jnp.ndarray
    need_weight: jnp.ndarray
    bond_weight: jnp.ndarray
    noise: jnp.ndarray


def behaviour_ids(state, behaviour=None) -> jnp.ndarray:
    """(N,) archetype row driving each seat: the seat's archetype unless `behaviour` overrides it.

    The override lets a seat keep one archetype's economy (endowment, income) while playing
    another's policy (the tournament puts every policy in the LEARNER seat this way). Seat i plays
    the entry of seat `state.behaviour_seat[i]` (the identity unless `params.behaviour_shuffle`
    dealt the behaviours at reset: hidden types).
    """
    ids = state.archetype if behaviour is None else jnp.asarray(behaviour, jnp.int32)
    return pick(ids, state.behaviour_seat)  # ids[behaviour_seat] as selects (a batched gather: 4% of env.step)


def traits(params, ids: jnp.ndarray) -> Traits:
    """Each table at the seats' behaviour ids, as `arith.pick` select chains (under `vmap` a batched
    gather is a scalar loop on XLA:CPU)."""
    ids = jnp.clip(ids, 0, len(Archetype) - 1)
    return Traits(*(pick(jnp.asarray(getattr(params, "npc_" + f)), ids) for f in Traits._fields))
