"""Evaluation suite (train/suite/, train/stats.py, train/snapshots.py, train/report.py): statistics on hand-built data, and one tiny
end-to-end report on a hand-made run folder (one compilation of the episode runner, tiny shapes)."""
import math
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from train import stats
from train.suite import cli as suite_cli, studies
from train.snapshots import load_policies, resolve_every, save_policies, scan_with_snapshots, snapshot_updates


# ---- ratings ---------------------------------------------------------------------------------

def test_row_wins_compare_rows_against_the_same_column():
    r = np.zeros((2, 2, 2))
    r[0, 0] = [3, 1]
    r[1, 0] = [2, 1]  # column 0: key 0 row 0 wins, key 1 tie
    r[0, 1] = [0, 0]
    r[1, 1] = [5, -1]  # column 1: key 0 row 1 wins, key 1 row 0 wins
    w = stats.row_wins(r)
    assert w.tolist() == [[0.0, 2.5], [1.5, 0.0]]
    assert len(studies.crossplay_ratings(r)["elo_same_opponents"]) == 2


# ---- snapshot curve ----------------------------------------------------------------------------

def test_snapshot_curve_bookkeeping_by_hand():
    # 3 snapshots, 2 episode keys; r[j, i] = return of j in seat 0 facing i
    r = np.array([
        [[0, 0], [-2, -4], [-5, -5]],
        [[2, 4], [1, 1], [-1, -3]],
        [[6, 2], [3, 1], [2, 2]],
    ], float)
    c = studies.snapshot_curve(r)
    assert math.isnan(c["vs_past_return"][0]) and math.isnan(c["vs_past_gain"][0])
    # snapshot 1 vs past {0}: return mean(2, 4) = 3; gain 3 - mean(-2, -4) = 6; wins: 2 > -2, 4 > -4 -> 1.0
    assert c["vs_past_return"][1] == pytest.approx(3.0)
    assert c["vs_past_gain"][1] == pytest.approx(6.0)
    assert c["vs_past_winrate"][1] == pytest.approx(1.0)
    # snapshot 2 vs past {0, 1}: returns 4 and 2 -> 3; gains 4 - (-5) = 9 and 2 - (-2) = 4 -> 6.5
    # wins vs 0: 6 > -5, 2 > -5 -> 1; vs 1: 3 > -1, 1 > -3 -> 1
    assert c["vs_past_return"][2] == pytest.approx(3.0)
    assert c["vs_past_gain"][2] == pytest.approx(6.5)
    assert c["vs_past_winrate"][2] == pytest.approx(1.0)
    assert c["self_play_return"] == [0.0, 1.0, 2.0]


def test_snapshot_schedule_and_scan_keep_the_right_params():
    assert resolve_every(-1, 20) == 4 and resolve_every(0, 20) == 0 and resolve_every(50, 20) == 20
    assert snapshot_updates(5, 2) == [0, 2, 4] and snapshot_updates(5, 0) == []

    def body(r, i, snaps):  # "params" count the updates done; the metric: the slots filled before update i
        return {"w": r["w"] + 1.0, "b": r["b"] + 10.0}, (i, snaps["b"].sum())

    runner = {"w": jnp.zeros(2), "b": jnp.zeros(())}
    run = jax.jit(lambda r: scan_with_snapshots(body, r, 5, 2, lambda x: x))
    final, metrics, snaps = run(runner)
    assert np.asarray(snaps["w"])[:, 0].tolist() == [0.0, 2.0, 4.0]  # updates 0, 2, 4
    assert np.asarray(snaps["b"]).tolist() == [0.0, 20.0, 40.0]
    assert float(final["w"][0]) == 5.0 and np.asarray(metrics[0]).tolist() == [0, 1, 2, 3, 4]
    assert np.asarray(metrics[1]).tolist() == [0.0, 0.0, 20.0, 20.0, 60.0]  # slot 1 from update 2 on, slot 2 from 4


