"""CrisisCompute (crisis-v0): a shared compute cluster under deadlines, crises and negotiation.

Registers `crisis-v0` (curriculum level 4, the default crisis scenario) and one variant per
curriculum level, `crisis-v0-level0` .. `crisis-v0-level4`.
"""
from nexus_jax.envs.crisis.constants import NUM_LEVELS
from nexus_jax.envs.crisis.curriculum import CurriculumThresholds, advance_level
from nexus_jax.envs.crisis.env import CrisisEnv, metrics
from nexus_jax.envs.crisis.params import CrisisParams
from nexus_jax.envs.crisis.state import CrisisState
from nexus_jax.registry import register


def make_crisis(info_mode: str = "agents", **overrides) -> CrisisEnv:
    """Factory for the registry: overrides are CrisisParams fields (validated, naming the field)."""
    return CrisisEnv(CrisisParams.create(**overrides), info_mode=info_mode)


register("crisis-v0", make_crisis)
for _level in range(NUM_LEVELS):
    register(f"crisis-v0-level{_level}", make_crisis, curriculum_level=_level)

__all__ = ["CrisisEnv", "CrisisParams", "CrisisState", "CurriculumThresholds", "advance_level", "make_crisis",
           "metrics"]
