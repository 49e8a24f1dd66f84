"""LogWrapper: SPEC 3 episode metrics for every seat, returned when episodes end; VecEnv batching."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nexus_jax
from nexus_jax.wrappers import LogWrapper, VecEnv, accumulate, gini, init_acc, summarize

NUM_ENVS, STEPS, MAX_STEPS = 4, 13, 6


@pytest.fixture(scope="module")
def run():
    """A jitted, batched rollout of nexus-v0 under LogWrapper with masked-random learner actions."""
    env = VecEnv(LogWrapper(nexus_jax.make("nexus-v0", info_mode="full", max_steps=MAX_STEPS, p_grid_failure=0.3)),
                 NUM_ENVS)

    @jax.jit
    def rollout(key):
        obs, state = env.reset(key)

        def body(state, k):
            k_act, k_step = jax.random.split(k)
            masks = jax.vmap(env._env._env.get_avail_actions)(state.env_state)["agent_0"]
            acts = jax.random.categorical(k_act, jnp.where(masks, 0.0, -1e9))
            _, state, rew, dones, info = env.step(k_step, state, {"agent_0": acts})
            return state, info

        return jax.lax.scan(body, state, jax.random.split(key, STEPS))[1]

    return rollout(jax.random.PRNGKey(0))


def test_metrics_returned_when_episodes_end(run):
    info = jax.tree.map(np.asarray, run)
    ended = info["returned_episode"]  # (T, B)
    assert ended[MAX_STEPS - 1].all() and ended[2 * MAX_STEPS - 1].all() and ended.sum() == 2 * NUM_ENVS
    t = MAX_STEPS - 1
    np.testing.assert_allclose(info["returned_episode_returns"][t], info["rewards_all"][:MAX_STEPS].sum(0), rtol=1e-5)
    np.testing.assert_allclose(info["returned_episode_returns"][t][:, 0],
                               info["returned_episode_returns"][t + 1][:, 0])  # held until the next end
    assert (info["returned_episode_lengths"][t] == MAX_STEPS).all()
    trades = info["stats"]["trades"][:MAX_STEPS].sum((0, 2, 3))
    np.testing.assert_array_equal(info["returned_episode_trades_completed"][t], trades)
    np.testing.assert_allclose(info["returned_episode_invalid_action_rate"][t][:, 1:], 0.0)  # NPCs are valid
    np.testing.assert_allclose(info["returned_episode_invalid_action_rate"][t][:, 0], 0.0)  # masked learner
    np.testing.assert_allclose(info["returned_episode_system_utility_end"][t], info["utility"][t].sum(-1), rtol=1e-5)
    assert (info["returned_episode_system_utility_peak"][t] >= info["returned_episode_system_utility_end"][t]).all()
    for k in ("gini_utility", "mean_trust"):
        assert ((info[f"returned_episode_{k}"] >= 0) & (info[f"returned_episode_{k}"] <= 1)).all()
    assert info["returned_episode_returns"].shape == (STEPS, NUM_ENVS, 4)  # every seat, NPCs included


def test_logwrapper_requires_full_info():
    """The default, per-agent info (JaxMARL's shape) lacks the per-seat tables: asking for it is explicit."""
    with pytest.raises(ValueError, match="info_mode='full'"):
        LogWrapper(nexus_jax.make("nexus-v0"))


def test_shock_attribution_windows():
    """After j breaks a signal to i, i's trades with j are counted per window kind."""
    n = 3
    env = nexus_jax.make("nexus-selfplay-v0", num_agents=n)
    _, s = env.reset_env(jax.random.PRNGKey(0), env.default_params)
    z = jnp.zeros((n, n), bool)
    base = {"stats": {k: z for k in ("trades", "proposals", "signals_made", "signals_honoured", "signals_broken",
                                     "broken_force_majeure")},
            "utility": jnp.ones(n), "rewards_all": jnp.zeros(n), "invalid": jnp.zeros(n, bool)}
    base["stats"].update(trade_volume=jnp.zeros((n, n)), shock_started=jnp.bool_(False), starving=jnp.zeros(n, bool))

    def info(**kw):
        return {**base, "stats": {**base["stats"], **kw}}

    acc = init_acc(s)
    p = env.default_params
    # step 1: agent 1 breaks a signal to 0 maliciously; agent 2 breaks one to 0 under force majeure
    acc = accumulate(acc, s, info(signals_broken=z.at[1, 0].set(True).at[2, 0].set(True),
                                  broken_force_majeure=z.at[2, 0].set(True)), p, window=4)
    for _ in range(4):  # then agent 0 trades with agent 2 every step, never with 1
        acc = accumulate(acc, s, info(trades=z.at[0, 2].set(True)), p, window=4)
    m = summarize(acc)
    assert float(m["trade_rate_after_force_majeure"][0]) == 1.0 and float(m["trade_rate_after_malicious"][0]) == 0.0
    assert float(m["attribution_gap"][0]) == 1.0 and float(m["attribution_windows_malicious"][0]) == 4


def test_gini():
    assert float(gini(jnp.array([1.0, 1.0, 1.0]))) == 0.0
    assert float(gini(jnp.zeros(3))) == 0.0
    assert float(gini(jnp.array([0.0, 0.0, 3.0]))) == pytest.approx(2 / 3)
