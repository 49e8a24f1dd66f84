"""Self-play runs of the entity network in the evaluation suite (train/suite/):
the attribution window counts pooled over seats on hand data, and a hand-made nexus-selfplay-v0 run folder
that the suite loads and plays (tiny shapes: one runner compilation per N)."""
import numpy as np
import pytest

from train.suite import cli as suite_cli, studies


def _summary(fm_rate, fm_steps, mal_rate, mal_steps):
    return {"trade_rate_after_force_majeure": np.asarray(fm_rate, float)[None],
            "attribution_windows_force_majeure": np.asarray(fm_steps, float)[None],
            "trade_rate_after_malicious": np.asarray(mal_rate, float)[None],
            "attribution_windows_malicious": np.asarray(mal_steps, float)[None]}


def test_window_counts_pool_the_asked_seats():
    # one cell, 2 episodes, 3 seats: rates x pair-steps are the trades
    s = _summary([[0.5, 1.0, 0.0], [0.0, 0.0, 0.25]], [[4, 2, 0], [0, 0, 8]],
                 [[0.0, 0.5, 0.0], [1.0, 0.0, 0.0]], [[10, 4, 0], [2, 0, 0]])
    fm_t, fm_s, mal_t, mal_s = studies.window_counts(s, 0)  # seat 0 only (the suite's study)
    assert fm_t.tolist() == [2, 0] and fm_s.tolist() == [4, 0] and mal_t.tolist() == [0, 2]
    fm_t, fm_s, mal_t, mal_s = studies.window_counts(s, 0, range(3))  # every seat (self-play)
    assert fm_t.tolist() == [4, 2] and fm_s.tolist() == [6, 8] and mal_t.tolist() == [2, 2]
    assert mal_s.tolist() == [14, 2]
    r = studies.attribution_rates(fm_t, fm_s, mal_t, mal_s, boot=50)
    assert r["rate_fm"] == pytest.approx(6 / 14) and r["rate_mal"] == pytest.approx(4 / 16)


@pytest.mark.slow
def test_suite_loads_a_selfplay_run_and_plays_it_in_seat_0(selfplay_run):
    tiny = {"train-like": {"env_id": "nexus-v0", "overrides": {"max_steps": 4}, "note": "tiny"}}
    results, _ = suite_cli.run_suite(selfplay_run, parts=("scenarios",), episodes=2, chunk=4, scenarios=tiny,
                                     log=lambda *_: None)
    rows = results["scenarios"]["train-like"]["rows"]
    assert results["scenarios"]["train-like"]["policy_fits"] and results["scenarios"]["train-like"]["num_agents"] == 4
    assert {"seed0", "seed1", "random", "bully"} <= set(rows)
    assert all(np.isfinite(r["mean"]) for r in rows.values())
