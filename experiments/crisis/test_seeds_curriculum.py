"""The crisis study's seeds, departures, curriculum and headroom scripts end to end at tiny sizes."""
import json

import jax
import jax.numpy as jnp
import numpy as np

import nexus_jax
import pytest
from nexus_jax.envs.crisis import negotiation_on
from experiments.crisis import curriculum as crisis_curriculum, seeds as crisis_seeds
from experiments.crisis.curriculum import LevelEnv, chunk_levels
from experiments.crisis.evaluate import FIXED_ENV, HOLDOUT_ENV, edf, make_rollout
from experiments.crisis.headroom import all_orders, task_outcomes
from train.networks import ActorCritic

pytestmark = pytest.mark.slow  # a study's reproduction: the full tier (python -m pytest -m slow; CI runs it)


def test_crisis_seeds_end_to_end(tmp_path, monkeypatch):
    """Two tiny slot-scorer PPO runs in one jit, evaluated against EDF on the same keys (paired deltas)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("experiments.crisis.seeds.enable_compilation_cache", lambda *a, **k: None)
    tiny = ["num_envs=4", "num_steps=8", "total_timesteps=32", "num_minibatches=2", "update_epochs=1",
            "hidden_size=8", "num_layers=1", "network=slot"]
    assert crisis_seeds.main(["--seeds", "2", "--episodes", "4", "--name", "t"] + tiny) == 0
    rep = json.loads((tmp_path / "runs" / "t" / "crisis_seeds.json").read_text())
    for scen in ("holdout", "fixed"):
        agents = rep["results"][scen]
        assert set(agents) == {"edf", "run0_sampled", "run0_argmax", "run1_sampled", "run1_argmax", "fresh_sampled",
                               "fresh_argmax"}
        assert agents["edf"]["paired_delta"] == {"mean": 0.0, "ci95": 0.0}  # EDF against itself
        assert agents["run0_argmax"]["vs_edf"] in ("beats", "loses", "overlap")
    assert len(rep["run_means"]["holdout"]["total_reward"]) == 2 and rep["config"]["network"] == "slot"
    assert len(rep["departures"]) == 2 and set(rep["departures"][0]) == {*crisis_seeds.DEPARTURES, "steps"}
    policy, params, runs, _ = crisis_seeds.load_runs(str(tmp_path / "runs" / "t"))  # what crisis_headroom --learners reads
    assert runs == 2 and all(x.shape[0] == 2 for x in jax.tree.leaves(params))
    # --runs-from re-evaluates the saved runs: on the same keys it reproduces the run's own evaluation
    assert crisis_seeds.main(["--runs-from", "runs/t", "--episodes", "4", "--name", "t-again"]) == 0
    again = json.loads((tmp_path / "runs" / "t-again" / "crisis_seeds.json").read_text())
    assert again["results"] == rep["results"] and again["runs_from"] == "runs/t" and again["train_wall_s"] is None
    assert crisis_seeds.main(["--runs-from", "runs/t", "--name", "t-bad", "lr=0.1"]) == 2  # nothing to override
    assert crisis_seeds.main(["--runs-from", "runs/missing", "--name", "t-bad"]) == 2
    assert not (tmp_path / "runs" / "t-bad").exists()


def test_departures_count_what_differs_from_edf():
    """A fresh policy with a large EDF prior departs nowhere; without the prior its argmax departs."""
    env = nexus_jax.make("crisis-v0", task_source="random", crisis_source="random")
    p, key = env.default_params, jax.random.PRNGKey(3)
    obs, st = env.reset_env(jax.random.PRNGKey(0), p)
    masks = env.avail_actions_array(st, p)[None]
    counts = []
    for prior in (50.0, 0.0):
        pol = ActorCritic(3, env.obs_dim, "flat", num_actions=12, hidden=8, layers=1, slot_layout=env.spec.slot_layout,
                          edf_prior=prior)
        params = pol.init(jax.random.PRNGKey(1), obs[None], masks)
        counts.append(crisis_seeds.departures(pol, params, p, key, 8))
    assert all(counts[0][k] == 0 for k in crisis_seeds.DEPARTURES) and counts[0]["steps"] == 48 * 3
    assert sum(counts[1][k] for k in crisis_seeds.DEPARTURES) > 0


def test_level_env_keeps_each_episode_level_through_auto_reset():
    env = LevelEnv.make("crisis-v0", {"task_source": "random"}, "flat")
    _, s = env.reset_at(jax.random.PRNGKey(0), jnp.int32(0))
    assert int(s.level) == 0 and not bool(negotiation_on(s, env.env.default_params))  # level 0: negotiation off
    last = s.replace(step=jnp.int32(env.max_steps - 1))
    _, nxt, _, done, _ = env.step(jax.random.PRNGKey(1), last, jnp.zeros(3, jnp.int32))
    assert bool(done) and int(nxt.step) == 0 and int(nxt.level) == 0  # the params say level 4
    lv = chunk_levels("uniform", jax.random.PRNGKey(2), jnp.zeros(2, jnp.int32), 64)
    assert lv.shape == (2, 64) and int(lv.min()) == 0 and int(lv.max()) == 4
    np.testing.assert_array_equal(np.asarray(chunk_levels("adaptive", None, jnp.array([1, 3]), 2)), [[1, 1], [3, 3]])
    np.testing.assert_array_equal(np.asarray(chunk_levels("hardest", None, jnp.array([1, 3]), 2)), [[4, 4], [4, 4]])


def test_crisis_curriculum_adaptive_end_to_end(tmp_path, monkeypatch):
    """Zero thresholds: the adaptive rule advances one level per chunk (0, 1, 2), never skipping."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("experiments.crisis.curriculum.enable_compilation_cache", lambda *a, **k: None)
    tiny = ["num_envs=4", "num_steps=48", "total_timesteps=576", "num_minibatches=2", "update_epochs=1",
            "hidden_size=8", "num_layers=1"]
    argv = ["--schedules", "adaptive", "--seeds", "2", "--episodes", "4", "--chunk", "1", "--probe-episodes", "4",
            "--thresholds", "0", "0", "0", "--name", "c"]
    assert crisis_curriculum.main(argv + tiny) == 0
    rep = json.loads((tmp_path / "runs" / "c" / "crisis_curriculum.json").read_text())
    assert rep["schedules"]["adaptive"]["level_trace"] == [[0, 0], [1, 1], [2, 2]]
    assert rep["env_steps_per_run"] == 576 and rep["schedules"]["adaptive"]["probe_episodes"] == 24


