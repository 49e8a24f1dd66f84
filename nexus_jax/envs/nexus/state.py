"""NexusState: the whole economy as one pytree (N agents, resources indexed [E, C])."""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from nexus_jax.envs.nexus.constants import NPC_MEMORY_SIZE, NUM_OUTCOMES


@struct.dataclass
class Ledger:
    """Public ring buffer of events; slot `(head - 1) % size` is the newest."""

    step: jax.Array  # (K,) int, step the event happened
    kind: jax.Array  # (K,) int EventKind (EMPTY = unused slot)
    actor: jax.Array  # (K,) int
    target: jax.Array  # (K,) int (-1 when none)
    amount_1: jax.Array  # (K,) float (give, or loss for shocks)
    amount_2: jax.Array  # (K,) float (want)
    resource: jax.Array  # (K,) int resource given / hit
    head: jax.Array  # () int, next slot to write
    count: jax.Array  # () int, events ever written


@struct.dataclass
class Proposals:
    """Pairwise table [proposer, target]: at most one pending proposal per ordered pair."""

    active: jax.Array  # (N, N) bool
    give: jax.Array  # (N, N) float, amount of `resource` locked in the proposer's escrow
    want: jax.Array  # (N, N) float, amount of the other resource asked
    resource: jax.Array  # (N, N) int, resource given
    age: jax.Array  # (N, N) int, steps since made (0 on the step it is made)


@struct.dataclass
class Signals:
    """Pairwise table [signaller, target] of open public commitments."""

    active: jax.Array  # (N, N) bool
    give: jax.Array  # (N, N) float, at least this much of `resource` will be offered
    want: jax.Array  # (N, N) float, for at most this much of the other
    resource: jax.Array  # (N, N) int
    age: jax.Array  # (N, N) int
    shock_hit: jax.Array  # (N, N) bool, a shock in the window left the signaller short
    trust_bonus: jax.Array  # (N, N) bool, honoured: next trust gain with target is multiplied
    prepaid: jax.Array  # (N, N) bool, the target paid `want` ahead (`signal_prepay`): honouring delivers at once


@struct.dataclass
class NexusState:
    step: jax.Array  # () int, steps taken this episode
    available: jax.Array  # (N, 2) float, tradable
    escrow: jax.Array  # (N, 2) float, locked in own pending proposals
    vault: jax.Array  # (N, 2) float, shock-proof, not tradable, not counted in utility
    withdrawals: jax.Array  # (N, Q, 2) float, UNVAULTs in flight; slot t % Q arrives at step t
    collateral: jax.Array  # (N,) float
    tax_immunity: jax.Array  # (N,) int, steps left
    last_trade_step: jax.Array  # (N,) int, for isolation decay (reset counts as a trade)
    archetype: jax.Array  # (N,) int
    trust: jax.Array  # (N, N) float, T[i, j] = how much i trusts j
    proposals: Proposals
    signals: Signals
    ledger: Ledger
    shock_kind: jax.Array  # () int Shock
    shock_remaining: jax.Array  # () int, steps the current shock stays active
    last_error: jax.Array  # (N,) int ErrorCode of each agent's last action
    last_outcome: jax.Array  # (N, NUM_OUTCOMES) bool, what happened to each agent last step
    npc_memory: jax.Array  # (N, N, M) float, per-partner NPC memory (M = NPC_MEMORY_SIZE)
    # (N,) int: seat i plays the NPC behaviour that `params.behaviours` (or an explicit override) gives seat
    # behaviour_seat[i] this episode; the identity unless `params.behaviour_shuffle` deals them at reset
    behaviour_seat: jax.Array


def empty_ledger(size: int) -> Ledger:
    """A ring of `size` empty slots."""
    zi, zf = jnp.zeros(size, jnp.int32), jnp.zeros(size, jnp.float32)
    return Ledger(step=zi, kind=zi, actor=zi, target=zi - 1, amount_1=zf, amount_2=zf, resource=zi,
                  head=jnp.int32(0), count=jnp.int32(0))


def initial_state(params, jitter: jnp.ndarray, behaviour_seat: jnp.ndarray | None = None) -> NexusState:
    """The state at step 0, given the reset noise (`behaviour_seat` (N,): identity if None)."""
    n = params.num_agents
    arch = params.archetypes
    zf, zi, zb = jnp.zeros((n, n)), jnp.zeros((n, n), jnp.int32), jnp.zeros((n, n), bool)
    return NexusState(
        step=jnp.int32(0),
        available=params.endowment[arch] * (1.0 + params.endowment_jitter * jitter),
        escrow=jnp.zeros((n, 2)),
        vault=jnp.zeros((n, 2)),
        withdrawals=jnp.zeros((n, params.vault_queue_len, 2)),
        collateral=jnp.full((n,), params.initial_collateral, jnp.float32),
        tax_immunity=jnp.zeros(n, jnp.int32),
        last_trade_step=jnp.zeros(n, jnp.int32),
        archetype=arch,
        trust=jnp.full((n, n), params.initial_trust, jnp.float32),
        proposals=Proposals(active=zb, give=zf, want=zf, resource=zi, age=zi),
        signals=Signals(active=zb, give=zf, want=zf, resource=zi, age=zi, shock_hit=zb, trust_bonus=zb, prepaid=zb),
        ledger=empty_ledger(params.ledger_size),
        shock_kind=jnp.int32(0),
        shock_remaining=jnp.int32(0),
        last_error=jnp.zeros(n, jnp.int32),
        last_outcome=jnp.zeros((n, NUM_OUTCOMES), bool),
        npc_memory=jnp.zeros((n, n, NPC_MEMORY_SIZE)),
        behaviour_seat=jnp.arange(n, dtype=jnp.int32) if behaviour_seat is None else behaviour_seat,
    )
