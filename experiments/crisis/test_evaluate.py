"""PPO and the trained-vs-fresh evaluation on crisis-v0 (experiments.crisis.evaluate): tiny shapes, one end-to-end run."""
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nexus_jax
from nexus_jax.envs.crisis import Crisis, CrisisSchedule, jain, metrics
from experiments.crisis import evaluate as crisis_eval
from experiments.crisis.evaluate import beats, has_compound, mean_ci

pytestmark = pytest.mark.slow  # a study's reproduction: the full tier (python -m pytest -m slow; CI runs it)

TINY_PPO = ["num_envs=4", "num_steps=8", "total_timesteps=64", "num_minibatches=2", "update_epochs=1",
            "hidden_size=16", "num_layers=1"]


@pytest.fixture(scope="module")
def report(tmp_path_factory, monkeypatch_module):
    """One end-to-end `python -m experiments.crisis.evaluate` run at tiny sizes (Q and PPO trained, 4 agents x 3 scenarios)."""
    d = tmp_path_factory.mktemp("crisis_eval")
    monkeypatch_module.chdir(d)
    monkeypatch_module.setattr("experiments.crisis.evaluate.enable_compilation_cache", lambda *a, **k: None)  # keep the test cache
    assert crisis_eval.main(["--episodes", "8", "--q-episodes", "2", "--name", "t"] + TINY_PPO) == 0
    return json.loads((d / "runs" / "t" / "crisis_eval.json").read_text()), (d / "runs" / "t" / "crisis_eval.md").read_text()


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_mean_ci_by_hand():
    x = [1.0, 2.0, 3.0, 4.0]
    m, c = mean_ci(x)
    sd = math.sqrt(sum((v - 2.5) ** 2 for v in x) / 3)
    assert m == pytest.approx(2.5) and c == pytest.approx(1.96 * sd / 2.0)
    assert mean_ci([5.0]) == (5.0, 0.0)
    assert beats([10.0, 10.1, 9.9], [1.0, 1.1, 0.9]) and not beats([1.0, 3.0], [2.0, 2.5])


def test_jain_by_hand():
    mask = jnp.array([True, True, True])
    assert float(jain(jnp.array([1.0, 1.0, 1.0]), mask)) == pytest.approx(1.0)
    assert float(jain(jnp.array([1.0, 0.0, 0.0]), mask)) == pytest.approx(1 / 3)
    assert float(jain(jnp.array([0.5, 1.0, 0.0]), mask)) == pytest.approx(1.5 ** 2 / (3 * 1.25))
    assert float(jain(jnp.array([0.5, 1.0, 7.0]), jnp.array([True, True, False]))) == pytest.approx(1.5 ** 2 / (2 * 1.25))
    assert float(jain(jnp.zeros(3), mask)) == 0.0


def test_completion_on_time_and_fairness_metrics_by_hand():
    env = nexus_jax.make("crisis-v0", info_mode="full")
    _, s = env.reset(jax.random.PRNGKey(0))
    # Default set: 3 released tasks per seat (the urgent slot 3 is not released). Seat 0 finishes 2 (one late),
    # seat 1 finishes 1 on time, seat 2 none: completion 3/9, on time 2/9, per-seat rates (2/3, 1/3, 0).
    dl = s.tasks.deadline_h
    done = jnp.zeros_like(s.done).at[0, 0].set(True).at[0, 1].set(True).at[1, 0].set(True)
    completed = jnp.zeros_like(dl).at[0, 0].set(dl[0, 0] - 0.5).at[0, 1].set(dl[0, 1] + 0.5).at[1, 0].set(dl[1, 0])
    m = jax.jit(metrics)(s.replace(done=done, completed_h=completed), env.default_params)
    assert float(m["completion_rate"]) == pytest.approx(3 / 9)
    assert float(m["on_time_rate"]) == pytest.approx(2 / 9)
    r = np.array([2 / 3, 1 / 3, 0.0])
    assert float(m["fairness"]) == pytest.approx(r.sum() ** 2 / (3 * (r ** 2).sum()), rel=1e-5)


def test_has_compound_by_hand():
    def sched(kind, start, end, enabled=(True, True)):
        return CrisisSchedule(kind=jnp.array(kind), start_step=jnp.array(start), end_step=jnp.array(end),
                              magnitude=jnp.ones(2), enabled=jnp.array(enabled))

    out, urg = int(Crisis.GPU_OUTAGE), int(Crisis.URGENT_TASK)
    assert bool(has_compound(sched([out, out], [10, 15], [20, 25])))  # overlapping outages
    assert not bool(has_compound(sched([out, out], [10, 20], [20, 25])))  # back to back
    assert bool(has_compound(sched([out, urg], [10, 12], [20, 12])))  # urgent task lands during an outage
    assert not bool(has_compound(sched([out, out], [10, 15], [20, 25], (True, False))))  # one disabled


def test_no_negotiation_switch_params():
    on = nexus_jax.make("crisis-v0", **crisis_eval.HOLDOUT_ENV).default_params
    off = nexus_jax.make("crisis-v0", **crisis_eval.HOLDOUT_ENV, **crisis_eval.NO_NEGOTIATION).default_params
    assert jax.tree.structure(on) == jax.tree.structure(off)  # traced switch: the same compiled rollout serves both
    assert int(off.negotiation_min_level) > int(off.curriculum_level)


def test_end_to_end_eval_and_no_negotiation(report):
    rep, md = report
    assert "## Holdout" in md and "## Fixed" in md and "| PPO trained |" in md and "EDF heuristic" in md
    assert rep["q"]["env_steps"] == 2 * 48 and rep["ppo"]["env_steps"] == 64
    res = rep["results"]
    for scen in ("holdout", "fixed", "holdout_no_negotiation"):
        for agent in crisis_eval.AGENTS:
            r = res[scen][agent]
            assert 0.0 <= r["completion_rate"]["mean"] <= 1.0 and 0.0 <= r["fairness"]["mean"] <= 1.0
            assert r["on_time_rate"]["mean"] <= r["completion_rate"]["mean"] + 1e-6
            assert np.isfinite(r["total_reward"]["mean"]) and r["total_reward"]["ci95"] >= 0
    # The switch disables the negotiation phases: no contract is ever made; with it on, random agents make some.
    for agent in crisis_eval.AGENTS:
        assert res["holdout_no_negotiation"][agent]["contracts_made"]["mean"] == 0.0
    assert res["holdout"]["q_fresh"]["contracts_made"]["mean"] > 0.0
    # Fixed scenario: no crises at all; holdout: compound crises in most episodes.
    assert res["fixed"]["q_fresh"]["compound"]["mean"] == 0.0 and rep["holdout_compound_share"] > 0.5
    assert set(rep["verdicts"]["holdout"]) == {"q", "ppo", "q_vs_edf", "ppo_vs_edf", "ppo_greedy_vs_edf"}
    assert res["holdout"]["edf"]["contracts_made"]["mean"] == 0.0  # EDF never yields


def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, monkeypatch):
    """The study's command validates its arguments before writing (one stderr line, exit 2)."""
    monkeypatch.chdir(tmp_path)
    for argv, needles in ((["--ppo-run", "no_run"], ("no_run", "not found")),
                          (["env.curriculum_level=9"], ("CrisisParams.curriculum_level",)),
                          (["--episodes", "-1"], ("--episodes",)), (["--name", "../elsewhere"], ("--name", "folder name"))):
        assert crisis_eval.main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and all(n in err[0] for n in needles), err
    assert list(tmp_path.iterdir()) == []
