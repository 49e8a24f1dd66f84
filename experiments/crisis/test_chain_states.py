"""The crisis study's chain analysis (experiments/crisis/chain_states.py) and the dependency-aware rule as the
studies play it: `edf_chain` starts the unblocked chain, its prior steers a fresh slot scorer, the chain states
of the fixed evaluation, and the snapshot curve."""
import jax
import numpy as np
import pytest

import nexus_jax
from nexus_jax.envs.crisis import FIRST_REQUEST, reset
from train.config import ConfigError, load_config
from experiments.crisis import chain_states as crisis_chain_states, seeds as crisis_seeds
from experiments.crisis.evaluate import CRISIS_PPO_CONFIG, FIXED_ENV, HOLDOUT_ENV, edf, make_rollout, observation_env, ppo_policy
from train.networks import ActorCritic
from train.snapshots import snapshot_updates
from experiments.crisis.headroom import RULES

pytestmark = pytest.mark.slow  # a study's reproduction: the full tier (python -m pytest -m slow; CI runs it)

edf_chain = RULES["edf_chain"]  # the library rule as the crisis studies play it (a batch of envs)


def test_edf_chain_starts_the_unblocked_chain_on_the_default_set():
    """`edf_chain` at the first step of the fixed evaluation: seat 0 requests batch 3 (slot 2),
    where EDF requests batch 1 (slot 0)."""
    env = nexus_jax.make("crisis-v0", crisis_kind=[0] * 4)
    p = env.default_params
    obs, s = jax.vmap(lambda k: reset(k, p))(jax.random.split(jax.random.PRNGKey(0), 1))
    masks = jax.vmap(lambda st: env.avail_actions_array(st, p))(s)
    assert int(edf(None, None, obs, s, masks, p)[0, 0]) == FIRST_REQUEST
    assert int(edf_chain(None, None, obs, s, masks, p)[0, 0]) == FIRST_REQUEST + 2 * 2


def test_edf_chain_prior_makes_a_fresh_policy_play_edf_chain():
    """With a large prior on `edf_chain` (read from the observation's features) a fresh slot scorer's argmax
    plays the state-based rule's episodes exactly: the same reward on holdout and fixed episodes."""
    env = nexus_jax.make("crisis-v0", info_mode="full", task_source="random", crisis_source="random",
                         dependency_features=True)
    fixed = nexus_jax.make("crisis-v0", crisis_kind=[0] * 4, dependency_features=True).default_params
    pol = ActorCritic(3, env.obs_dim, "flat", num_actions=12, hidden=8, layers=1, slot_layout=env.spec.slot_layout,
                      edf_prior=50.0, prior_rule="edf_chain")
    obs, st = env.reset_env(jax.random.PRNGKey(0), env.default_params)
    params = pol.init(jax.random.PRNGKey(1), obs[None], env.avail_actions_array(st, env.default_params)[None])
    net, rule = make_rollout(env, ppo_policy(pol, greedy=True), 24), make_rollout(env, edf_chain, 24)
    for p in (env.default_params, fixed):
        a = np.asarray(net(params, p, jax.random.PRNGKey(5))["total_reward"])
        b = np.asarray(rule(None, p, jax.random.PRNGKey(5))["total_reward"])
        np.testing.assert_array_equal(a, b)
    assert a[0] == pytest.approx(177.75)  # the fixed evaluation: the best static order's reward


def test_edf_chain_prior_needs_the_dependency_features():
    with pytest.raises(ConfigError, match="slot.rule"):
        load_config(CRISIS_PPO_CONFIG, ["slot.rule=edf_chain", "slot.prior=1.0"])
    cfg = load_config(CRISIS_PPO_CONFIG, ["slot.rule=edf_chain", "slot.prior=1.0", "env.dependency_features=true"])
    assert cfg.slot.rule == "edf_chain" and cfg.env["dependency_features"] is True
    # what the evaluators (experiments.crisis.evaluate, .seeds, .headroom --learners) give every evaluation env
    assert observation_env(cfg) == {"dependency_features": True}
    assert observation_env(load_config(CRISIS_PPO_CONFIG, [])) == {}


