"""Tabular Q-learner baseline: the seed's hyperparameters, jitted and vmapped over seeds."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nexus_jax
from train.qlearning import NUM_STATES, QConfig, epsilon, make_train, td_update


def test_epsilon_schedule_matches_seed():
    c = QConfig()
    eps = np.asarray(epsilon(jnp.arange(100), c))
    assert eps[0] == pytest.approx(0.6) and eps[1] == pytest.approx(0.6 * 0.97)
    assert eps[-1] == pytest.approx(0.10) and (np.diff(eps) <= 0).all()


def test_td_update_is_the_bellman_rule():
    q = jnp.zeros((2, 4, 3)).at[0, 1].set(jnp.array([1.0, 5.0, 2.0]))
    mask = jnp.array([[True, False, True], [True, True, True]])  # seat 0's best next action (5.0) is masked
    q2 = td_update(q, jnp.array([0, 0]), jnp.array([2, 0]), jnp.array([1.0, -1.0]), jnp.array([1, 1]),
                   mask, 0.0, QConfig())
    assert float(q2[0, 0, 2]) == pytest.approx(0.15 * (1.0 + 0.95 * 2.0))
    assert float(q2[1, 0, 0]) == pytest.approx(0.15 * -1.0)
    q3 = td_update(q, jnp.array([0, 0]), jnp.array([2, 0]), jnp.array([1.0, -1.0]), jnp.array([1, 1]), mask, 1.0,
                   QConfig())
    assert float(q3[0, 0, 2]) == pytest.approx(0.15)  # terminal: no bootstrap


def test_train_runs_jitted_and_vmapped_over_seeds():
    env = nexus_jax.make("crisis-v0", info_mode="full")
    train = jax.jit(jax.vmap(make_train(env, num_episodes=2), in_axes=(0, None)))
    q, m = train(jax.random.split(jax.random.PRNGKey(0), 2), env.default_params)
    assert q.shape == (2, 3, NUM_STATES, env.num_actions)
    assert np.isfinite(np.asarray(q)).all() and np.abs(np.asarray(q)).sum() > 0
    assert m["total_reward"].shape == (2, 2) and np.isfinite(np.asarray(m["total_reward"])).all()
    np.testing.assert_allclose(np.asarray(m["epsilon"])[0], [0.6, 0.6 * 0.97], rtol=1e-6)
    assert not np.array_equal(np.asarray(q[0]), np.asarray(q[1]))  # seeds explore differently
