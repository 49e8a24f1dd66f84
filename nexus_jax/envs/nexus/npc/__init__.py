"""Jitted NPC opponents: archetypes as parameter vectors, one vectorised policy, memory in the state."""
from nexus_jax.envs.nexus.npc.archetypes import NPC_ARCHETYPES, Traits, behaviour_ids, traits
from nexus_jax.envs.nexus.npc.memory import Slot, cheater_score, update_npc_memory
from nexus_jax.envs.nexus.npc.policy import HEURISTICS, archetype_heuristic, npc_actions
from nexus_jax.envs.nexus.npc.seats import step_all_seats, step_with_npcs
from nexus_jax.envs.nexus.npc.scripted import (BASELINES, PROMISES, SCRIPTED, Overlay, Scripted, scripted_actions,
                                               scripted_index, scripted_params, spec_heuristic)

__all__ = ["NPC_ARCHETYPES", "Traits", "behaviour_ids", "traits", "Slot", "cheater_score", "update_npc_memory",
           "HEURISTICS", "archetype_heuristic", "npc_actions", "step_all_seats", "step_with_npcs",
           "BASELINES", "PROMISES", "SCRIPTED", "Overlay", "Scripted", "scripted_actions", "scripted_index",
           "scripted_params", "spec_heuristic"]
