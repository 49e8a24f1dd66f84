"""Env-agnostic building blocks: spaces and the multi-agent base class."""
from nexus_jax.base.spaces import Box, Discrete, MultiDiscrete, Space, compatible
from nexus_jax.base.multi_agent_env import MultiAgentEnv

__all__ = ["Box", "Discrete", "MultiDiscrete", "Space", "MultiAgentEnv", "compatible"]
