"""Behaviour cloning: collect an NPC heuristic on device and fit it to near-zero NLL on a tiny dataset."""
import jax
import numpy as np
import pytest

from train.bc import UnmaskedEnv, bc_loss, collect, make_bc_train, npc_behaviour
from train.config import BCConfig
from train.learner_env import LearnerEnv
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


def test_hedge_vaults_what_each_seat_holds_then_unvaults_it():
    """The vault hedge laid over a teacher: largest valid levels, only on its steps, only for chosen seats."""
    import jax.numpy as jnp

    from nexus_jax.envs.nexus import core
    from nexus_jax.envs.nexus.constants import ActionType, ErrorCode
    from nexus_jax.envs.nexus.npc.hedge import default_unvault_step, hedge_actions
    from nexus_jax.envs.nexus.params import NexusParams
    from nexus_jax.envs.nexus.validity import check

    params = NexusParams.create(**TINY_ENV)  # levels 0, 5, 20; 6 steps, vault_delay 3
    assert default_unvault_step(params, margin=0) == 3
    _, state = core.reset(jax.random.PRNGKey(0), params)
    state = state.replace(available=jnp.array([[30.0, 7.0], [3.0, 50.0]]))
    wait = jnp.zeros((2, 5), jnp.int32)
    hedge = lambda s, want: np.asarray(hedge_actions(wait, s, params, (0, 1), jnp.array(want), 3))  # noqa: E731

    a = hedge(state, [True, True])  # step 0: energy. Seat 1 holds 3 < 5: nothing to vault, it keeps WAIT
    np.testing.assert_array_equal(a, [[ActionType.VAULT, 0, 2, 0, 0], [0, 0, 0, 0, 0]])
    a = hedge(state.replace(step=jnp.int32(1)), [True, False])  # step 1: compute, seat 1 did not draw the hedge
    np.testing.assert_array_equal(a, [[ActionType.VAULT, 0, 1, 0, 1], [0, 0, 0, 0, 0]])
    assert (np.asarray(check(state, params, None, jnp.asarray(a))) == ErrorCode.OK).all()
    np.testing.assert_array_equal(hedge(state.replace(step=jnp.int32(2)), [True, True]), wait)

    vaulted = state.replace(step=jnp.int32(3), vault=jnp.array([[20.0, 5.0], [0.0, 9.0]]))
    a = hedge(vaulted, [False, False])  # unvaulting does not depend on the coin
    np.testing.assert_array_equal(a, [[ActionType.UNVAULT, 0, 2, 0, 0], [0, 0, 0, 0, 0]])
    assert (np.asarray(check(vaulted, params, None, jnp.asarray(a))) == ErrorCode.OK).all()
    a = hedge(vaulted.replace(step=jnp.int32(4)), [False, False])
    np.testing.assert_array_equal(a, [[ActionType.UNVAULT, 0, 1, 0, 1], [ActionType.UNVAULT, 0, 1, 0, 1]])


@pytest.mark.slow
def test_dagger_labels_the_states_another_behaviour_reaches():
    """collect(labeler=): the env follows the behaviour (here: always WAIT), the data holds the teacher's labels."""
    import jax.numpy as jnp

    env = UnmaskedEnv.wrap(LearnerEnv.make("nexus-v0", TINY_ENV))
    teacher = npc_behaviour(env, "reciprocator")
    wait = lambda key, obs, state, masks: jnp.zeros(obs.shape[:2] + (5,), jnp.int32)  # noqa: E731
    pol = ActorCritic(env.num_learners, env.obs_dim, "factored", env.nvec, hidden=16, layers=1)
    cfg = BCConfig(num_envs=4, num_steps=6, epochs=2, num_minibatches=1, dagger_rounds=2, dagger_epochs=2,
                   validity_coef=1.0)

    @jax.jit
    def run(key):
        data, _ = collect(key, env, wait, 4, 6, labeler=teacher, store_valid=True)
        obs, state = jax.vmap(env.reset)(jax.random.split(key, 2))
        params = pol.init(jax.random.PRNGKey(1), obs, jax.vmap(env.masks)(state))
        return data, make_bc_train(cfg, env, pol, teacher)(key, params)[1]

    data, metrics = run(jax.random.PRNGKey(3))
    assert not np.asarray(data.invalid).any()  # WAIT is always valid: the env followed the behaviour
    labels = np.asarray(data.action)
    assert (labels[..., 0] != 0).any()  # ... while the teacher, asked in the same states, acts
    valid_type = np.take_along_axis(np.asarray(data.valid["type"]), labels[..., :1], -1)
    assert valid_type.all()  # and its labels are valid there
    for k in ("dagger_policy_return", "dagger_policy_invalid_rate", "dagger_nll"):
        assert np.asarray(metrics[k]).shape == (cfg.dagger_rounds,), k
    assert 0.0 <= float(np.asarray(metrics["dagger_policy_invalid_rate"]).min()) <= 1.0
