"""Shared fixtures: compiled functions are built once per session and reused by every test."""

import jax
import jax.numpy as jnp
import pytest

from nexus_jax.envs.nexus import core
from nexus_jax.envs.nexus.dynamics import StepNoise
from nexus_jax.envs.nexus.params import NexusParams

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
