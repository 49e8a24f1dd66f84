"""GRPO pieces: group advantages against NumPy, the KL term at the reference, chunked = unchunked, a tiny rollout."""
import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax.training.train_state import TrainState

from train import pipeline
from train.config import GRPOConfig
from train.grpo import (GroupBatch, advantages, group_advantages, grpo_loss, grpo_update, kl_penalty, make_grpo_train,
                        rollout_groups, step_advantages)
from train.networks import ActorCritic
from train.pipeline_eval import summarise, verdicts


def test_group_advantages_match_numpy():
    rng = np.random.default_rng(0)
    R = rng.normal(3.0, 2.0, size=(5, 6, 2)).astype(np.float32)  # (B, G, A)
    expect = (R - R.mean(1, keepdims=True)) / (R.std(1, keepdims=True) + 1e-8)
    np.testing.assert_allclose(group_advantages(jnp.asarray(R)), expect, rtol=1e-5, atol=1e-5)
    pooled = (R - R.mean((1, 2), keepdims=True)) / (R.std((1, 2), keepdims=True) + 1e-8)
    np.testing.assert_allclose(group_advantages(jnp.asarray(R), pool_agents=True), pooled, rtol=1e-5, atol=1e-5)
    # A group whose members all tie gets zero advantage, not NaN.
    assert np.all(np.asarray(group_advantages(jnp.ones((1, 4, 1)))) == 0)


def test_step_advantages_match_numpy():
    rng = np.random.default_rng(1)
    r = rng.normal(size=(3, 7, 4, 2)).astype(np.float32)  # (B, T, G, A)
    gamma = 0.9
    rtg = np.zeros_like(r)
    c = np.zeros_like(r[:, 0])
    for t in reversed(range(r.shape[1])):
        c = r[:, t] + gamma * c
        rtg[:, t] = c
    expect = (rtg - rtg.mean(2, keepdims=True)) / (rtg.std(2, keepdims=True) + 1e-8)
    np.testing.assert_allclose(step_advantages(jnp.asarray(r), gamma), expect, rtol=1e-4, atol=1e-4)


def test_episode_advantages_broadcast_over_steps():
    rng = np.random.default_rng(2)
    r = rng.normal(size=(2, 5, 3, 1)).astype(np.float32)
    batch = GroupBatch(None, None, None, None, None, jnp.asarray(r), jnp.ones((2, 5, 3)), None)
    adv = np.asarray(advantages(batch, GRPOConfig(group_size=3, num_groups=2)))
    R = r.sum(1)
    expect = (R - R.mean(1, keepdims=True)) / (R.std(1, keepdims=True) + 1e-8)
    for t in range(5):
        np.testing.assert_allclose(adv[:, t], expect, rtol=1e-5, atol=1e-5)
    # invalid_penalty is charged per invalid action in the returns the advantages use
    invalid = rng.random(size=r.shape) < 0.3
    adv = np.asarray(advantages(batch._replace(invalid=jnp.asarray(invalid)),
                                GRPOConfig(group_size=3, num_groups=2, invalid_penalty=2.0)))
    R = (r - 2.0 * invalid).sum(1)
    np.testing.assert_allclose(adv[:, 0], (R - R.mean(1, keepdims=True)) / (R.std(1, keepdims=True) + 1e-8),
                               rtol=1e-5, atol=1e-5)


def _synthetic(B=4, T=3, G=2, A=2, D=5, K=6, seed=0):
    rng = np.random.default_rng(seed)
    pol = ActorCritic(A, D, "flat", num_actions=K, hidden=16, layers=1)
    obs = rng.normal(size=(B, T, G, A, D)).astype(np.float32)
    masks = rng.uniform(size=(B, T, G, A, K)) < 0.7
    masks[..., 0] = True
    act = np.zeros((B, T, G, A), np.int32)
    for idx in np.ndindex(B, T, G, A):
        act[idx] = rng.choice(np.flatnonzero(masks[idx]))
    params = pol.init(jax.random.PRNGKey(0), jnp.asarray(obs[0, 0]), jnp.asarray(masks[0, 0]))
    flat = lambda x: x.reshape((-1,) + x.shape[3:])  # noqa: E731
    logp, _ = pol.evaluate(params, jnp.asarray(flat(obs)), jnp.asarray(flat(masks)), jnp.asarray(flat(act)))
    logp = logp.reshape(B, T, G, A)
    batch = GroupBatch(jnp.asarray(obs), jnp.asarray(masks), jnp.asarray(act), logp, logp,
                       jnp.asarray(rng.normal(size=(B, T, G, A)).astype(np.float32)), jnp.ones((B, T, G)),
                       jnp.zeros((B, T, G, A), bool))
    adv = jnp.asarray(rng.normal(size=(B, T, G, A)).astype(np.float32))
    return pol, params, batch, adv


def test_kl_term_is_zero_when_policy_equals_reference():
    pol, params, batch, adv = _synthetic()
    cfg = GRPOConfig(group_size=2, num_groups=4, kl_coef=1.0)
    loss, aux = jax.jit(lambda p: grpo_loss(p, pol, batch, adv, cfg))(params)
    assert float(aux["kl_ref"]) == 0.0
    np.testing.assert_array_equal(kl_penalty(batch.log_prob, batch.log_prob), 0.0)
    # ... and its gradient vanishes there: the loss with and without the KL term has the same gradient.
    g1 = jax.jit(jax.grad(lambda p: grpo_loss(p, pol, batch, adv, cfg)[0]))(params)
    cfg0 = GRPOConfig(group_size=2, num_groups=4, kl_coef=0.0)
    g0 = jax.jit(jax.grad(lambda p: grpo_loss(p, pol, batch, adv, cfg0)[0]))(params)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-6), g1, g0)
    # A different reference gives a positive KL.
    shifted = batch._replace(ref_log_prob=batch.log_prob - 0.3)
    assert float(jax.jit(lambda p: grpo_loss(p, pol, shifted, adv, cfg))(params)[1]["kl_ref"]) > 0


