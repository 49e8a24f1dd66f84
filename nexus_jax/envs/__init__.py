"""Environments; importing this package registers every env id."""
from nexus_jax.envs import nexus  # noqa: F401
from nexus_jax.envs import crisis  # noqa: F401
