"""Env-agnostic building blocks: spaces, the multi-agent base class, and the capability surface (`EnvSpec`)."""
from nexus_jax.base.spaces import Box, Discrete, MultiDiscrete, Space, compatible
from nexus_jax.base.multi_agent_env import MultiAgentEnv
from nexus_jax.base.spec import EnvSpec, SlotLayout

__all__ = ["Box", "Discrete", "MultiDiscrete", "Space", "MultiAgentEnv", "EnvSpec", "SlotLayout", "compatible"]
