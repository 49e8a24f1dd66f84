"""Protocol: Nexus (env id `nexus-v0`): trade, trust, signals and shocks among N agents."""
from nexus_jax.envs.nexus.constants import (NUM_ACTION_TYPES, NUM_RESOURCES, ActionType, Archetype, ErrorCode, EventKind,
                                            Outcome, Resource, Shock)
from nexus_jax.envs.nexus.actions import decode, encode, num_flat_actions
from nexus_jax.envs.nexus.core import reset, step
from nexus_jax.envs.nexus.entities import EntityObs, observe_entities, observe_one
from nexus_jax.envs.nexus.env import NexusEnv
from nexus_jax.envs.nexus.evaluation import seat_masks, with_behaviour
from nexus_jax.envs.nexus.npc import (BASELINES, NPC_ARCHETYPES, PROMISES, SCRIPTED, Overlay, npc_actions, scripted_actions,
                                      scripted_index, scripted_params, step_all_seats, step_with_npcs)
from nexus_jax.envs.nexus.npc.hedge import default_unvault_step, hedge_actions
from nexus_jax.envs.nexus.npc.memory import Slot as MemorySlot
from nexus_jax.envs.nexus.observation import observation_layout
from nexus_jax.envs.nexus.params import NexusParams
from nexus_jax.envs.nexus.state import NexusState
from nexus_jax.envs.nexus.validity import factored_masks
from nexus_jax.envs.nexus.versions import V1_RULES, V1_VARIANTS, V2_RULES, V2_VARIANTS
from nexus_jax.registry import register

_L, _B, _A, _T, _R, _C = (int(a) for a in Archetype)

# Variants (docs/design.md "## NPCs"): learner seats are static, the NPC mix is the traced `archetypes`.
register("nexus-v0", NexusEnv.create, learner_seats=(0,))  # learner vs BULLY, ALTRUIST, TIT_FOR_TAT [spec]
register("nexus-reciprocator-v0", NexusEnv.create, learner_seats=(0,), archetypes=(_L, _R, _R, _T))
register("nexus-cheater-v0", NexusEnv.create, learner_seats=(0,), archetypes=(_L, _C, _R, _A))
register("nexus-mixed-v0", NexusEnv.create, learner_seats=(0,), num_agents=6, archetypes=(_L, _B, _A, _T, _R, _C))
register("nexus-selfplay-v0", NexusEnv.create, learner_seats=None)  # every seat external
# The research scenario (docs/research.md): the cheater mix under rules where cooperation
# pays a selfish agent: own reward (reward_mode 1), trade_collateral_bonus 20x, and shocks that are rare
# and mild for average holders but take up to 90% from holders far above the mean (progressive), so
# reliable partners' signals fail by force majeure while the CHEATER breaks by malice. Scripted check
# (python -m experiments.research.scenario_scan): the cooperative heuristics beat the vault hedge here.
RESEARCH_RULES = dict(p_grid_failure=0.05, shock_severity=0.05, shock_progressive=15.0, shock_max_fraction=0.9,
                      trade_collateral_bonus=4.0, reward_mode=1)
register("nexus-research-v0", NexusEnv.create, learner_seats=(0,), archetypes=(_L, _C, _R, _A), **RESEARCH_RULES)
register("nexus-research-selfplay-v0", NexusEnv.create, learner_seats=None, archetypes=(_L, _C, _R, _A),
         **RESEARCH_RULES)  # every seat learns
# Result 3 (attribution, docs/research.md): the research rules plus the break labels visible for the whole
# 10-step attribution window (the last 32 ledger events in each observation, not 8), a CHEATER that is
# costly to trade with (accepts only offers giving it 2:1, proposes 1:2), and reliable partners
# (RECIPROCATOR, ALTRUIST) that promise as often as the CHEATER, so telling them apart pays.
ATTRIBUTION_RULES = dict(obs_ledger_events=32, npc_signal_rate=(0.1, 0.0, 0.5, 0.1, 0.5, 0.5),
                         npc_accept_min_ratio=(0.8, 1.0, 0.8, 0.8, 0.8, 2.0),
                         npc_offer_ratio=(1.0, 0.25, 1.0, 1.0, 1.0, 0.5))
register("nexus-research-attribution-v0", NexusEnv.create, learner_seats=(0,), archetypes=(_L, _C, _R, _A),
         **RESEARCH_RULES, **ATTRIBUTION_RULES)