def test_save_and_load_policies_round_trip(tmp_path):
    cfg = SimpleNamespace(num_envs=2, num_steps=3, num_seeds=2, snapshot_every=2, num_updates=4)
    params = {"w": np.arange(2 * 3, dtype=np.float32).reshape(1, 2, 3)}  # (L=1, S=2, 3)
    snaps = {"w": np.arange(2 * 3 * 3, dtype=np.float32).reshape(1, 2, 3, 3)}  # (L, S, slots 0/2/4, 3)
    index = save_policies(tmp_path, cfg, {"params": params, "snapshots": snaps}, 0)
    assert [(e["seed"], e["update"], e["env_steps"]) for e in index["snapshots"]] == [
        (0, 0, 0), (0, 2, 12), (0, 4, 24), (1, 0, 0), (1, 2, 12), (1, 4, 24)]
    got = load_policies(tmp_path, {"w": np.zeros(3, np.float32)})
    assert np.asarray(got["seeds"][1]["w"]).tolist() == [3.0, 4.0, 5.0]
    s, u, steps, p = got["snapshots"][4]
    assert (s, u, steps) == (1, 2, 12) and np.asarray(p["w"]).tolist() == [12.0, 13.0, 14.0]


# ---- shock attribution ---------------------------------------------------------------------------

def _info(n, broken=(), fm=(), trades=()):
    z = np.zeros((n, n), bool)
    sb, bf, tr = z.copy(), z.copy(), z.copy()
    for s, t in broken:
        sb[s, t] = True  # [signaller, target]
    for s, t in fm:
        bf[s, t] = True
    for p, a in trades:
        tr[p, a] = True  # [proposer, acceptor]
    stats = {"trades": jnp.asarray(tr), "trade_volume": jnp.where(jnp.asarray(tr), 10.0, 0.0),
             "proposals": jnp.asarray(z), "signals_made": jnp.asarray(z), "signals_honoured": jnp.asarray(z),
             "signals_broken": jnp.asarray(sb), "broken_force_majeure": jnp.asarray(bf),
             "shock_started": jnp.asarray(False), "starving": jnp.zeros(n, bool)}
    return {"stats": stats, "utility": jnp.ones(n), "invalid": jnp.zeros(n, bool), "rewards_all": jnp.zeros(n),
            "shock_active": jnp.asarray(False)}


def test_attribution_metric_on_a_hand_built_sequence():
    from nexus_jax.wrappers import accumulate, init_acc, summarize

    n = 3
    state = SimpleNamespace(available=jnp.ones((n, 2)), escrow=jnp.zeros((n, 2)), trust=jnp.full((n, n), 0.5))
    params = SimpleNamespace(resilience_threshold=5.0)
    acc = init_acc(state)
    # step 1: seat 2 breaks its signal to seat 0 by force majeure, seat 1 breaks one to seat 0 maliciously;
    # windows of 3 steps: steps 2, 3, 4 count. Seat 0 trades with 2 at step 3 (inside), with 1 at step 5 (outside).
    seq = [_info(n, broken=[(2, 0), (1, 0)], fm=[(2, 0)]), _info(n), _info(n, trades=[(0, 2)]), _info(n),
           _info(n, trades=[(1, 0)]), _info(n)]
    for info in seq:
        acc = accumulate(acc, state, info, params, window=3)
    m = summarize(acc)
    assert float(acc.after_fm_steps[0]) == 3 and float(acc.after_fm_trades[0]) == 1
    assert float(acc.after_mal_steps[0]) == 3 and float(acc.after_mal_trades[0]) == 0
    assert float(m["trade_rate_after_force_majeure"][0]) == pytest.approx(1 / 3)
    assert float(m["trade_rate_after_malicious"][0]) == 0.0
    assert float(m["attribution_gap"][0]) == pytest.approx(1 / 3)
    assert float(acc.after_fm_steps[1]) == 0 and float(acc.after_fm_steps[2]) == 0  # no windows for seats 1, 2


