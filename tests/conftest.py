"""Shared fixtures: compiled functions are built once per session and reused by every test."""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Tests are compile-bound: XLA's fast-compile CPU options (nexus_jax/xla_flags.py) cost run time that
# small test shapes do not feel. Benchmarks and users keep XLA's defaults.
from nexus_jax.xla_flags import FAST_COMPILE, add  # noqa: E402  (imports no JAX backend)

add(FAST_COMPILE)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

# Compilation dominates the suite's time. A persistent cache lets identical programs built by
# different tests (or a re-run) compile once; it holds nothing but XLA executables.
jax.config.update("jax_compilation_cache_dir", os.environ.get("NEXUS_JAX_TEST_CACHE", "/tmp/nexus_jax_xla_cache"))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
import pytest  # noqa: E402

from nexus_jax.envs.nexus import core  # noqa: E402
from nexus_jax.envs.nexus.dynamics import StepNoise  # noqa: E402
from nexus_jax.envs.nexus.params import NexusParams  # noqa: E402

NO_SHOCK = StepNoise(shock_u=jnp.float32(1.0), end_u=jnp.float32(1.0))
FLARE = StepNoise(shock_u=jnp.float32(0.0), end_u=jnp.float32(1.0))  # u=0 < p_flare: SOLAR_FLARE


class Nexus:
    """A small Nexus setup with jitted core functions shared by the rule tests."""

    def __init__(self, **overrides):
        self.params = NexusParams.create(**{"num_agents": 4, "endowment_jitter": 0.0, **overrides})
        p = self.params
        self.step_noise = jax.jit(lambda s, a, noise, params: core.step_with_noise(s, a, params, noise))
        self.state0 = core.initial_state(p, jnp.zeros((p.num_agents, 2)))

    def step(self, state, actions, noise=NO_SHOCK, params=None):
        """One step with explicit noise; actions is a list of structured 5-tuples, one per agent."""
        acts = jnp.asarray(actions, jnp.int32)
        return self.step_noise(state, acts, noise, self.params if params is None else params)

    def level(self, amount: float) -> int:
        return self.params.amount_grid.index(float(amount))


@pytest.fixture(scope="session")
def nexus():
    return Nexus()
