"""Shared fixtures: compiled functions are built once per session and reused by every test."""
import json

import jax
import jax.numpy as jnp
import numpy as np
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


@pytest.fixture(scope="session")
def run_writer():
    """`write_run`, for module-scoped fixtures that need a saved run folder."""
    return write_run


def write_run(run, overrides: list, spread: float, invalid: list):
    """A saved run folder as `python -m train` writes one, without training: config, params of 2 seeds
    (the template scaled by 1 + spread * seed), 3 snapshot slots each, and a metrics.jsonl. -> (cfg, env)."""
    from train.checkpoint import param_template, save_run
    from train.config import load_config
    from train.models import make_policy
    from train.ppo import make_env
    from train.snapshots import save_policies

    cfg = load_config(overrides=overrides + ["num_envs=2", "num_steps=4", "total_timesteps=16", "num_minibatches=1",
                                             "num_seeds=2", "snapshot_every=1", "env.max_steps=4"])
    env = make_env(cfg)
    p = param_template(cfg, env, make_policy(cfg, env))
    save_run(run, cfg, p)
    stack = lambda k: jax.tree.map(lambda x: np.stack([x * (1 + spread * i) for i in range(k)]), p)  # noqa: E731
    params = jax.tree.map(lambda x: x[None], stack(2))  # (L=1, S=2, ...)
    snaps = jax.tree.map(lambda x: np.stack([x, x])[None], stack(3))  # (1, 2, 3 slots, ...)
    save_policies(run, cfg, {"params": params, "snapshots": snaps}, 0)
    with open(run / "metrics.jsonl", "w") as f:
        for u in range(cfg.num_updates):
            f.write(json.dumps({"update": u, "env_steps": (u + 1) * 8, "episode_return": [-3.0 + u, -2.5 + u],
                                "invalid_rate": invalid}) + "\n")
    return cfg, env