def test_attribution_rates_pool_over_episodes():
    # episode 0: 1 trade in 3 FM pair-steps, 0 in 2 malicious; episode 1: 2 in 5 FM, 1 in 4 malicious
    r = studies.attribution_rates([1, 2], [3, 5], [0, 1], [2, 4], boot=200)
    assert r["rate_fm"] == pytest.approx(3 / 8) and r["rate_mal"] == pytest.approx(1 / 6)
    assert r["gap"] == pytest.approx(3 / 8 - 1 / 6)
    assert r["fm_pair_steps"] == 8 and r["mal_pair_steps"] == 6
    assert r["ci_fm"][0] <= r["rate_fm"] <= r["ci_fm"][1]
    none = studies.attribution_rates([0], [0], [0], [0])
    assert math.isnan(none["rate_fm"]) and math.isnan(none["rate_mal"])


def test_partial_suite_runs_merge_into_suite_json():
    old = {"command": "a", "scenarios": {"x": 1, "y": 2}, "crossplay": {"elo": [1]}}
    new = {"command": "b", "scenarios": {"y": 3}, "attribution": {"rows": {}}}
    m = suite_cli.merge_results(old, new)
    assert m["scenarios"] == {"x": 1, "y": 3} and m["crossplay"] == {"elo": [1]} and "attribution" in m
    assert m["commands"] == ["a", "b"] and suite_cli.merge_results(m, {"command": "c"})["commands"] == ["a", "b", "c"]


# ---- tiny end-to-end: a hand-made run folder -> suite -> report ----------------------------------

TINY = {
    "train-like": {"env_id": "nexus-v0", "overrides": {"max_steps": 4}, "note": "tiny"},
    "cheater-storm": {"env_id": "nexus-cheater-v0",
                      "overrides": {"max_steps": 4, "shock_storm_factor": 3.0}, "note": "tiny attribution"},
}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, run_writer):
    run = tmp_path_factory.mktemp("runs") / "tiny"
    run_writer(run, ["name=tiny", "hidden_size=8", "num_layers=1"], spread=0.1, invalid=[0.1, 0.05])
    return run


@pytest.mark.slow
def test_tiny_suite_and_report_end_to_end(tiny_run):
    from train.report import write_report

    results, arrays = suite_cli.run_suite(tiny_run, episodes=2, chunk=4, scenarios=TINY, log=lambda *_: None)
    assert results["bank"][:2] == ["seed0", "seed1"] and "seed1@u2" in results["bank"]
    rows = results["scenarios"]["train-like"]["rows"]
    assert {"seed0", "seed1", "random", "cheater", "trained (all seeds)"} <= set(rows)
    assert all(np.isfinite(r["mean"]) for r in rows.values())
    cp = results["crossplay"]
    k = len(cp["names"])  # 2 seeds + update-0 snapshot + random + 4 heuristics
    assert k == 8 and np.asarray(cp["mean"]).shape == (k, k) and len(cp["elo"]) == k
    assert np.mean(cp["elo"]) == pytest.approx(1000.0) and len(cp["elo_same_opponents"]) == k
    assert set(results["snapshots"]) == {"seed0", "seed1"}
    assert results["snapshots"]["seed0"]["updates"] == [0, 1, 2]
    assert set(results["attribution"]["rows"]) >= {"seed0", "random", "reciprocator"}
    assert arrays["trace_trust"].shape == (4, 4, 4) and arrays["trade_matrix"].shape == (4, 4)
    path = write_report(tiny_run, results, arrays, "python -m train.report tiny", "python -m train.evaluate tiny --suite")
    text = path.read_text()
    for png in ("learning_curves", "scenarios", "trust_heatmaps", "utility_shocks", "trade_network", "crossplay",
                "attribution", "snapshots"):
        assert (tiny_run / "report" / f"{png}.png").stat().st_size > 1000
        assert f"report/{png}.png" in text
