"""PPO pieces one at a time: GAE and the loss against NumPy, a checkpoint round trip, a tiny training run."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from train.checkpoint import load_params, save_params
from train.config import load_config
from train.networks import ActorCritic
from train.ppo import Transition, compute_gae, make_env, make_sweep, ppo_loss


def numpy_gae(rewards, values, dones, last_value, gamma, lam):
    T = len(rewards)
    adv = np.zeros_like(rewards)
    gae = np.zeros_like(last_value)
    for t in reversed(range(T)):
        next_value = last_value if t == T - 1 else values[t + 1]
        nd = 1.0 - dones[t]
        delta = rewards[t] + gamma * next_value * nd - values[t]
        gae = delta + gamma * lam * nd * gae
        adv[t] = gae
    return adv, adv + values


def test_gae_matches_a_hand_computation():
    rng = np.random.default_rng(0)
    T, E, A = 13, 5, 2
    r = rng.normal(size=(T, E, A)).astype(np.float32)
    v = rng.normal(size=(T, E, A)).astype(np.float32)
    d = (rng.uniform(size=(T, E, A)) < 0.2).astype(np.float32)
    last = rng.normal(size=(E, A)).astype(np.float32)
    adv, ret = compute_gae(jnp.asarray(r), jnp.asarray(v), jnp.asarray(d), jnp.asarray(last), 0.97, 0.9)
    adv_np, ret_np = numpy_gae(r, v, d, last, 0.97, 0.9)
    np.testing.assert_allclose(adv, adv_np, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ret, ret_np, rtol=1e-5, atol=1e-5)


def test_gae_two_steps_by_hand():
    # r = [1, 2], V = [0.5, 1.0], episode ends after step 0, bootstrap 3.0 after step 1.
    adv, _ = compute_gae(jnp.array([1.0, 2.0]), jnp.array([0.5, 1.0]), jnp.array([1.0, 0.0]), jnp.array(3.0), 0.9, 0.8)
    a1 = 2.0 + 0.9 * 3.0 - 1.0
    a0 = 1.0 - 0.5  # nothing bootstrapped across the episode end
    np.testing.assert_allclose(adv, [a0, a1], rtol=1e-6)


def _np_mlp(p, x):
    h = np.tanh(x @ p["trunk_0"]["kernel"] + p["trunk_0"]["bias"])
    return h @ p["Dense_0"]["kernel"] + p["Dense_0"]["bias"]


def test_ppo_loss_matches_numpy_on_a_fixed_batch():
    cfg = load_config(overrides=["clip_eps=0.2", "vf_coef=0.5", "ent_coef=0.01", "normalize_advantages=true"])
    B, A, D, K = 32, 2, 4, 5
    pol = ActorCritic(A, D, "flat", num_actions=K, hidden=8, layers=1, share_params=True)
    rng = np.random.default_rng(1)
    obs = rng.normal(size=(B, A, D)).astype(np.float32)
    masks = rng.uniform(size=(B, A, K)) < 0.7
    masks[..., 0] = True
    action = np.array([[rng.choice(np.flatnonzero(masks[b, a])) for a in range(A)] for b in range(B)])
    params = pol.init(jax.random.PRNGKey(0), jnp.asarray(obs), jnp.asarray(masks))
    old_logp = rng.normal(-1.5, 0.3, size=(B, A)).astype(np.float32)
    old_v = rng.normal(size=(B, A)).astype(np.float32)
    adv = rng.normal(size=(B, A)).astype(np.float32)
    tgt = rng.normal(size=(B, A)).astype(np.float32)
    zeros = np.zeros((B, A), np.float32)
    batch = Transition(jnp.asarray(obs), jnp.asarray(masks), jnp.asarray(action), jnp.asarray(old_logp),
                       jnp.asarray(old_v), zeros, zeros, zeros, zeros)
    loss, aux = ppo_loss(params, pol, batch, jnp.asarray(adv), jnp.asarray(tgt), cfg)

    # NumPy: the same network by hand (shared params see obs + one-hot learner id).
    p = jax.tree.map(np.asarray, params)
    x = np.concatenate([obs, np.broadcast_to(np.eye(A, dtype=np.float32), (B, A, A))], -1)
    logits = np.where(masks, _np_mlp(p["actor"]["params"], x), -1e9)
    logits = logits - logits.max(-1, keepdims=True)
    logsm = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    logp = np.take_along_axis(logsm, action[..., None], -1)[..., 0]
    probs = np.exp(logsm)
    entropy = -(probs * np.where(masks, logsm, 0.0)).sum(-1)
    value = _np_mlp(p["critic"]["params"], x)[..., 0]
    eps = cfg.clip_eps
    v_clip = old_v + np.clip(value - old_v, -eps, eps)
    v_loss = 0.5 * np.maximum((value - tgt) ** 2, (v_clip - tgt) ** 2).mean()
    a = (adv - adv.mean()) / (adv.std() + 1e-8)
    ratio = np.exp(logp - old_logp)
    pg = -np.minimum(ratio * a, np.clip(ratio, 1 - eps, 1 + eps) * a).mean()
    expected = pg + cfg.vf_coef * v_loss - cfg.ent_coef * entropy.mean()

    np.testing.assert_allclose(aux["value_loss"], v_loss, rtol=1e-4)
    np.testing.assert_allclose(aux["actor_loss"], pg, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(aux["entropy"], entropy.mean(), rtol=1e-4)
    np.testing.assert_allclose(loss, expected, rtol=1e-4, atol=1e-6)


TINY = ["env.ledger_size=8", "env.obs_ledger_events=2",
        "env.max_steps=20", "num_envs=16", "num_steps=20", "total_timesteps=9600", "update_epochs=4",
        "num_minibatches=2", "hidden_size=32", "num_layers=1", "lr=0.003", "ent_coef=0.0", "progress=false"]


@pytest.fixture(scope="module")
def tiny_sweep():
    """2 seeds x 2 learning rates of a tiny Nexus run, in one compilation."""
    cfg = load_config(overrides=TINY)
    env = make_env(cfg)
    sweep = make_sweep(cfg, env=env)
    out = jax.block_until_ready(sweep(jax.random.split(jax.random.PRNGKey(0), 2), jnp.array([3e-3, 1e-2])))
    return cfg, env, sweep, out


def test_sweep_over_seeds_and_learning_rates_compiles_once(tiny_sweep):
    cfg, _, sweep, out = tiny_sweep
    assert out["metrics"]["episode_return"].shape == (2, 2, cfg.num_updates)
    sweep(jax.random.split(jax.random.PRNGKey(1), 2), jnp.array([1e-3, 2e-3]))
    assert sweep._cache_size() == 1
    assert np.isfinite(np.asarray(out["metrics"]["value_loss"])).all()


def test_tiny_training_improves_return_over_its_start(tiny_sweep):
    cfg, _, _, out = tiny_sweep
    ret = np.asarray(out["metrics"]["episode_return"])  # (lrs, seeds, updates)
    k = max(2, cfg.num_updates // 5)
    start, end = ret[..., :k].mean(), ret[..., -k:].mean()
    assert end > start + 0.5, (start, end)


@pytest.mark.slow
def test_checkpoint_round_trip(tiny_sweep, tmp_path):
    cfg, env, _, out = tiny_sweep
    params = jax.tree.map(lambda x: x[0, 0], out["params"])
    pol = ActorCritic.from_config(cfg, env)
    save_params(params, tmp_path / "ckpt.msgpack")
    template = jax.tree.map(jnp.zeros_like, params)
    restored = load_params(template, tmp_path / "ckpt.msgpack")
    jax.tree.map(lambda a, b: np.testing.assert_array_equal(np.asarray(a), np.asarray(b)), params, restored)
    @jax.jit
    def act(p, key):
        obs, state = jax.vmap(env.reset)(jax.random.split(key, 3))
        return pol.act(p, obs, jax.vmap(env.masks)(state), key)[0]

    a1, a2 = act(params, jax.random.PRNGKey(1)), act(restored, jax.random.PRNGKey(1))
    np.testing.assert_array_equal(a1, a2)