# Result 3 with an informative label (docs/research.md): reliable partners (ALTRUIST, TIT_FOR_TAT,
# RECIPROCATOR) keep a promise open to the window's last step with the promised amount set aside
# (npc_honour_delay), promise 2x their offer up to 80% of what they hold and as often as they can, and the
# CHEATER signals less; uniform shocks (30% of a holding, at most 50%) leave an honest promise short more often
# than a CHEATER's (at most half its holding). So force majeure mostly marks an honest partner a shock left
# short, and a malicious break a CHEATER (python -m experiments.research.attribution_intent); the labels stay in the
# observation for the 10-step window (32 ledger events).
KEPT_PROMISES = dict(npc_honour_delay=(0.0, 0.0, 4.0, 4.0, 4.0, 0.0), npc_signal_cap=(0.5, 0.5, 0.8, 0.8, 0.8, 0.5),
                     npc_signal_generosity=(1.0, 1.0, 2.0, 2.0, 2.0, 2.0),
                     npc_signal_rate=(0.1, 0.0, 1.0, 0.1, 1.0, 0.25))
PROMISE_RULES = dict(KEPT_PROMISES, shock_severity=0.3, shock_progressive=0.0, shock_max_fraction=0.5,
                     obs_ledger_events=32)
register("nexus-research-promises-v0", NexusEnv.create, learner_seats=(0,), archetypes=(_L, _C, _R, _A),
         **{**RESEARCH_RULES, **PROMISE_RULES})
register("nexus-research-promises-selfplay-v0", NexusEnv.create, learner_seats=None, archetypes=(_L, _C, _R, _A),
         **{**RESEARCH_RULES, **PROMISE_RULES})  # every seat learns (result 4 in the promises variant)
# Hidden types (docs/research.md): the promises variant with the three NPC behaviours (CHEATER,
# RECIPROCATOR, ALTRUIST) dealt among seats 1-3 at every reset (`behaviour_shuffle`; the economies stay with the
# seats), so a partner's seat does not say whether it cheats and a malicious break is evidence about it; a
# CHEATER that accepts no proposal (npc_accept_min_give 50, above the largest amount level), so a proposal to it
# is a wasted step and telling it from a partner a shock left short pays (its own proposals are fair and may be
# accepted); and the trade bonus doubled (8.0), so the cooperative heuristics beat the vault hedge clearly
# (python -m experiments.research.scenario_scan).
HIDDEN_TYPES = dict(behaviour_shuffle=(0, 1, 1, 1), npc_accept_min_give=(0.0, 30.0, 0.0, 0.0, 0.0, 50.0),
                    trade_collateral_bonus=8.0)
register("nexus-research-hidden-v0", NexusEnv.create, learner_seats=(0,), archetypes=(_L, _C, _R, _A),
         **{**RESEARCH_RULES, **PROMISE_RULES, **HIDDEN_TYPES})
register("nexus-research-hidden-selfplay-v0", NexusEnv.create, learner_seats=None, archetypes=(_L, _C, _R, _A),
         **{**RESEARCH_RULES, **PROMISE_RULES, **HIDDEN_TYPES})  # every seat learns (result 4)
register("nexus-8-v0", NexusEnv.create, learner_seats=(0,), num_agents=8)
register("nexus-16-v0", NexusEnv.create, learner_seats=(0,), num_agents=16)
# nexus-v1 and nexus-v2 (the default economy) and their variants (versions.py; docs/design.md "The default economy")
for _id, (_seats, _overrides) in {**V1_VARIANTS, **V2_VARIANTS}.items():
    register(_id, NexusEnv.create, learner_seats=_seats, **_overrides)

__all__ = ["ActionType", "Archetype", "ErrorCode", "EventKind", "Outcome", "Resource", "Shock",
           "NUM_ACTION_TYPES", "NUM_RESOURCES",
           # the entity view (docs/populations.md): one policy for any N
           "EntityObs", "observe_entities", "observe_one",
           "reset", "step", "NexusEnv", "NexusParams", "NexusState",
           # the evaluation surface (train/ uses only these): actions, masks, heuristics in any seat, the hedge
           "encode", "decode", "num_flat_actions", "seat_masks", "factored_masks", "NPC_ARCHETYPES", "npc_actions",
           "with_behaviour", "step_with_npcs", "step_all_seats", "hedge_actions", "default_unvault_step",
           # scripted play in any seat: the baselines every evaluation shows, and the promise pair (npc/scripted.py)
           "BASELINES", "PROMISES", "SCRIPTED", "Overlay", "scripted_actions", "scripted_index", "scripted_params",
           "MemorySlot", "observation_layout",
           "RESEARCH_RULES", "ATTRIBUTION_RULES", "KEPT_PROMISES", "PROMISE_RULES", "HIDDEN_TYPES", "V1_RULES",
           "V1_VARIANTS", "V2_RULES", "V2_VARIANTS"]
