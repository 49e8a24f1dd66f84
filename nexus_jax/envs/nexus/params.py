"""NexusParams: every number of the Nexus rules, one field each, with its origin.

Static fields (`pytree_node=False`) give shapes; every other field is a traced leaf, so a
sweep can `jax.vmap` over params with one compilation. Build params with
`NexusParams.create(**overrides)`, which validates concrete values and names the bad field.

Each field is `param(default, origin, doc)` (`nexus_jax.base.fields`): its one-line meaning and
its origin, "seed" (the Protocol: Nexus write-up), "spec" (SPEC.md) or "ours" (our decision,
docs/design.md), kept as metadata the documentation's params table is generated from; the
accepted values are `param_fields.field_spec(name)`.
"""
from __future__ import annotations

from typing import Any

import jax.numpy as jnp
from flax import struct

from nexus_jax.base.fields import param
from nexus_jax.envs.nexus.param_fields import REWARD_MODES, build_params, default_archetypes  # noqa: F401

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


@struct.dataclass
class NexusParams:
    # ---- static: shapes -----------------------------------------------------------------
    num_agents: int = param(4, "spec", "N, the number of seats", static=True)
    amount_grid: tuple = param((0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 40.0), "spec",
                               "the L amount levels an action's amounts index; sizes the action space", static=True)
    ledger_size: int = param(32, "spec", "length of the public ledger ring", static=True)
    obs_ledger_events: int = param(8, "ours", "K, the newest ledger events in each observation", static=True)
    vault_queue_len: int = param(8, "ours", "slots of the vault withdrawal pipeline (vault_delay < this)", static=True)

    # ---- seats and endowments -------------------------------------------------------------
    archetypes: Any = param(None, "spec", "archetype id per seat (None: LEARNER, then BULLY, ALTRUIST, TIT_FOR_TAT "
                                          "repeating)")
    behaviours: Any = param(None, "ours", "archetype whose NPC policy and signal intentions drive each NPC seat "
                                          "(None: its archetype)")
    # Hidden types: the NPC behaviours of the seats marked 1 are dealt among them at random at every reset, so
    # which partner is the CHEATER is not known from its seat.
    behaviour_shuffle: Any = param(None, "ours", "1 for the seats whose NPC behaviours are dealt at random per reset "
                                                 "(None: all 0)")
    endowment: Any = param(_DEFAULT_ENDOWMENT, "spec", "starting (E, C) per archetype (RECIPROCATOR and CHEATER "
                                                       "rows: ours)")
    endowment_jitter: Any = param(0.10, "spec", "uniform +- fraction of the endowment drawn at each reset")
    initial_collateral: Any = param(20.0, "spec", "trust deposit (collateral) at reset")
    initial_trust: Any = param(0.5, "spec", "every T[i, j] at reset")

    # ---- economy --------------------------------------------------------------------------
    upkeep: Any = param((1.0, 1.0), "spec", "(E, C) every seat consumes per step")
    income: Any = param(_DEFAULT_INCOME, "spec", "(E, C) produced per step, per archetype")
    isolation_window: Any = param(10, "spec", "steps without a trade before isolation decay starts")
    isolation_decay: Any = param(0.01, "spec", "fraction of available lost per isolated step")

    # ---- actions ------------------------------------------------------------------------
    wait_cost: Any = param(0.5, "seed", "collateral a WAIT costs unless tax-immune")
    # The patience rule (the seed's intent): passive holding pays, so VAULT/UNVAULT (shuffling one's own
    # resources) pay like WAIT; WORK's immunity lifts it. (1, 0, 0, 0, 0, 0, 0, 0): only WAIT pays.
    wait_cost_types: Any = param((1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0), "ours",
                                 "share of wait_cost each valid action type pays, in ActionType order "
                                 "(invalid actions pay as WAIT)")
    proposal_deposit: Any = param(1.0, "seed", "collateral locked per open proposal")
    proposal_ttl: Any = param(3, "seed", "steps a proposal can be accepted")
    reject_penalty: Any = param(0.1, "spec", "collateral kept from a rejected proposer's deposit")
    trade_collateral_bonus: Any = param(0.2, "seed", "collateral per unit of volume weight paid to both traders")
    base_limit: Any = param(20.0, "ours", "credit limit (give + want) at reputation 0")
    limit_per_rep: Any = param(60.0, "ours", "extra credit limit per unit of reputation")
    work_cost: Any = param(5.0, "seed", "WORK spends this much of a resource ...")
    work_gain: Any = param(2.0, "seed", "... and gains this much of the other")
    work_immunity: Any = param(5, "seed", "steps of tax immunity WORK grants")
    vault_delay: Any = param(3, "spec", "steps before an UNVAULT arrives")
    signal_window: Any = param(5, "spec", "steps to honour a SIGNAL")
    signal_honour_bonus: Any = param(0.5, "ours", "collateral for an honoured SIGNAL")
    signal_trust_multiplier: Any = param(1.5, "spec", "multiplier of the next trust gain with the target after "
                                                      "an honoured SIGNAL")
    signal_break_penalty: Any = param(2.0, "seed", "collateral lost for a broken SIGNAL")
    # Reliance (opt-in): a promise the promisee acts on, so being cheated costs the one who relied, not only the
    # breaker (docs/design.md, "Reliance on a SIGNAL").
    # Static: off, the step is the program it was before the rule existed (bit for bit and as fast); a sweep cannot
    # batch it.
    signal_prepay: int = param(0, "ours", "1: an ACCEPT naming a partner with no live proposal to me but an open "
                                          "SIGNAL to me pays that signal's want now; the honouring PROPOSE then "
                                          "delivers at once, and a broken signal keeps the payment (0: off; static)",
                               static=True)

    # ---- trust --------------------------------------------------------------------------
    trust_alpha: Any = param(0.2, "spec", "rate at which a trade moves both parties' trust toward 1")
    trust_volume_cap: Any = param(100.0, "spec", "trade volume at which the trade's trust weight saturates")
    reject_trust_step: Any = param(0.02, "spec", "rate at which a REJECT moves the rejecter's trust in the proposer "
                                                 "toward 0")
    betrayal_multiplier: Any = param(1.5, "spec", "broken SIGNAL: the target's trust falls at this x trust_alpha")
    public_betrayal_rate: Any = param(0.05, "spec", "broken SIGNAL: rate at which everyone's trust in the signaller "
                                                    "falls")
    trust_decay: Any = param(0.01, "spec", "per-step drift toward 0.5 of pairs that did not interact")
    # "Good trades increase trust" (the write-up): the acceptor of a trade that gave it less than this share of
    # what it paid loses trust in the proposer instead of gaining it (0: every trade raises both, SPEC).
    trust_fair_ratio: Any = param(0.0, "ours", "least received/paid of a trade that raises the acceptor's trust in "
                                               "the proposer (below it the trust falls; 0: every trade is fair)")

    # ---- shocks -------------------------------------------------------------------------
    p_solar_flare: Any = param(0.05, "spec", "chance per step (no shock active) of a SOLAR_FLARE (hits Energy)")
    p_grid_failure: Any = param(0.10, "spec", "chance per step (no shock active) of a GRID_FAILURE (hits Compute)")
    shock_duration: Any = param(1, "spec", "steps a shock stays active")
    shock_severity: Any = param(0.20, "spec", "base share of the liquid holding a shock takes")
    shock_progressive: Any = param(0.5, "spec", "extra share per unit of holding above the mean")
    shock_max_fraction: Any = param(0.5, "spec", "cap on the share a shock takes")
    shock_reach: Any = param(1.0, "ours", "chance that a starting shock hits each seat (1: every seat, SPEC; < 1: "
                                          "local shocks, which partners can help through)")
    shock_storm_factor: Any = param(1.0, "ours", "start-probability multiplier right after a shock "
                                                 "(> 1: correlated runs)")

    # ---- reward -------------------------------------------------------------------------
    w_utility: Any = param(0.7, "seed", "w1, the weight of the utility change dU")
    w_collateral: Any = param(0.2, "seed", "w2, the weight of the seat's collateral change")
    w_resilience: Any = param(0.1, "seed", "w3, the weight of shock resilience")
    resilience_threshold: Any = param(5.0, "seed", "utility above which a seat earns resilience during a shock")
    invalid_penalty: Any = param(1.0, "spec", "reward lost per invalid action")
    reward_mode: Any = param(0, "spec", "0 'system': dU of every seat; 1 'own': dU_i (the selfish baseline)")
    # What the utility term pays each step: its change (SPEC: the return telescopes to the final utility, so
    # holding back now is paid back at the end) or its level, utility as a flow (each step pays U / max_steps, so
    # the return is the episode's mean utility and what is idle in the vault costs utility at every step held).
    reward_utility: Any = param(0, "ours", "0 'change': dU per step (SPEC); 1 'level': U / max_steps per step "
                                           "(utility as a flow)")
    # Opt-in reward timing for discounted learners (reward.py; 0 = SPEC's per-step reward): a potential-based term
    # that counts vault + withdrawals in flight as liquid in each step's dU and takes whatever is still held there
    # back on the episode's last step. Every episode's return is unchanged; only when the hedge's cost and payback
    # are paid moves (experiments/ecosystem/README.md).
    vault_shaping: Any = param(0.0, "ours", "weight of the return-preserving vault term in dU (0: off)")
    vault_shaping_ramp: Any = param(0, "ours", "steps over which that term's count of the vault falls to 0 before "
                                               "the end (0: at the end)")

    # ---- NPC archetypes (npc/): one row per Archetype, order LEARNER, BULLY, ALTRUIST, TIT_FOR_TAT,
    # RECIPROCATOR, CHEATER. The LEARNER row drives a LEARNER-archetype seat only when it is not a
    # learner seat (a fair, trust-aware default). "spec" rows are SPEC.md 3 "NPCs".
    npc_accept_min_give: Any = param((0.0, 30.0, 0.0, 0.0, 0.0, 0.0), "spec",
                                     "accept only offers giving at least this (BULLY: about 30)")
    npc_accept_jitter: Any = param((0.0, 5.0, 0.0, 0.0, 0.0, 0.0), "spec",
                                   "+- uniform jitter per step on that threshold")
    npc_accept_min_ratio: Any = param((0.8, 1.0, 0.8, 0.8, 0.8, 1.0), "ours",
                                      "least give/want of an acceptable offer (after relationship terms)")
    npc_accept_when_low: Any = param((0.0, 0.0, 1.0, 0.0, 0.0, 0.0), "spec",
                                     "1: accept any offer of a resource it is low on (ALTRUIST)")
    npc_min_trust: Any = param((0.0, 0.0, 0.0, 0.0, 0.0, 0.0), "ours",
                               "no accepting from, proposing or signalling to a partner trusted below this")
    npc_offer_size: Any = param((10.0, 5.0, 10.0, 10.0, 10.0, 10.0), "ours", "amount given in its own proposals")
    # "Good trades increase trust, which unlocks higher-value opportunities later" (the write-up): with a trust
    # volume, how much an NPC deals with a partner grows with its trust in it, so trust pays at the margin.
    npc_trust_volume: Any = param((0.0, 0.0, 0.0, 0.0, 0.0, 0.0), "ours",
                                  "largest trade volume (give + want) per unit of trust: an NPC accepts from, and "
                                  "proposes to, partner j at most this x T[me, j] (0: no cap)")
    npc_offer_ratio: Any = param((1.0, 0.25, 1.0, 1.0, 1.0, 1.0), "spec",
                                 "give/want of its proposals (< 1 lowballs: BULLY)")
    npc_propose_rate: Any = param((0.5, 0.7, 0.5, 0.5, 0.5, 0.5), "ours",
                                  "chance per step to propose when it has nothing better to do")
    npc_signal_rate: Any = param((0.1, 0.0, 0.1, 0.1, 0.1, 0.5), "spec",
                                 "chance per step to SIGNAL (BULLY never, CHEATER often)")
    npc_signal_generosity: Any = param((1.0, 1.0, 1.0, 1.0, 1.0, 2.0), "spec",
                                       "signalled give = npc_offer_size x this (CHEATER: generous)")
    npc_break_rate: Any = param((0.0, 0.0, 0.0, 0.0, 0.0, 0.5), "spec",
                                "share of its signals it means to break (CHEATER)")
    npc_signal_cap: Any = param((0.5, 0.5, 0.5, 0.5, 0.5, 0.5), "ours",
                                "a signal promises at most this share of its rich resource")
    npc_honour_delay: Any = param((0.0, 0.0, 0.0, 0.0, 0.0, 0.0), "ours",
                                  "honour a kept signal only once it is older than this")
    npc_reject_rate: Any = param((0.5, 0.8, 0.0, 1.0, 0.5, 0.3), "ours",
                                 "chance to REJECT an unacceptable offer (else let it expire)")
    npc_trust_weight: Any = param((1.0, 0.0, 2.0, 0.0, 1.0, 0.0), "spec",
                                  "weight of T[i, j] in partner choice (ALTRUIST trusts most)")
    npc_mirror: Any = param((0.0, 0.0, 0.0, 1.0, 0.0, 0.0), "spec",
                            "weight of the partner's last behaviour toward it (TIT_FOR_TAT)")
    npc_cheat_sensitivity: Any = param((1.0, 0.0, 0.0, 0.0, 1.0, 0.0), "spec",
                                       "weight of the partner's cheater score (RECIPROCATOR)")
    npc_fm_discount: Any = param((0.1, 1.0, 1.0, 1.0, 0.1, 1.0), "spec",
                                 "a force-majeure break counts this x a malicious one (RECIPROCATOR)")
    npc_need_weight: Any = param((1.0, 0.0, 0.0, 0.0, 1.0, 0.0), "spec",
                                 "weight in partner choice of how much of my short resource it holds (RECIPROCATOR)")
    npc_bond_weight: Any = param((0.5, 0.0, 0.0, 0.0, 0.5, 0.0), "spec",
                                 "weight in partner choice of past trades, the relationship (RECIPROCATOR)")
    npc_noise: Any = param((0.3, 0.5, 0.1, 0.5, 0.3, 0.5), "ours", "Gumbel temperature of partner choice")
    npc_low_level: Any = param(20.0, "ours", "an NPC is low on a resource below this available amount")
    npc_accept_floor: Any = param(0.0, "ours", "least give/want any NPC accepts, even low on the offered resource "
                                               "(0: none, SPEC's ALTRUIST accepts anything when low)")
    npc_offer_by_need: Any = param(0, "ours", "1: NPC proposals give at most half the surplus of the rich resource "
                                              "over the poor one, asking in proportion (0: fixed terms)")
    npc_memory_decay: Any = param(0.95, "ours", "per-step decay of cheater evidence and bonds in NPC memory")
    npc_slight_weight: Any = param(0.3, "spec", "cheater score per reject of, or lowball to, the NPC")
    npc_public_weight: Any = param(0.3, "ours", "cheater score per break toward someone else (public ledger)")
    npc_lowball_ratio: Any = param(0.5, "ours", "an offer with give/want below this is a lowball")
    npc_cheat_tolerance: Any = param(0.5, "ours", "no proposals or signals to partners whose weighted score "
                                                  "exceeds this")

    # ---- episode ------------------------------------------------------------------------
    max_steps: Any = param(100, "spec", "episode length in steps")
    early_end_after: Any = param(50, "seed", "a stochastic end is possible from this step on")
    early_end_prob: Any = param(0.0, "spec", "per-step end probability after early_end_after (the seed's: 0.05)")
    obs_scale: Any = param(100.0, "ours", "resources and collateral are divided by this in observations")

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

