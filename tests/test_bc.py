"""Behaviour cloning: collect an NPC heuristic on device and fit it to near-zero NLL on a tiny dataset."""
import jax
import numpy as np

from train.bc import BCConfig, UnmaskedEnv, bc_loss, collect, make_bc_train, npc_behaviour
from train.envs import LearnerEnv
from train.networks import ActorCritic

TINY_ENV = dict(num_agents=2, amount_grid=(0.0, 5.0, 20.0), ledger_size=4, obs_ledger_events=2, max_steps=6)


def test_bc_on_a_tiny_npc_dataset_reaches_near_zero_loss():
    env = UnmaskedEnv.wrap(LearnerEnv.make("nexus-v0", TINY_ENV))
    pol = ActorCritic(env.num_learners, env.obs_dim, "factored", env.nvec, hidden=64, layers=2)
    cfg = BCConfig(archetype="reciprocator", num_envs=4, num_steps=6, epochs=300, num_minibatches=1, lr=3e-3,
                   vf_coef=0.0)

    @jax.jit
    def run(key):
        data, stats = collect(key, env, npc_behaviour(env, cfg.archetype), cfg.num_envs, cfg.num_steps)
        obs, state = jax.vmap(env.reset)(jax.random.split(key, 2))
        params = pol.init(jax.random.PRNGKey(1), obs, jax.vmap(env.masks)(state))
        start = bc_loss(params, pol, data)[0]
        params, aux = make_bc_train(cfg, env, pol).fit(key, params, data)
        return data, stats, start, bc_loss(params, pol, data)[0], aux

    data, stats, start, end, aux = run(jax.random.PRNGKey(0))
    assert data.obs.shape[0] == cfg.num_envs * cfg.num_steps
    assert float(stats["invalid_rate"]) == 0.0  # the heuristic only plays valid actions
    # Unmasked heads: the start is near uniform over every head's full range.
    assert float(start) > 3.0, float(start)
    assert float(end) < 0.05, (float(start), float(end))
    assert np.all(np.diff(np.asarray(aux["nll"])[::50]) <= 1e-3)