def test_chain_states_on_the_fixed_evaluation():
    """`experiments.crisis.chain_states`: the default set has one chain state per episode (the loader at step 0), and
    taking `edf_chain`'s action there is worth +3.0, +0.3 of it to the loader's own return."""
    env = nexus_jax.make("crisis-v0", info_mode="full", **HOLDOUT_ENV, dependency_features=True)
    fixed = nexus_jax.make("crisis-v0", **FIXED_ENV, dependency_features=True).default_params
    r = crisis_chain_states.scenario(env, fixed, 42, 4, None)
    assert r["episodes_with_chain_state"] == 4 and r["chain_seat_steps_per_episode"] == 1.0
    assert r["first_chain_step_mean"] == 0.0
    assert r["deviation_total"][0] == pytest.approx(3.0, abs=1e-3)
    assert r["deviation_own"][0] == pytest.approx(0.3, abs=1e-3)


def test_rewired_fixed_set_moves_the_chain_to_batch_2():
    """The rewired default set: `edf_chain` starts with batch 2 (slot 1), EDF still with batch 1."""
    p = crisis_chain_states.rewired_fixed(dependency_features=True)
    env = nexus_jax.make("crisis-v0", info_mode="full", dependency_features=True)
    _, st = reset(jax.random.PRNGKey(0), p)
    batch = jax.tree.map(lambda x: x[None], st)
    masks = env.avail_actions_array(st, p)[None]
    assert int(edf_chain(None, None, None, batch, masks, p)[0, 0]) == FIRST_REQUEST + 2
    assert int(edf(None, None, None, batch, masks, p)[0, 0]) == FIRST_REQUEST


def test_snapshots_and_the_chain_state_curve(tmp_path, monkeypatch):
    """`experiments.crisis.seeds --snapshot-every`: the training is the same with snapshots (final params
    equal to float32 rounding: the snapshot program is another XLA program, whose fusions may round a
    reduction differently on another CPU; measured 1 ulp on one CI machine, bitwise here), the last snapshot is the final params, and `experiments.crisis.chain_states.curve` reads
    every snapshot at the fixed evaluation's chain state (slot 0 = the fresh policy's probabilities)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("experiments.crisis.seeds.enable_compilation_cache", lambda *a, **k: None)
    tiny = ["num_envs=4", "num_steps=8", "total_timesteps=64", "num_minibatches=2", "update_epochs=1", "hidden_size=8",
            "num_layers=1", "network=slot", "slot.prior=0.5", "slot.feature=true", "env.dependency_features=true"]
    cfg = load_config(CRISIS_PPO_CONFIG, tiny)
    plain = crisis_seeds.train_runs(cfg, 2)[1]
    assert crisis_seeds.main(["--seeds", "2", "--episodes", "2", "--name", "s", "--snapshot-every", "1"] + tiny) == 0
    policy, params, _, _ = crisis_seeds.load_runs("runs/s")
    for a, b in zip(jax.tree.leaves(plain), jax.tree.leaves(params)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-8)
    pol, snaps, updates, obs_env = crisis_seeds.load_snapshots("runs/s")
    assert updates == snapshot_updates(2, 1) == [0, 1, 2] and obs_env == {"dependency_features": True}
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(snaps)):
        assert b.shape[:2] == (2, 3)
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b)[:, -1])
    env = nexus_jax.make("crisis-v0", info_mode="full", **HOLDOUT_ENV, dependency_features=True)
    fixed = nexus_jax.make("crisis-v0", **FIXED_ENV, dependency_features=True).default_params
    c = crisis_chain_states.curve(env, fixed, 42, 2, pol, snaps, updates)
    assert c["chain_states"] == 2 and c["updates"] == [0, 1, 2] and len(c["runs"]) == 2
    first = jax.tree.map(lambda x: x[0, 0], snaps)
    r = crisis_chain_states.play(env, fixed, jax.random.PRNGKey(42), 2, policy=pol, policy_params=first)
    assert c["runs"][0][0]["p_chain"] == pytest.approx(float(r["p_chain"]) / 2, rel=1e-5)
    assert all(0 <= x["p_chain"] <= 1 and x["argmax_is_chain"] in (0.0, 1.0) for run in c["runs"] for x in run)
    assert len(crisis_chain_states.curve_lines({"fixed": c})) == 4 + 3
