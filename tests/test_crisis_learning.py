"""What crisis-v0 gives its learners: the slack / work-left / fits-now task features, the shared
reward option, and the slot scorer (one network for every task slot, exchangeable slots) and its EDF prior."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nexus_jax
from nexus_jax.envs.crisis import CrisisParams, avail_actions, core, edf_actions, now_hours, unblocks
from nexus_jax.envs.crisis.observation import GLOBAL_FEATURES, TASK_FEATURES, get_obs
from nexus_jax.envs.crisis.reward import combine
from train.config import ConfigError, load_config
from train.networks import ActorCritic, SlotActor


def test_task_features_work_left_slack_and_fit():
    p = CrisisParams.create()
    obs, s = core.reset(jax.random.PRNGKey(0), p)
    s = s.replace(progress_min=s.progress_min.at[0, 0].set(15.0))  # 30 of 45 minutes left
    obs = np.asarray(get_obs(s, p))
    f = obs[0, GLOBAL_FEATURES + 3:GLOBAL_FEATURES + 3 + 4 * TASK_FEATURES].reshape(4, TASK_FEATURES)
    assert f[0, 11] == pytest.approx(0.5 / 8.0)  # work left: 0.5 h of an 8 h episode
    assert f[0, 12] == pytest.approx((2.0 - float(now_hours(s.step, p)) - 0.5) / 8.0)  # slack
    assert f[0, 13] == 1.0 and f[3, 13] == 0.0  # fits now; the urgent slot is not released yet
    s2 = s.replace(capacity=jnp.zeros(3))
    obs2 = np.asarray(get_obs(s2, p))
    assert obs2[0, GLOBAL_FEATURES + 3 + 13] == 0.0  # nothing fits a cluster with no capacity


@pytest.mark.slow
def test_task_default_prob_mixes_the_fixed_set_into_random_resets():
    """0 is the random source bit for bit; 1 always the fixed set; 0.5 some of each (the other draws unchanged)."""
    keys = jax.random.split(jax.random.PRNGKey(3), 64)
    fixed = core.reset(keys[0], CrisisParams.create())[1].tasks
    reset = lambda **kw: jax.vmap(core.reset, (0, None))(keys, CrisisParams.create(task_source="random", **kw))  # noqa: E731
    rand, zero, one, half = reset()[1], reset(task_default_prob=0.0)[1], reset(task_default_prob=1.0)[1], \
        reset(task_default_prob=0.5)[1]
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(rand), jax.tree.leaves(zero)))
    is_fixed = lambda t: np.all(np.asarray(t.deadline_h) == np.asarray(fixed.deadline_h), (-2, -1))  # noqa: E731
    assert is_fixed(one.tasks).all() and not is_fixed(rand.tasks).any()
    assert 10 < is_fixed(half.tasks).sum() < 54
    assert np.array_equal(np.asarray(half.schedule.kind), np.asarray(rand.schedule.kind))  # the crises' draw is untouched
    with pytest.raises(ValueError, match="task_default_prob"):
        CrisisParams.create(task_default_prob=1.5)


def test_reward_share_pays_the_mean_and_keeps_the_total():
    ind, team = jnp.array([3.0, -1.0, 10.0]), jnp.float32(2.0)
    base = combine(ind, team, CrisisParams.create())
    np.testing.assert_array_equal(np.asarray(base), np.asarray(0.6 * ind + 0.4 * team))
    full = combine(ind, team, CrisisParams.create(reward_share=1.0))
    np.testing.assert_allclose(np.asarray(full), np.full(3, float(base.mean())), rtol=1e-6)
    half = combine(ind, team, CrisisParams.create(reward_share=0.5))
    assert float(half.sum()) == pytest.approx(float(base.sum()), rel=1e-6)
    with pytest.raises(ValueError, match="reward_share"):
        CrisisParams.create(reward_share=1.5)


@pytest.mark.slow
def test_slot_scorer_is_exchangeable_over_slots():
    env = nexus_jax.make("crisis-v0")
    assert env.spec.slot_layout == (GLOBAL_FEATURES + 3, 4, TASK_FEATURES, 4, 2, 8, 12, 13, -1)
    off, K, F, first, per = env.spec.slot_layout[:5]
    on = nexus_jax.make("crisis-v0", dependency_features=True).spec.slot_layout
    assert on[2:] == (TASK_FEATURES + 5, 4, 2, 8, 12, 13, TASK_FEATURES + 4)
    actor = SlotActor(env.num_actions, env.spec.slot_layout, hidden=8, layers=1)
    obs = jax.random.normal(jax.random.PRNGKey(1), (2, env.obs_dim))
    masks = jnp.ones((2, env.num_actions), bool)
    params = actor.init(jax.random.PRNGKey(2), obs, masks, jax.random.PRNGKey(3))

    def logp(o):  # log-probabilities of every action
        return jax.vmap(lambda a: actor.apply(params, o, masks, None, jnp.full((2,), a))[1])(jnp.arange(12)).T

    perm = jnp.array([2, 0, 3, 1])
    slots = obs[:, off:off + K * F].reshape(2, K, F)
    swapped = obs.at[:, off:off + K * F].set(slots[:, perm].reshape(2, K * F))
    a, b = np.asarray(logp(obs)), np.asarray(logp(swapped))
    req = lambda x: x[:, first:first + K * per].reshape(2, K, per)  # noqa: E731
    np.testing.assert_allclose(req(b), req(a)[:, np.asarray(perm)], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b[:, :first], a[:, :first], rtol=1e-5, atol=1e-6)
    _, s = env.reset(jax.random.PRNGKey(0))
    pol = ActorCritic(3, env.obs_dim, "flat", num_actions=12, hidden=8, layers=1, slot_layout=env.spec.slot_layout)
    o = jnp.stack([env.get_obs(s)[a] for a in env.agents])[None]
    m = avail_actions(s, env.default_params)[None]
    act, lp, _ = pol.act(pol.init(jax.random.PRNGKey(0), o, m), o, m, jax.random.PRNGKey(1))
    assert act.shape == (1, 3) and bool(jnp.all(m[0, jnp.arange(3), act[0]])) and bool(jnp.all(jnp.isfinite(lp)))


def test_slot_scorer_config_needs_a_flat_head_on_crisis(tmp_path):
    cfg = load_config(None, ["env_id=crisis-v0", "action_head=flat", "network=slot"])
    assert cfg.network == "slot"
    with pytest.raises(ConfigError, match="network"):
        load_config(None, ["env_id=nexus-v0", "action_head=flat", "network=slot"])


@pytest.mark.parametrize("edf_feature", [False, True])
def test_edf_prior_makes_a_fresh_policy_play_edf(edf_feature):
    """With a large prior a fresh slot scorer's argmax is `edf_actions` (random deadlines, some slots masked),
    with or without EDF's pick as an input."""
    env = nexus_jax.make("crisis-v0", task_source="random")
    p = env.default_params
    pol = ActorCritic(3, env.obs_dim, "flat", num_actions=12, hidden=8, layers=1, slot_layout=env.spec.slot_layout,
                      edf_prior=50.0, edf_feature=edf_feature)
    for seed in range(6):
        _, s = env.reset(jax.random.PRNGKey(seed))
        k1, k2 = jax.random.split(jax.random.PRNGKey(100 + seed))
        s = s.replace(step=jnp.int32(seed), tasks=s.tasks.replace(deadline_h=jax.random.uniform(k1, (3, 4), maxval=8.0)),
                      released=s.released | jax.random.bernoulli(k2, 0.5, (3, 4)))
        if seed == 5:  # nothing requestable: EDF waits
            s = s.replace(done=jnp.ones_like(s.done))
        o, m = get_obs(s, p)[None], avail_actions(s, p)[None]
        params = pol.init(jax.random.PRNGKey(seed), o, m)
        logp = jax.vmap(lambda a: pol.evaluate(params, o, m, jnp.full((1, 3), a))[0])(jnp.arange(12))  # (12, 1, 3)
        greedy = np.asarray(jnp.argmax(jnp.where(jnp.moveaxis(m, -1, 0), logp, -jnp.inf), 0))
        np.testing.assert_array_equal(greedy[0], np.asarray(edf_actions(s, m[0], p)))
    assert int(edf_actions(s, m[0], p)[0]) == 0
    with pytest.raises(ConfigError, match="'slot': .*needs network=slot"):
        load_config(None, ["env_id=crisis-v0", "action_head=flat", "slot.prior=2"])
    with pytest.raises(ConfigError, match="slot.prior"):
        load_config(None, ["env_id=crisis-v0", "action_head=flat", "network=slot", "slot.prior=-1"])
    with pytest.raises(ConfigError, match="'slot': .*needs network=slot"):
        load_config(None, ["env_id=crisis-v0", "action_head=flat", "slot.feature=true"])
    with pytest.raises(ConfigError, match="'edf_prior': renamed: use slot.prior"):  # an old run's key
        load_config(None, ["env_id=crisis-v0", "action_head=flat", "edf_prior=2"])


def test_unblocks_counts_dependents_whose_last_missing_prerequisite_it_is():
    """Default task set at reset: each raw batch makes its clean batch ready; clean 3 makes the advanced model
    ready; clean 1 and 2 make nothing ready alone (the baseline model needs both); after clean 2 is done,
    clean 1 does."""
    _, s = core.reset(jax.random.PRNGKey(0), CrisisParams.create())
    np.testing.assert_array_equal(np.asarray(unblocks(s)), [[1, 1, 1, 0], [0, 0, 1, 0], [0, 0, 0, 0]])
    s = s.replace(done=s.done.at[1, 1].set(True))
    assert int(unblocks(s)[1, 0]) == 1
