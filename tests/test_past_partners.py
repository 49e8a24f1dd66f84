"""Past partners (train/past_partners.py): the draw, the rollout's mixing of actions, the loss's weighting, the refusals."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from train import past_partners
from train.config import ConfigError, load_config
from train.networks import ActorCritic
from train.ppo import Transition, init_runner, make_env, make_train, ppo_loss, rollout
from train.models import make_policy

TINY = ["env.ledger_size=8", "env.obs_ledger_events=2", "env.max_steps=10", "num_envs=4", "num_steps=3",
        "total_timesteps=24", "num_minibatches=1", "hidden_size=8", "num_layers=1", "progress=false",
        "env_id=nexus-selfplay-v2"]


def test_the_draw_waits_for_the_first_snapshot_then_picks_a_taken_one():
    snaps = {"w": jnp.arange(5.0)}  # slot s holds s: slot 0 the initialisation, slots 1..4 every 2 updates
    key = jax.random.PRNGKey(0)
    draw = jax.jit(lambda k, i: past_partners.draw(k, snaps, i, 2, 64, 16, 0.25))
    for i in (0, 1):
        assert not bool(draw(key, i).frozen.any())
    for i, taken in ((2, 1), (3, 1), (5, 2), (9, 4), (40, 4)):
        slots = {float(draw(k, i).params["w"]) for k in jax.random.split(key, 64)}
        assert slots == set(map(float, range(1, taken + 1)))  # every taken slot after update 0, none other
    share = float(draw(key, 6).frozen.mean())
    assert abs(share - 0.25) < 0.05  # 1024 seats, each frozen with probability 0.25


def test_mix_takes_the_past_action_on_frozen_seats_for_both_action_formats():
    frozen = jnp.array([[True, False], [False, True]])
    flat = past_partners.mix(frozen, jnp.zeros((2, 2), jnp.int32), jnp.ones((2, 2), jnp.int32))
    assert flat.tolist() == [[1, 0], [0, 1]]
    rows = past_partners.mix(frozen, jnp.zeros((2, 2, 5), jnp.int32), jnp.ones((2, 2, 5), jnp.int32))
    assert rows[..., 0].tolist() == [[1, 0], [0, 1]] and bool((rows == rows[..., :1]).all())


def _loss_inputs(seed=1):
    cfg = load_config(overrides=["clip_eps=0.2", "vf_coef=0.5", "ent_coef=0.01", "normalize_advantages=true"])
    B, A, D, K = 32, 2, 4, 5
    pol = ActorCritic(A, D, "flat", num_actions=K, hidden=8, layers=1, share_params=True)
    rng = np.random.default_rng(seed)
    obs = jnp.asarray(rng.normal(size=(B, A, D)), jnp.float32)
    masks = jnp.ones((B, A, K), bool)
    action = jnp.asarray(rng.integers(0, K, size=(B, A)))
    params = pol.init(jax.random.PRNGKey(0), obs, masks)
    f = lambda *s: jnp.asarray(rng.normal(size=s), jnp.float32)  # noqa: E731
    batch = Transition(obs, masks, action, f(B, A) - 1.5, f(B, A), f(B, A), f(B, A), f(B, A), f(B, A))
    return cfg, pol, params, batch, f(B, A), f(B, A)


def test_the_loss_with_every_seat_learning_is_the_plain_loss():
    cfg, pol, params, batch, adv, tgt = _loss_inputs()
    plain = ppo_loss(params, pol, batch, adv, tgt, cfg)
    weighted = ppo_loss(params, pol, batch._replace(learn=jnp.ones(adv.shape, bool)), adv, tgt, cfg)
    for a, b in zip(jax.tree.leaves(plain), jax.tree.leaves(weighted)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_past_partner_samples_weigh_nothing_in_the_loss_and_its_gradient():
    """The loss over (learning + past) samples equals the plain loss over the learning samples alone, and
    a past sample's data, however extreme (a log-probability that would overflow the ratio), changes nothing."""
    cfg, pol, params, batch, adv, tgt = _loss_inputs()
    learn = jnp.zeros(adv.shape, bool).at[:16].set(True)
    grad = jax.grad(lambda p, b, a: ppo_loss(p, pol, b, a, tgt, cfg)[0])
    mixed = batch._replace(learn=learn)
    wild = mixed._replace(log_prob=jnp.where(learn, batch.log_prob, -1e4), value=jnp.where(learn, batch.value, 1e4))
    wild_adv = jnp.where(learn, adv, 1e3)
    g0, g1 = grad(params, mixed, adv), grad(params, wild, wild_adv)
    for a, b in zip(jax.tree.leaves(g0), jax.tree.leaves(g1)):
        assert np.isfinite(np.asarray(b)).all()
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    head = jax.tree.map(lambda x: x[:16], batch)
    np.testing.assert_allclose(ppo_loss(params, pol, mixed, adv, tgt, cfg)[0],
                               ppo_loss(params, pol, head, adv[:16], tgt[:16], cfg)[0], rtol=1e-5)


