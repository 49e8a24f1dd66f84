"""Rule versions of Nexus, as gym and Jumanji version envs: a rule change is a new id; an old id keeps its rules.

- `nexus-v0`: SPEC 3's literal rules (the `NexusParams` defaults), kept registered and reproducible.
- `nexus-v1`: the economy where the write-up's four properties first held as measured facts (`V1_RULES`;
  `python -m train.screen --env nexus-v1`): passive holding costs, trade pays, betrayal tempts and costs,
  relationships help through shocks. Each change and its reason: docs/design.md, "The default economy".
- `nexus-v2`: the default economy (`V2_RULES`): v1 plus two rules that give trust and a partner's record a price,
  so that the write-up's questions about trust and attribution have an answer worth learning: relying on a promise
  pays ahead (`signal_prepay`; a broken promise keeps the payment) and a refused proposal costs its proposer the
  whole deposit (`reject_penalty` 1.0). docs/design.md, "nexus-v2". The spec sheet's Version History lists both.

Every v0 variant has its twin in each later version (`V1_VARIANTS`, `V2_VARIANTS`): the same seats and NPC mix on
that version's rules. The research scenarios keep what they add to the question (longer ledger views, kept
promises, hidden types) and drop what v0 needed to make cooperation pay at all (own reward, trade subsidies of
4.0-8.0, reshaped shocks): from v1 on the trade bonus stays the seed's 0.2. `nexus-research-reliance-v*` (and
its self-play twin) has no v0 twin: the hidden-types scenario with the reliance rule and a CHEATER that signals
every step and breaks every promise.
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
# Reliance (rule `signal_prepay`, opt-in on v1, on in v2; docs/design.md): a promise paid ahead and a CHEATER that signals
# every step and breaks every promise, so relying on the cheat costs and a shocked honest partner is still worth relying on.
_RELIANCE = dict(signal_prepay=1, npc_signal_rate=(0.1, 0.0, 1.0, 0.1, 1.0, 1.0), npc_break_rate=(0.0, 0.0, 0.0, 0.0, 0.0, 1.0))
_ATTRIBUTION = dict(npc_signal_rate=(0.1, 0.0, 0.5, 0.1, 0.5, 0.5), npc_accept_min_ratio=(0.8, 1.0, 0.8, 0.8, 0.8, 2.0),
                    npc_offer_ratio=(1.0, 0.25, 1.0, 1.0, 1.0, 0.5))

V2_RULES = dict(
    V1_RULES,
    # Relying on a promise carries a risk: ACCEPT on a partner's open SIGNAL (with no proposal of its live) pays
    # the promised amount ahead, the honouring PROPOSE delivers at once, a broken promise keeps the payment. Which
    # partner breaks promises maliciously now costs the one who relies on it (docs/design.md, "Reliance on a SIGNAL").
    signal_prepay=1,
    # A refused proposal costs its proposer the whole deposit (v0-v1: a tenth), so proposing to a partner who does
    # not trust you, or whom you do not need, costs what the refusal costs that partner's trust.
    reject_penalty=1.0,
)

# name -> (learner seats, param overrides): the v0 family, registered on each later version's rules as `name-vK`
_ONE = (0,)
_FAMILY = {
    "nexus": (_ONE, {}),  # learner vs BULLY, ALTRUIST, TIT_FOR_TAT
    "nexus-reciprocator": (_ONE, dict(archetypes=(_L, _R, _R, _T))),
    "nexus-cheater": (_ONE, _CHEATER_MIX),
    "nexus-mixed": (_ONE, dict(num_agents=6, archetypes=(_L, _B, _A, _T, _R, _C))),
    "nexus-selfplay": (None, {}),
    "nexus-8": (_ONE, dict(num_agents=8)),
    "nexus-16": (_ONE, dict(num_agents=16)),
    "nexus-research": (_ONE, {**_CHEATER_MIX, **_LEDGER}),
    "nexus-research-selfplay": (None, {**_CHEATER_MIX, **_LEDGER}),
    "nexus-research-attribution": (_ONE, {**_CHEATER_MIX, **_LEDGER, **_ATTRIBUTION}),
    "nexus-research-promises": (_ONE, {**_CHEATER_MIX, **_LEDGER, **_KEPT}),
    "nexus-research-promises-selfplay": (None, {**_CHEATER_MIX, **_LEDGER, **_KEPT}),
    "nexus-research-hidden": (_ONE, {**_CHEATER_MIX, **_LEDGER, **_KEPT, **_HIDDEN}),
    "nexus-research-hidden-selfplay": (None, {**_CHEATER_MIX, **_LEDGER, **_KEPT, **_HIDDEN}),
    "nexus-research-reliance": (_ONE, {**_CHEATER_MIX, **_LEDGER, **_KEPT, **_HIDDEN, **_RELIANCE}),
    "nexus-research-reliance-selfplay": (None, {**_CHEATER_MIX, **_LEDGER, **_KEPT, **_HIDDEN, **_RELIANCE}),
}


def _variants(version: str, rules: dict) -> dict:
    """id -> (learner seats, params): every family member on `rules`, named `name-<version>`."""
    return {f"{name}-{version}": (seats, {**rules, **o}) for name, (seats, o) in _FAMILY.items()}


V1_VARIANTS = _variants("v1", V1_RULES)
V2_VARIANTS = _variants("v2", V2_RULES)
