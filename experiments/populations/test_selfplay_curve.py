"""The population study's self-play curve (experiments/populations/selfplay_curve.py) on a saved run folder."""
import json

import numpy as np
import pytest

from experiments.populations.selfplay_curve import main

pytestmark = pytest.mark.slow  # a study's reproduction: the full tier (python -m pytest -m slow; CI runs it)


def test_selfplay_curve_plays_every_snapshot_in_every_seat(selfplay_run):
    assert main([str(selfplay_run), "--episodes", "2"]) == 0
    res = json.loads((selfplay_run / "selfplay_curve.json").read_text())
    assert res["env_id"] == "nexus-selfplay-v0" and res["num_agents"] == 3 and res["episodes"] == 2
    assert [(r["seed"], r["update"]) for r in res["rows"]] == [(s, u) for s in ("seed0", "seed1") for u in (0, 1, 2)]
    assert [r["agent_steps"] for r in res["rows"][:3]] == [0, 24, 48]  # 8 env steps per update x 3 seats
    for r in res["rows"]:
        assert r["trades_completed"]["mean"] >= 0 and 0.0 <= r["mean_trust"]["mean"] <= 1.0
        assert set(r["attribution"]) >= {"rate_fm", "rate_mal", "gap", "ci_gap", "fm_pair_steps"}
        assert np.isfinite(r["seat_return"]["mean"])
    # seed0 and seed1 hold the same snapshots: the same keys give the same metrics
    assert res["rows"][1]["mean_trust"] == res["rows"][4]["mean_trust"]
    assert (selfplay_run / "selfplay_curve.png").stat().st_size > 1000
