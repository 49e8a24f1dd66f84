"""Protocol: Nexus (env id `nexus-v0`): trade, trust, signals and shocks among N agents."""
from nexus_jax.envs.nexus.constants import ActionType, Archetype, ErrorCode, EventKind, Outcome, Resource, Shock
from nexus_jax.envs.nexus.core import reset, step
from nexus_jax.envs.nexus.env import NexusEnv
from nexus_jax.envs.nexus.params import NexusParams
from nexus_jax.envs.nexus.state import NexusState
from nexus_jax.registry import register

register("nexus-v0", NexusEnv.create)

__all__ = ["ActionType", "Archetype", "ErrorCode", "EventKind", "Outcome", "Resource", "Shock",
           "reset", "step", "NexusEnv", "NexusParams", "NexusState"]
