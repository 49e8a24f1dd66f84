"""NPC memory: what each seat remembers about each partner, updated after every step.

`state.npc_memory[i, j, slot]` is seat i's memory of partner j. Evidence comes from the step's
public events (`info["stats"]`: the same events the ledger records, as dense [actor, target]
tables, so none are lost when the ring overflows) and from the new proposals' terms.
"""
from __future__ import annotations

from enum import IntEnum

import jax.numpy as jnp

from nexus_jax.envs.nexus import noise
from nexus_jax.envs.nexus.arith import flags_t
from nexus_jax.envs.nexus.npc.archetypes import behaviour_ids, traits


class Slot(IntEnum):
    MALICIOUS = 0  # decayed count of j's BROKEN signals (to me: 1 each; to others: npc_public_weight)
    FORCE_MAJEURE = 1  # the same for j's FORCE_MAJEURE breaks (kept apart: archetypes weigh them differently)
    SLIGHT = 2  # decayed count of j rejecting my proposals or lowballing me
    LAST = 3  # j's last behaviour toward me: +1 cooperated, -1 defected, 0 nothing yet
    INTENT = 4  # my pending intention for my open signal to j: +1 honour, -1 break, 0 no open signal
    BOND = 5  # decayed count of trades with j (relationship quality)


def cheater_score(memory: jnp.ndarray, fm_discount: jnp.ndarray, params) -> jnp.ndarray:
    """(N, N) how much seat i suspects partner j: malicious breaks + discounted force-majeure ones + slights."""
    return (memory[..., Slot.MALICIOUS] + fm_discount[:, None] * memory[..., Slot.FORCE_MAJEURE]
            + params.npc_slight_weight * memory[..., Slot.SLIGHT])


def update_npc_memory(prev_state, state, info, params, key=None, behaviour=None) -> jnp.ndarray:
    """The memory after a step (prev_state -> state with core.step's `info`). O(N^2), pure.

    `key` draws each new signal's intention (break with the signaller's `npc_break_rate`);
    without a key every new signal is meant to be honoured.
    """
    n = params.num_agents
    st = info["stats"]
    mem = prev_state.npc_memory
    off = ~jnp.eye(n, dtype=bool)
    decay = params.npc_memory_decay

    broken = st["signals_broken"]  # [signaller, target]
    fm = st["broken_force_majeure"] & broken
    mal = broken & ~fm
    pub = params.npc_public_weight

    def evidence(ev):  # bool [j, i] events by j -> [i, j] memory of i: direct (to me) + public (to others)
        to_others = ev.sum(1)[None, :] - flags_t(ev)  # counted as integers: exact, and no float reduction
        return jnp.where(off, flags_t(ev) + pub * to_others.astype(jnp.float32), 0.0)

    p = state.proposals
    new_p = st["proposals"]  # [proposer, target]
    lowball = new_p & (p.give < params.npc_lowball_ratio * p.want)
    fair = new_p & ~lowball
    rejected_me = st["rejects"]  # [proposer i, rejecter j]: j rejected my proposal
    traded = st["trades"] | flags_t(st["trades"])
    honoured_me = flags_t(st["signals_honoured"])  # [target i, signaller j]

    defect = flags_t(broken) | rejected_me | flags_t(lowball)
    coop = traded | honoured_me | flags_t(fair)
    last = jnp.where(defect, -1.0, jnp.where(coop, 1.0, mem[..., Slot.LAST]))

    made = st["signals_made"]  # [i, j]: my new signal to j
    if key is None:
        plan = jnp.ones((n, n))
    else:
        rate = traits(params, behaviour_ids(state, behaviour)).break_rate
        plan = jnp.where(noise.uniform(key, (n, n)) < rate[:, None], -1.0, 1.0)
    intent = jnp.where(made, plan, jnp.where(state.signals.active, mem[..., Slot.INTENT], 0.0))

    new = jnp.stack([
        decay * mem[..., Slot.MALICIOUS] + evidence(mal),
        decay * mem[..., Slot.FORCE_MAJEURE] + evidence(fm),
        decay * mem[..., Slot.SLIGHT] + rejected_me + flags_t(lowball),
        last,
        intent,
        decay * mem[..., Slot.BOND] + traded,
    ], -1)
    return jnp.where(off[..., None], new, 0.0).astype(mem.dtype)
