"""crisis-v0's opt-in dependency features (issue 21, `nexus_jax.envs.crisis.dependencies`): the transitive
closure against a breadth-first search, the default task set's values by hand, what a finished task changes,
the observation layout with the option on and off, the option's validation, and the hand-written rule that
reads them (`nexus_jax.envs.crisis.edf_chain`) and the same rule as the slot scorer's prior (`prior_rule`)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nexus_jax
from nexus_jax.envs.crisis import FIRST_REQUEST, CrisisParams, core
from nexus_jax.envs.crisis.dependencies import DEPENDENCY_FEATURES, closure, dependency_features
from nexus_jax.envs.crisis.observation import GLOBAL_FEATURES, TASK_FEATURES, get_obs
from nexus_jax.envs.crisis.tasks import generate_task_set
from train.config import ConfigError, load_config
from experiments.crisis import chain_states as crisis_chain_states, seeds as crisis_seeds
from experiments.crisis.evaluate import CRISIS_PPO_CONFIG, FIXED_ENV, HOLDOUT_ENV, edf, make_rollout, observation_env, ppo_policy
from experiments.crisis.headroom import RULES
from train.networks import ActorCritic
from train.snapshots import snapshot_updates

edf_chain = RULES["edf_chain"]  # the library rule as the crisis studies play it (a batch of envs)


def _all_released(params):
    _, s = core.reset(jax.random.PRNGKey(0), params)
    return s.replace(released=s.tasks.exists)


def test_closure_matches_breadth_first_search():
    p = CrisisParams.create(task_source="random", max_tasks=5)
    for seed in range(5):
        deps = np.asarray(generate_task_set(jax.random.PRNGKey(seed), p).deps)
        want = np.zeros_like(deps)
        for t in range(len(deps)):
            todo = list(np.flatnonzero(deps[t]))
            while todo:
                u = todo.pop()
                if not want[t, u]:
                    want[t, u] = True
                    todo += list(np.flatnonzero(deps[u]))
        np.testing.assert_array_equal(np.asarray(closure(jnp.asarray(deps))), want)


def test_default_task_set_by_hand():
    """Seat 0: raw batches 1-3; seat 1: clean batches 1-3 (clean k needs raw k); seat 2: baseline (needs clean 1
    and 2), advanced (needs clean 3), validate (needs both models). Only batch 3 heads a chain nothing else blocks."""
    p = CrisisParams.create()
    f = np.asarray(dependency_features(_all_released(p), p)) * np.array([12, 12, 8, 8, 12])
    dependents, unlocks, unlock_h, chain_h, idle = (f[..., i] for i in range(DEPENDENCY_FEATURES))
    np.testing.assert_allclose(dependents[:, :3], [[3, 3, 3], [2, 2, 2], [1, 1, 0]])
    np.testing.assert_allclose(unlocks[:, :3], [[1, 1, 2], [0, 0, 1], [0, 0, 0]])
    np.testing.assert_allclose(unlock_h[0, :3], [50 / 60, 50 / 60, (45 + 75) / 60], rtol=1e-5)
    np.testing.assert_allclose(unlock_h[1, 2], 75 / 60, rtol=1e-5)
    # chain: raw 1 -> clean 1 -> baseline -> validate = 45 + 50 + 90 + 30 minutes
    np.testing.assert_allclose(chain_h[0, :3], [215 / 60, 215 / 60, 190 / 60], rtol=1e-5)
    np.testing.assert_allclose(chain_h[2, :3], [2.0, 105 / 60, 0.5], rtol=1e-5)
    assert f[0, 3, :3].sum() == 0  # the urgent slot: nothing depends on it
    np.testing.assert_allclose(idle[:, :3], [[1, 1, 2], [0, 0, 1], [0, 0, 0]])  # seats 1 and 2 have nothing ready
    busy = _all_released(p)
    busy = busy.replace(running_slot=busy.running_slot.at[1].set(0))  # seat 1 runs clean 1: not idle
    f = np.asarray(dependency_features(busy, p)) * 12
    np.testing.assert_allclose(f[0, :3, 4], [0, 0, 1])  # only batch 3's chain reaches the idle seat 2


def test_finished_work_changes_the_features():
    p = CrisisParams.create()

    def scale(s):  # counts and hours, rounded to the minute
        return np.rint(np.asarray(dependency_features(s, p)) * np.array([12, 12, 8, 8, 12]) * 60) / 60

    s = _all_released(p).replace(done=_all_released(p).done.at[0, 1].set(True))  # raw batch 2 done
    f = scale(s)
    assert f[0, 1].sum() == 0  # a done task has no features
    assert f[0, 0, 1] == 1  # raw 1 still unlocks only clean 1: baseline also waits on clean 2
    s = s.replace(done=s.done.at[1, 1].set(True))
    f = scale(s)
    assert f[0, 0, 1] == 2 and f[1, 0, 1] == 1  # with clean 2 done, raw 1's chain unlocks the baseline
    half = s.replace(progress_min=s.progress_min.at[2, 2].set(15.0))  # validate: 15 of 30 minutes left
    assert float(dependency_features(half, p)[2, 2, 3]) * 8 == pytest.approx(0.25)


def test_observation_layout_on_and_off():
    off = nexus_jax.make("crisis-v0")
    on = nexus_jax.make("crisis-v0", dependency_features=True)
    K = 4
    assert on.obs_dim == off.obs_dim + K * DEPENDENCY_FEATURES
    assert off.spec.slot_layout[2] == TASK_FEATURES and on.spec.slot_layout[2] == TASK_FEATURES + DEPENDENCY_FEATURES
    s = _all_released(on.default_params)
    a, b = np.asarray(get_obs(s, off.default_params)), np.asarray(get_obs(s, on.default_params))
    off_slots = a[:, GLOBAL_FEATURES + 3:GLOBAL_FEATURES + 3 + K * TASK_FEATURES].reshape(3, K, TASK_FEATURES)
    F = TASK_FEATURES + DEPENDENCY_FEATURES
    on_slots = b[:, GLOBAL_FEATURES + 3:GLOBAL_FEATURES + 3 + K * F].reshape(3, K, F)
    np.testing.assert_array_equal(on_slots[..., :TASK_FEATURES], off_slots)
    np.testing.assert_allclose(on_slots[..., TASK_FEATURES:], np.asarray(dependency_features(s, on.default_params)))
    np.testing.assert_array_equal(b[:, GLOBAL_FEATURES + 3 + K * F:], a[:, GLOBAL_FEATURES + 3 + K * TASK_FEATURES:])


def test_option_is_validated():
    with pytest.raises(TypeError, match="dependency_features"):
        CrisisParams.create(dependency_features=1)


def test_edf_chain_starts_the_unblocked_chain_on_the_default_set():
    """`edf_chain` at the first step of the fixed evaluation: seat 0 requests batch 3 (slot 2),
    where EDF requests batch 1 (slot 0)."""
    env = nexus_jax.make("crisis-v0", crisis_kind=[0] * 4)
    p = env.default_params
    obs, s = jax.vmap(lambda k: core.reset(k, p))(jax.random.split(jax.random.PRNGKey(0), 1))
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
    _, st = core.reset(jax.random.PRNGKey(0), p)
    batch = jax.tree.map(lambda x: x[None], st)
    masks = env.avail_actions_array(st, p)[None]
    assert int(edf_chain(None, None, None, batch, masks, p)[0, 0]) == FIRST_REQUEST + 2
    assert int(edf(None, None, None, batch, masks, p)[0, 0]) == FIRST_REQUEST


def test_snapshots_and_the_chain_state_curve(tmp_path, monkeypatch):
    """`experiments.crisis.seeds --snapshot-every`: the training is the same with snapshots (final params
    bit for bit), the last snapshot is the final params, and `experiments.crisis.chain_states.curve` reads
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
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
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
