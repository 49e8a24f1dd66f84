"""The env's evaluation surface: what evaluators and trainers need beyond `reset` / `step`.

Every seat's action masks from one state, NPC heuristics playing any seat (the `behaviour`
override), stepping with every seat's actions chosen by the caller, and the vault hedge.
`nexus_jax.envs.nexus` exports these, so `train/` never imports an env module directly and
the env's internals can move without breaking a trainer (tests/test_imports.py checks it).
"""
from __future__ import annotations

import jax.numpy as jnp

from nexus_jax.envs.nexus.dynamics import action_snapshot
from nexus_jax.envs.nexus.validity import flat_mask


def seat_masks(state, params, seats=None) -> jnp.ndarray:
    """(len(seats), n) bool masks over the flat enumeration of `seats` (default every seat), one env.

    `factored_masks(seat_masks(...), params)` gives the per-head masks of the factored view.
    """
    return flat_mask(action_snapshot(state, params), params, seats)


def with_behaviour(params, seats, archetype):
    """`params` whose NPC `behaviours` put `archetype` (traced) in `seats`; their economy (`archetypes`) unchanged.

    Stepping with them makes those seats' NPC memory follow that archetype too (a CHEATER's
    signals are meant to be broken at its break rate), as `npc_actions` with the same
    behaviour would play them.
    """
    return params.replace(behaviours=params.behaviours.at[jnp.asarray(seats)].set(archetype))