def test_chunked_gradients_equal_unchunked():
    pol, params, batch, adv = _synthetic()
    outs = []
    for chunk in (0, 1):
        cfg = GRPOConfig(group_size=2, num_groups=4, num_minibatches=1, update_epochs=1, group_chunk=chunk, lr=1e-2)
        ts = TrainState.create(apply_fn=None, params=params, tx=optax.sgd(1.0))
        ts, _ = grpo_update(ts, batch, adv, jax.random.PRNGKey(0), pol, cfg)
        outs.append(ts.params)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6), *outs)


TINY_ENV = dict(num_agents=2, amount_grid=(0.0, 5.0, 20.0), ledger_size=4, obs_ledger_events=2, max_steps=6)


@pytest.mark.slow
def test_tiny_grpo_rollout_groups_share_resets_and_trains():
    from train.bc import UnmaskedEnv
    from train.learner_env import LearnerEnv

    env = UnmaskedEnv.wrap(LearnerEnv.make("nexus-v0", TINY_ENV))
    pol = ActorCritic(env.num_learners, env.obs_dim, "factored", env.nvec, hidden=16, layers=1)
    obs, state = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(0), 2))
    params = pol.init(jax.random.PRNGKey(1), obs, jax.vmap(env.masks)(state))
    cfg = GRPOConfig(group_size=3, num_groups=2, num_updates=1, num_minibatches=1, update_epochs=1, group_chunk=1)
    ts = TrainState.create(apply_fn=None, params={"actor": params["actor"]}, tx=optax.adam(1e-3))

    @jax.jit
    def one_update(ts, key):  # one compilation: rollout, advantages, clipped + KL update
        batch = rollout_groups(ts.params, ts.params, key, env, pol, cfg)
        ts, aux = grpo_update(ts, batch, advantages(batch, cfg), key, pol, cfg)
        return ts, batch, aux

    ts, batch, aux = one_update(ts, jax.random.PRNGKey(3))
    assert np.isfinite(float(aux["kl_ref"])) and float(aux["kl_ref"]) >= 0
    o = np.asarray(batch.obs)  # (B, T, G, A, D)
    assert o.shape[:3] == (2, 6, 3)
    np.testing.assert_array_equal(o[:, 0, 0], o[:, 0, 1])  # same reset key inside a group
    assert not np.array_equal(o[0, 0], o[1, 0])  # different groups differ
    # Rollout KL to itself is exactly zero (reference = behaviour at collection time).
    np.testing.assert_allclose(np.asarray(batch.log_prob), np.asarray(batch.ref_log_prob), atol=1e-5)
    assert make_grpo_train(cfg, env, pol) is not None


def test_pipeline_notes_pair_completion_and_trust_with_bc():
    """The pipeline's notes give each trained stage minus BC on the same episodes for trade completion and trust."""
    rng = np.random.default_rng(0)
    keys = ("return", "invalid_rate", "trade_completion", "signals_honoured", "signals_broken", "trust")
    bc = {k: rng.random(50) for k in keys}
    raw = {"random": bc, "BC": bc, "GRPO": bc, "PPO": {**bc, "trade_completion": bc["trade_completion"] + 0.1,
                                                       "trust": bc["trust"] - 0.02}}
    timing = {"GRPO": {"env_steps": 1}, "PPO": {"env_steps": 1}, "equal_wall": "-"}
    notes = verdicts({s: summarise(v) for s, v in raw.items()}, timing, raw)
    assert "PPO - BC, paired on the same episodes: trade completion +10.00% ± 0.00%, mean trust in learner -0.020 ± 0.000" in notes
    assert "GRPO - BC, paired on the same episodes: trade completion +0.00% ± 0.00%, mean trust in learner +0.000 ± 0.000" in notes


@pytest.mark.slow
def test_pipeline_trains_the_entity_network_end_to_end(tmp_path):
    """network=entity through every stage (BC with a DAgger round, GRPO, PPO, the evaluation) on a self-play env:
    every stage is in the table with finite numbers, BC cut the random start's invalid-action rate, and the
    network is recorded."""
    env = [f"env.{k}={json.dumps(v).replace(' ', '')}" for k, v in TINY_ENV.items()]
    assert pipeline.main(env + [
        "env_id=nexus-selfplay-v2", "network=entity", "name=pl", f"run_dir={tmp_path}", "hidden_size=16",
        "eval_episodes=8", "bc.num_envs=4", "bc.num_steps=6", "bc.epochs=100", "bc.lr=0.01", "bc.num_minibatches=2",
        "bc.dagger_rounds=1", "bc.dagger_epochs=2", "grpo.group_size=2", "grpo.num_groups=2", "grpo.num_updates=2",
        "grpo.update_epochs=1", "grpo.num_minibatches=1", "ppo.num_envs=2", "ppo.num_steps=6", "ppo.update_epochs=1",
        "ppo.num_minibatches=1"]) == 0
    result = json.loads((tmp_path / "pl" / "pipeline.json").read_text())
    table = result["table"]
    assert list(table)[:4] == ["random", "BC", "GRPO", "PPO"]  # then the scripted baselines
    assert all(np.isfinite(row[k]["mean"]) for row in table.values() for k in row)
    assert table["BC"]["invalid_rate"]["mean"] < table["random"]["invalid_rate"]["mean"]
    assert result["config"]["network"] == result["config"]["ppo"]["network"] == "entity"
    assert len(result["bc_dagger"]["dagger_policy_return"]) == 1