def test_the_rollout_plays_frozen_seats_with_the_past_params():
    """The real data path: a self-play rollout where the frozen seats act with other params. Each step's
    actions are those the current / past params sample with the step's act key, and `learn` marks the rest."""
    cfg = load_config(overrides=TINY + ["past_partners=0.5"])
    env = make_env(cfg)
    policy = make_policy(cfg, env)
    runner = init_runner(jax.random.PRNGKey(3), cfg.lr, cfg, env, policy)
    fresh = policy.init(jax.random.PRNGKey(99), runner.obs, jax.vmap(env.masks)(runner.env_state))
    other = jax.tree.map(lambda x: 100.0 * x, fresh)  # peaked heads: a fresh init samples like the current one
    frozen = jnp.zeros((cfg.num_envs, env.num_learners), bool).at[::2, 1::2].set(True)
    past = past_partners.PastPartners(other, frozen)
    _, traj = jax.jit(lambda r: rollout(r, env, policy, cfg.num_steps, None, past))(runner)

    _, k_act, _ = jax.random.split(runner.rng, 3)  # env_step's split of the first step
    masks0 = jax.tree.map(lambda m: m[0], traj.masks)
    now = policy.act(runner.train_state.params, traj.obs[0], masks0, k_act)[0]
    then = policy.act(other, traj.obs[0], masks0, k_act)[0]
    np.testing.assert_array_equal(traj.action[0], jnp.where(frozen[..., None], then, now))
    assert bool((then != now)[frozen].any())  # the test can tell the two apart
    np.testing.assert_array_equal(traj.learn, jnp.broadcast_to(~frozen, traj.learn.shape))


def test_the_config_and_the_trainer_refuse_what_it_cannot_do():
    for extra, match in ((["past_partners=1.0"], "must lie in"), (["past_partners=-0.1"], "must lie in"),
                         (["past_partners=0.3", "snapshot_every=0"], "snapshot_every"),
                         (["past_partners=0.3", "memory=gru", "num_minibatches=1"], "memory=none")):
        with pytest.raises(ConfigError, match=match):
            load_config(overrides=TINY + extra)
    rng = jax.random.PRNGKey(0)
    with pytest.raises(ValueError, match="at least two learner seats"):  # named by the config, before tracing
        jax.eval_shape(make_train(load_config(overrides=TINY[:-1] + ["past_partners=0.3"]), snapshot_every=1), rng)
    cfg = load_config(overrides=TINY + ["past_partners=0.3"])
    with pytest.raises(ValueError, match="needs snapshot_every"):  # no snapshot pool (train.pipeline's PPO stage)
        jax.eval_shape(make_train(cfg), rng)
    out = jax.eval_shape(make_train(cfg, snapshot_every=1), rng)
    assert out["metrics"]["episode_return"].shape == (cfg.num_updates,)
