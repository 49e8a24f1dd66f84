"""Rule versions of Nexus, as gym and Jumanji version envs: a rule change is a new id; an old id keeps its rules.

- `nexus-v0`: SPEC 3's literal rules (the `NexusParams` defaults), kept registered and reproducible.
- `nexus-v1`: the default economy (`V1_RULES`), where the write-up's four properties hold as measured facts
  (`python -m train.screen`): passive holding costs, trade pays, betrayal tempts and costs, relationships help
  through shocks. Each change and its reason: docs/design.md, "The default economy"; the spec sheet's Version
  History lists them.

Every v0 variant has its v1 twin (`V1_VARIANTS`): the same seats and NPC mix on the v1 rules. The research
scenarios keep what they add to the question (longer ledger views, kept promises, hidden types) and drop
what v0 needed to make cooperation pay at all (own reward, trade subsidies of 4.0-8.0, reshaped shocks): on
v1 the trade bonus stays the seed's 0.2. `nexus-research-reliance-v1` (and its self-play twin) has no v0 twin:
the hidden-types scenario plus the opt-in reliance rule (`signal_prepay`) and a CHEATER that signals every step
and breaks every promise.
"""
from __future__ import annotations

from nexus_jax.envs.nexus.constants import Archetype

_L, _B, _A, _T, _R, _C = (int(a) for a in Archetype)

V1_RULES = dict(
    # Complementary production: every seat makes 3.0 of one resource and consumes 1.0 of each, so a seat gains
    # utility by trading its surplus for what it lacks; the learner makes Energy (rows: LEARNER, BULLY,
    # ALTRUIST, TIT_FOR_TAT, RECIPROCATOR, CHEATER; TIT_FOR_TAT makes Compute).
    income=((3.0, 0.0), (3.0, 0.0), (0.0, 3.0), (0.0, 3.0), (1.5, 1.5), (3.0, 0.0)),
    endowment=((60.0, 40.0), (90.0, 10.0), (10.0, 90.0), (40.0, 60.0), (50.0, 50.0), (60.0, 40.0)),
    # Utility as a flow, own: each step pays w1 x the seat's utility / max_steps, so what sits in the vault (or
    # is not traded for) costs at every step, and the seat weighs its own short-term gain against trust.
    reward_utility=1, reward_mode=1,
    # Good trades build trust: an acceptor given less than 0.8 of what it paid loses trust in the proposer; an
    # offer below 0.8 is a lowball to the NPCs, and no NPC accepts one.
    trust_fair_ratio=0.8, npc_lowball_ratio=0.8, npc_accept_floor=0.8,
    # Trust gates access: the cooperative NPCs deal only with partners they trust at least 0.4.
    npc_min_trust=(0.4, 0.0, 0.4, 0.4, 0.4, 0.0),
    # NPCs trade by need: they offer surplus only and accept no trade that lowers their utility.
    npc_offer_by_need=1,
    # Local shocks: each reaches a seat with probability 0.5, so unhit partners can help the hit ones.
    shock_reach=0.5,
)

_CHEATER_MIX = dict(archetypes=(_L, _C, _R, _A))
_LEDGER = dict(obs_ledger_events=32)  # the break labels stay in view for the 10-step attribution window
_KEPT = dict(npc_honour_delay=(0.0, 0.0, 4.0, 4.0, 4.0, 0.0), npc_signal_cap=(0.5, 0.5, 0.8, 0.8, 0.8, 0.5),
             npc_signal_generosity=(1.0, 1.0, 2.0, 2.0, 2.0, 2.0), npc_signal_rate=(0.1, 0.0, 1.0, 0.1, 1.0, 0.25))
_HIDDEN = dict(behaviour_shuffle=(0, 1, 1, 1), npc_accept_min_give=(0.0, 30.0, 0.0, 0.0, 0.0, 50.0))
# Reliance (opt-in rule `signal_prepay`, docs/design.md): a promise paid ahead and a CHEATER that signals every step and
# breaks every promise, so relying on the cheat costs and a shocked honest partner is still worth relying on.
_RELIANCE = dict(signal_prepay=1, npc_signal_rate=(0.1, 0.0, 1.0, 0.1, 1.0, 1.0), npc_break_rate=(0.0, 0.0, 0.0, 0.0, 0.0, 1.0))
_ATTRIBUTION = dict(npc_signal_rate=(0.1, 0.0, 0.5, 0.1, 0.5, 0.5), npc_accept_min_ratio=(0.8, 1.0, 0.8, 0.8, 0.8, 2.0),
                    npc_offer_ratio=(1.0, 0.25, 1.0, 1.0, 1.0, 0.5))

# id -> (learner seats, param overrides): the v0 family on the v1 rules
_ONE = (0,)
_V1_FAMILY = {
    "nexus-v1": (_ONE, {}),  # learner vs BULLY, ALTRUIST, TIT_FOR_TAT
    "nexus-reciprocator-v1": (_ONE, dict(archetypes=(_L, _R, _R, _T))),
    "nexus-cheater-v1": (_ONE, _CHEATER_MIX),
    "nexus-mixed-v1": (_ONE, dict(num_agents=6, archetypes=(_L, _B, _A, _T, _R, _C))),
    "nexus-selfplay-v1": (None, {}),
    "nexus-8-v1": (_ONE, dict(num_agents=8)),
    "nexus-16-v1": (_ONE, dict(num_agents=16)),
    "nexus-research-v1": (_ONE, {**_CHEATER_MIX, **_LEDGER}),
    "nexus-research-selfplay-v1": (None, {**_CHEATER_MIX, **_LEDGER}),
    "nexus-research-attribution-v1": (_ONE, {**_CHEATER_MIX, **_LEDGER, **_ATTRIBUTION}),
    "nexus-research-promises-v1": (_ONE, {**_CHEATER_MIX, **_LEDGER, **_KEPT}),
    "nexus-research-promises-selfplay-v1": (None, {**_CHEATER_MIX, **_LEDGER, **_KEPT}),
    "nexus-research-hidden-v1": (_ONE, {**_CHEATER_MIX, **_LEDGER, **_KEPT, **_HIDDEN}),
    "nexus-research-hidden-selfplay-v1": (None, {**_CHEATER_MIX, **_LEDGER, **_KEPT, **_HIDDEN}),
    "nexus-research-reliance-v1": (_ONE, {**_CHEATER_MIX, **_LEDGER, **_KEPT, **_HIDDEN, **_RELIANCE}),
    "nexus-research-reliance-selfplay-v1": (None, {**_CHEATER_MIX, **_LEDGER, **_KEPT, **_HIDDEN, **_RELIANCE}),
}
V1_VARIANTS = {k: (seats, {**V1_RULES, **o}) for k, (seats, o) in _V1_FAMILY.items()}
