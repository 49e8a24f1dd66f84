"""nexus_jax: multi-agent economies of trust, trade and shocks as pure, jittable JAX envs."""
from nexus_jax import xla_flags

xla_flags.apply()  # before any JAX computation: see xla_flags.py

from nexus_jax import fastpaths  # which form of the XLA:CPU fast paths is traced: see fastpaths.py
from nexus_jax.registry import DEFAULT_ENV, make, register, registered_envs
from nexus_jax import envs  # noqa: F401  (registers every env id)
from nexus_jax.envs.nexus.gymnax_view import NexusGymnax, make_gymnax

__version__ = "0.1.0"
__all__ = ["DEFAULT_ENV", "make", "make_gymnax", "NexusGymnax", "register", "registered_envs", "envs", "fastpaths"]
