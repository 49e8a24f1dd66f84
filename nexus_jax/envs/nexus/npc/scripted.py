"""Scripted play for any seat, as one table: the NPC archetypes, the hedgers and the seats that never trade.

Each scripted policy is an archetype's NPC policy (its `behaviour`: what drives the seat's actions and the
intentions of its signals) under an overlay:

- PLAIN: the archetype as it is (BULLY, ALTRUIST, TIT_FOR_TAT, RECIPROCATOR, CHEATER);
- HEDGE: the vault hedge (`npc/hedge.py`) over RECIPROCATOR: trade, and keep the holdings in the vault;
- WAIT: WAIT at every step (passive holding);
- HOARD: VAULT the most it holds of each resource at the start, UNVAULT it before the end, WAIT otherwise;
- AUTARKY: WORK its rich resource into the poor one when short (the NPCs' WORK rule), WAIT otherwise.

The last three never trade: they are what "passive holding costs" is measured against (`train.screen`).
The promise pair (`PROMISES`) is the dilemma of a promise: the LEARNER row signalling generously
(`PROMISE_ROW`: half its steps, four times its offer, up to 80% of its rich resource) and keeping every
promise (PROMISER) or none (BREAKER); its params change the LEARNER row, so it plays a LEARNER seat
(`scripted_params` sets them, and the env must step with those params: the signal intentions are drawn
from them).

Policies are selected by a traced index (`scripted_params`, `scripted_actions`), so one compiled
evaluator serves them all (`train.evaluate`, `train.screen`); `spec_heuristics` gives each baseline in
`EnvSpec`'s every-seat signature (`env.spec.heuristics`).
"""
from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

import jax.numpy as jnp

from nexus_jax.envs.nexus.constants import ActionType, Archetype
from nexus_jax.envs.nexus.npc.archetypes import NPC_ARCHETYPES
from nexus_jax.envs.nexus.npc.hedge import hedge_actions
from nexus_jax.envs.nexus.npc.policy import npc_actions


class Overlay(IntEnum):
    PLAIN = 0
    HEDGE = 1
    WAIT = 2
    HOARD = 3
    AUTARKY = 4


class Scripted(NamedTuple):
    name: str  # lower case, as `env.spec.heuristics` names them
    behaviour: int  # the archetype row that drives the seat
    overlay: int  # Overlay
    trades: bool  # it proposes or accepts trades (False: a passive-holding baseline)
    break_rate: float = -1.0  # >= 0: a promise policy, the LEARNER row with PROMISE_ROW and this break rate


_R = int(Archetype.RECIPROCATOR)
BASELINES = tuple(Scripted(Archetype(a).name.lower(), int(a), Overlay.PLAIN, True) for a in NPC_ARCHETYPES) + (
    Scripted("hedge", _R, Overlay.HEDGE, True),
    Scripted("wait", _R, Overlay.WAIT, False),
    Scripted("hoard", _R, Overlay.HOARD, False),
    Scripted("autarky", _R, Overlay.AUTARKY, False),
)
PROMISES = (Scripted("promiser", int(Archetype.LEARNER), Overlay.PLAIN, True, 0.0),
            Scripted("breaker", int(Archetype.LEARNER), Overlay.PLAIN, True, 1.0))
SCRIPTED = BASELINES + PROMISES  # the index order of `scripted_params` / `scripted_actions`
# The promise pair's LEARNER row: signal at half its steps, promising 4x its offer, up to 80% of its rich resource.
PROMISE_ROW = {"npc_signal_rate": 0.5, "npc_signal_generosity": 4.0, "npc_signal_cap": 0.8}


def scripted_index(name: str) -> int:
    """The index of the scripted policy `name` (a ValueError naming the known ones otherwise)."""
    names = [s.name for s in SCRIPTED]
    if name not in names:
        raise ValueError(f"unknown scripted policy {name!r}; known: {names}")
    return names.index(name)


def _column(field: str):
    return jnp.asarray([getattr(s, field) for s in SCRIPTED])


def scripted_params(params, seats, index):
    """`params` with the scripted policy `index` (traced) driving `seats`: their NPC `behaviours` (the policy's
    archetype; the seats keep their economy) and, for a promise policy, the LEARNER row's PROMISE_ROW and
    break rate. Step the env with these params: the seats' signal intentions are drawn from them."""
    seats = jnp.asarray(seats)
    params = params.replace(behaviours=params.behaviours.at[seats].set(_column("behaviour")[index]))
    brk = _column("break_rate")[index]
    promise = brk >= 0
    learner = int(Archetype.LEARNER)
    rows = dict(PROMISE_ROW, npc_break_rate=brk)
    return params.replace(**{f: getattr(params, f).at[learner].set(jnp.where(promise, v, getattr(params, f)[learner]))
                             for f, v in rows.items()})


def _unvault_step(params):
    """The hedge's UNVAULT step: the last whose withdrawal arrives 3 steps before the end (traced)."""
    return params.max_steps - params.vault_delay - 3


def _autarky(state, params, seats):
    """WORK the rich resource when the poor one is below half `npc_low_level` (the NPCs' rule), else WAIT."""
    avail = state.available[seats]  # (A, 2)
    rich = jnp.argmax(avail, 1)
    poor_amount = jnp.min(avail, 1)
    rich_amount = jnp.max(avail, 1)
    work = (poor_amount < 0.5 * params.npc_low_level) & (rich_amount >= jnp.maximum(params.work_cost, params.npc_low_level))
    zero = jnp.zeros_like(rich)
    return jnp.stack([jnp.where(work, int(ActionType.WORK), int(ActionType.WAIT)), zero, zero, zero,
                      jnp.where(work, rich, 0)], -1).astype(jnp.int32)


def scripted_actions(index, key, state, params, seats) -> jnp.ndarray:
    """(A, 5) structured actions of `seats` (one env) under the scripted policy `index` (traced); `params` as
    `scripted_params` gives them."""
    seats = jnp.asarray(seats)
    overlay = _column("overlay")[index]
    plain = npc_actions(key, state, params, params.behaviours)[seats]
    passive = jnp.where(overlay == Overlay.AUTARKY, _autarky(state, params, seats), 0)
    base = jnp.where((overlay == Overlay.PLAIN) | (overlay == Overlay.HEDGE), plain, passive)
    vault = (overlay == Overlay.HEDGE) | (overlay == Overlay.HOARD)
    return hedge_actions(base, state, params, seats, jnp.full(seats.shape, vault), _unvault_step(params),
                         unvault=vault)


def spec_heuristic(name: str):
    """The scripted policy `name` in every seat, in `EnvSpec`'s heuristic signature `(key, state, params) -> (N, 5)`."""
    index = scripted_index(name)

    def heuristic(key, state, params):
        seats = jnp.arange(params.num_agents)
        return scripted_actions(index, key, state, scripted_params(params, seats, index), seats)

    heuristic.__doc__ = f"Every seat plays the scripted policy {name!r} (`npc.scripted`)."
    return heuristic