def test_headroom_orders_enumerate_every_per_seat_ranking():
    prio, combos = all_orders(3, 4)
    assert prio.shape == (216, 3, 4) and len(set(combos)) == 216
    i = combos.index(((2, 0, 1), (0, 1, 2), (1, 2, 0)))
    np.testing.assert_array_equal(prio[i], [[1, 2, 0, 99], [0, 1, 2, 99], [2, 0, 1, 99]])  # rank of each slot


def test_task_outcomes_agree_with_the_episode_metrics():
    """EDF's late / undone task counts (`crisis_headroom.task_outcomes`): none on the fixed evaluation (all on
    time); on holdout episodes, no failed task exactly when the on-time rate is 1, none undone exactly when
    completion is 1, and the urgent / GPU / per-seat splits never exceed the failures."""
    env = nexus_jax.make("crisis-v0", info_mode="full", **HOLDOUT_ENV)
    run = make_rollout(env, edf, 16, task_outcomes)
    fixed = jax.device_get(run(None, nexus_jax.make("crisis-v0", **FIXED_ENV).default_params, jax.random.PRNGKey(42)))
    assert (fixed["late"] == 0).all() and (fixed["undone"] == 0).all() and (fixed["on_time_rate"] == 1).all()
    h = jax.device_get(run(None, env.default_params, jax.random.PRNGKey(2024)))
    bad = h["late"] + h["undone"]
    np.testing.assert_array_equal(bad == 0, h["on_time_rate"] >= 1 - 1e-6)
    np.testing.assert_array_equal(h["undone"] == 0, h["completion_rate"] >= 1 - 1e-6)
    assert (bad > 0).any() and (h["bad_gpu"] <= bad).all() and (h["bad_urgent"] <= bad).all()
    np.testing.assert_array_equal(h["bad_seat"].sum(-1), bad)
