"""NexusParams: every number of the Nexus rules, one field each, with its origin.

Static fields (`pytree_node=False`) give shapes; every other field is a traced leaf, so a
sweep can `jax.vmap` over params with one compilation. Build params with
`NexusParams.create(**overrides)`, which validates concrete values and names the bad field.
"""
from __future__ import annotations

from typing import Any

import jax.numpy as jnp
from flax import struct

from nexus_jax.envs.nexus.param_fields import REWARD_MODES, build_params, default_archetypes  # noqa: F401

# Origins: [seed] the Protocol: Nexus write-up, [spec] SPEC.md, [ours] our decision (docs/design.md).
_DEFAULT_ENDOWMENT = (  # (E, C) per archetype [spec]; RECIPROCATOR and CHEATER are [ours]
    (50.0, 50.0),  # LEARNER
    (90.0, 10.0),  # BULLY
    (10.0, 90.0),  # ALTRUIST
    (40.0, 60.0),  # TIT_FOR_TAT
    (50.0, 50.0),  # RECIPROCATOR
    (60.0, 40.0),  # CHEATER
)
_DEFAULT_INCOME = (  # per-step (E, C) production [spec]: 2.0 of the rich resource, 1.0 each when balanced
    (1.0, 1.0),
    (2.0, 0.0),
    (0.0, 2.0),
    (1.0, 1.0),
    (1.0, 1.0),
    (2.0, 0.0),
)
def static_field(default: Any):
    return struct.field(pytree_node=False, default=default)


