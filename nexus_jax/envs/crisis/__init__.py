"""CrisisCompute (crisis-v0): a shared compute cluster under deadlines, crises and negotiation.

Registers `crisis-v0` (curriculum level 4, the default crisis scenario) and one variant per
curriculum level, `crisis-v0-level0` .. `crisis-v0-level4`.

The public surface trainers and evaluators use (nothing else of the folder needs importing):
the functional core `reset` / `step` / `metrics`, the env class, params and state types, the
curriculum, the enums, the state views `ready`, `now_hours`, `used`, `num_steps`,
`avail_actions`, `dependency_features` (what a hand-written policy or a tabular learner reads of a state),
`observation_layout` (the slice of each observation block), and the hand-written rules (`heuristics.py`:
`RULES` from the state, `SLOT_RULES` from slot features).
"""
from nexus_jax.envs.crisis.constants import GPU, NUM_LEVELS, Base, Crisis, Error, Nego, Outcome
from nexus_jax.envs.crisis.core import metrics, reset, step
from nexus_jax.envs.crisis.crises import num_steps
from nexus_jax.envs.crisis.curriculum import CurriculumThresholds, advance_level
from nexus_jax.envs.crisis.dependencies import dependency_features
from nexus_jax.envs.crisis.env import CrisisEnv
from nexus_jax.envs.crisis.heuristics import (FIRST_REQUEST, RULES, SLOT_RULES, edf_actions, edf_chain, edf_fit,
                                             static_order, unblocks)
from nexus_jax.envs.crisis.negotiation import avail_actions, decode, encode, now_hours, ready, used
from nexus_jax.envs.crisis.observation import observation_layout
from nexus_jax.envs.crisis.params import CrisisParams
from nexus_jax.envs.crisis.reward import jain
from nexus_jax.envs.crisis.state import CrisisSchedule, CrisisState
from nexus_jax.registry import register


def make_crisis(info_mode: str = "agents", **overrides) -> CrisisEnv:
    """Factory for the registry: overrides are CrisisParams fields (validated, naming the field)."""
    return CrisisEnv(CrisisParams.create(**overrides), info_mode=info_mode)


register("crisis-v0", make_crisis)
for _level in range(NUM_LEVELS):
    register(f"crisis-v0-level{_level}", make_crisis, curriculum_level=_level)

__all__ = ["FIRST_REQUEST", "GPU", "NUM_LEVELS", "RULES", "SLOT_RULES", "Base", "Crisis", "CrisisEnv", "CrisisParams",
           "CrisisSchedule", "CrisisState", "CurriculumThresholds", "Error", "Nego", "Outcome", "advance_level",
           "avail_actions", "decode", "dependency_features", "edf_actions", "edf_chain", "edf_fit", "encode", "jain",
           "make_crisis", "metrics", "now_hours", "num_steps", "observation_layout", "ready", "reset", "static_order",
           "step", "unblocks", "used"]