@struct.dataclass
class NexusParams:
    # ---- static: shapes -----------------------------------------------------------------
    num_agents: int = static_field(4)  # N seats [spec], 2..64
    amount_grid: tuple = static_field((0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 40.0))  # amount levels [spec]
    ledger_size: int = static_field(32)  # public ledger ring length [spec]
    obs_ledger_events: int = static_field(8)  # last K ledger events in each observation [ours]
    vault_queue_len: int = static_field(8)  # slots of the withdrawal pipeline; vault_delay < this [ours]

    # ---- seats and endowments -------------------------------------------------------------
    archetypes: Any = None  # (N,) int archetype id per seat [spec]; None -> default_archetypes
    behaviours: Any = None  # (N,) archetype whose NPC policy and signal intentions drive each NPC seat; None -> archetypes [ours]
    # (N,) 0/1: the NPC behaviours of the seats marked 1 are dealt among them at random at every reset (hidden types:
    # which partner is the CHEATER is not known from its seat); None -> all 0, every seat plays its `behaviours` [ours, issue 19]
    behaviour_shuffle: Any = None
    endowment: Any = _DEFAULT_ENDOWMENT  # (A, 2) starting (E, C) per archetype [spec]
    endowment_jitter: Any = 0.10  # uniform +-fraction per reset [spec]
    initial_collateral: Any = 20.0  # trust deposit at reset [spec]
    initial_trust: Any = 0.5  # T[i, j] at reset [spec]

    # ---- economy --------------------------------------------------------------------------
    upkeep: Any = (1.0, 1.0)  # (E, C) consumed per step [spec]
    income: Any = _DEFAULT_INCOME  # (A, 2) produced per step per archetype [spec]
    isolation_window: Any = 10  # steps without a trade before decay [spec]
    isolation_decay: Any = 0.01  # fraction of available lost per isolated step [spec]

    # ---- actions ------------------------------------------------------------------------
    wait_cost: Any = 0.5  # collateral per WAIT unless tax-immune [seed]
    # Share of wait_cost each valid action type pays (order WAIT, PROPOSE, ACCEPT, REJECT, WORK, VAULT,
    # UNVAULT, SIGNAL; invalid actions pay as WAIT). The patience rule [seed intent, ours]: passive holding
    # pays, so VAULT/UNVAULT (shuffling one's own resources) pay like WAIT; WORK's immunity lifts it.
    # (1, 0, 0, 0, 0, 0, 0, 0) is the pre-issue-19 rule (only WAIT pays).
    wait_cost_types: Any = (1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0)
    proposal_deposit: Any = 1.0  # collateral locked per proposal [seed]
    proposal_ttl: Any = 3  # steps a proposal can be accepted [seed]
    reject_penalty: Any = 0.1  # collateral kept from a rejected proposer's deposit [spec]
    trade_collateral_bonus: Any = 0.2  # collateral per unit volume weight to both traders [seed]
    base_limit: Any = 20.0  # credit limit (give + want) at reputation 0 [ours]
    limit_per_rep: Any = 60.0  # extra credit per unit reputation [ours]
    work_cost: Any = 5.0  # WORK spends this much [seed]
    work_gain: Any = 2.0  # ... and gains this much of the other resource [seed]
    work_immunity: Any = 5  # steps of tax immunity WORK grants [seed]
    vault_delay: Any = 3  # steps before an UNVAULT arrives [spec]
    signal_window: Any = 5  # steps to honour a SIGNAL [spec]
    signal_honour_bonus: Any = 0.5  # collateral for an honoured SIGNAL [ours]
    signal_trust_multiplier: Any = 1.5  # next trust gain with the target after honouring [spec]
    signal_break_penalty: Any = 2.0  # collateral lost for a broken SIGNAL [seed]

    # ---- trust --------------------------------------------------------------------------
    trust_alpha: Any = 0.2  # trade trust rate [spec]
    trust_volume_cap: Any = 100.0  # volume at which the trade weight saturates [spec]
    reject_trust_step: Any = 0.02  # rejecter's trust in proposer moves toward 0 [spec]
    betrayal_multiplier: Any = 1.5  # broken SIGNAL: target's trust drops at this x alpha [spec]
    public_betrayal_rate: Any = 0.05  # broken SIGNAL: everyone's trust in the signaller [spec]
    trust_decay: Any = 0.01  # drift toward 0.5 for pairs that did not interact [spec]

    # ---- shocks -------------------------------------------------------------------------
    p_solar_flare: Any = 0.05  # per step with no active shock [spec]
    p_grid_failure: Any = 0.10  # per step with no active shock [spec]
    shock_duration: Any = 1  # steps a shock stays active [spec]
    shock_severity: Any = 0.20  # base share of liquid holding lost [spec]
    shock_progressive: Any = 0.5  # extra share per unit of holding above the mean [spec]
    shock_max_fraction: Any = 0.5  # cap on the share lost [spec]
    shock_storm_factor: Any = 1.0  # start-probability multiplier right after a shock (>1: correlated runs) [ours]

    # ---- reward -------------------------------------------------------------------------
    w_utility: Any = 0.7  # w1 [seed]
    w_collateral: Any = 0.2  # w2 [seed]
    w_resilience: Any = 0.1  # w3 [seed]
    resilience_threshold: Any = 5.0  # U_i above this during a shock earns resilience [seed]
    invalid_penalty: Any = 1.0  # per invalid action [spec]
    reward_mode: Any = 0  # 0 "system": dU of all agents; 1 "own": dU_i (selfish baseline) [spec]
    # Opt-in reward timing for discounted learners (reward.py; 0 = SPEC's per-step reward) [ours, issue 16]:
    # weight of a potential-based term that counts vault + withdrawals in flight as liquid in each step's
    # dU and takes whatever is still held there back on the episode's last step. Every episode's return is
    # unchanged; only when the hedge's cost and payback are paid moves (docs/ecosystem.md).
    vault_shaping: Any = 0.0
    vault_shaping_ramp: Any = 0  # steps over which that term's count of the vault falls to 0 before the end (0: at the end) [ours]

    # ---- NPC archetypes (npc/): one row per Archetype, order LEARNER, BULLY, ALTRUIST, TIT_FOR_TAT,
    # RECIPROCATOR, CHEATER. The LEARNER row drives a LEARNER-archetype seat only when it is not a
    # learner seat (a fair, trust-aware default). Origins: [spec] SPEC.md 3 "NPCs", else [ours].
    npc_accept_min_give: Any = (0.0, 30.0, 0.0, 0.0, 0.0, 0.0)  # accept only offers giving >= this [spec: BULLY ~30]
    npc_accept_jitter: Any = (0.0, 5.0, 0.0, 0.0, 0.0, 0.0)  # +- uniform jitter on that threshold per step [spec]
    npc_accept_min_ratio: Any = (0.8, 1.0, 0.8, 0.8, 0.8, 1.0)  # min give/want of an acceptable offer (after relationship terms) [ours]
    npc_accept_when_low: Any = (0.0, 0.0, 1.0, 0.0, 0.0, 0.0)  # 1: accept any offer of a resource it is low on [spec: ALTRUIST]
    npc_offer_size: Any = (10.0, 5.0, 10.0, 10.0, 10.0, 10.0)  # amount given in its own proposals [ours]
    npc_offer_ratio: Any = (1.0, 0.25, 1.0, 1.0, 1.0, 1.0)  # give/want of its proposals (<1 lowballs) [spec: BULLY lowballs]
    npc_propose_rate: Any = (0.5, 0.7, 0.5, 0.5, 0.5, 0.5)  # chance per step to propose when nothing better to do [ours]
    npc_signal_rate: Any = (0.1, 0.0, 0.1, 0.1, 0.1, 0.5)  # chance per step to SIGNAL [spec: BULLY never, CHEATER often]
    npc_signal_generosity: Any = (1.0, 1.0, 1.0, 1.0, 1.0, 2.0)  # signalled give = offer_size x this [spec: CHEATER generous]
    npc_break_rate: Any = (0.0, 0.0, 0.0, 0.0, 0.0, 0.5)  # share of its signals it means to break [spec: CHEATER]
    npc_signal_cap: Any = (0.5, 0.5, 0.5, 0.5, 0.5, 0.5)  # a signal promises at most this share of its rich resource [ours]
    npc_honour_delay: Any = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)  # honour a kept signal only once it is older than this [ours]
    npc_reject_rate: Any = (0.5, 0.8, 0.0, 1.0, 0.5, 0.3)  # chance to REJECT an unacceptable offer (else let it expire) [ours]
    npc_trust_weight: Any = (1.0, 0.0, 2.0, 0.0, 1.0, 0.0)  # partner choice by T[i, j] [spec: ALTRUIST trusts most]
    npc_mirror: Any = (0.0, 0.0, 0.0, 1.0, 0.0, 0.0)  # weight of the partner's last behaviour toward it [spec: TIT_FOR_TAT]
    npc_cheat_sensitivity: Any = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)  # weight of the partner's cheater score [spec: RECIPROCATOR]
    npc_fm_discount: Any = (0.1, 1.0, 1.0, 1.0, 0.1, 1.0)  # a force-majeure break counts this x a malicious one [spec: RECIPROCATOR]
    npc_need_weight: Any = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)  # partner choice by how much of my short resource it holds [spec: RECIPROCATOR]
    npc_bond_weight: Any = (0.5, 0.0, 0.0, 0.0, 0.5, 0.0)  # partner choice by past trades (relationship quality) [spec: RECIPROCATOR]
    npc_noise: Any = (0.3, 0.5, 0.1, 0.5, 0.3, 0.5)  # Gumbel temperature of partner choice [ours]
    npc_low_level: Any = 20.0  # an NPC is "low" on a resource below this available amount [ours]
    npc_memory_decay: Any = 0.95  # per-step decay of cheater evidence and bonds in NPC memory [ours]
    npc_slight_weight: Any = 0.3  # cheater score per reject of / lowball to the NPC [spec: rejects, lowballs]
    npc_public_weight: Any = 0.3  # cheater score per break toward someone else (public ledger) [ours]
    npc_lowball_ratio: Any = 0.5  # an offer with give/want below this is a lowball [ours]
    npc_cheat_tolerance: Any = 0.5  # no proposals or signals to partners whose weighted score exceeds this [ours]

    # ---- episode ------------------------------------------------------------------------
    max_steps: Any = 100  # episode length [spec]
    early_end_after: Any = 50  # stochastic end possible from this step [seed]
    early_end_prob: Any = 0.0  # per-step end probability after early_end_after (seed: 0.05) [spec]
    obs_scale: Any = 100.0  # resources are divided by this in observations [ours]

    @property
    def num_levels(self) -> int:
        return len(self.amount_grid)

    @classmethod
    def create(cls, **overrides: Any) -> "NexusParams":
        """Validated params: an unknown field or a bad value raises ValueError/TypeError naming the field,
        the value and what was expected (param_fields.py)."""
        return build_params(cls, overrides)

    def grid(self) -> jnp.ndarray:
        return jnp.asarray(self.amount_grid, jnp.float32)

