"""Transfer across N (transfer.py): scenario choice and verdicts on hand data; the suite refuses a policy
outside its policy seats before compiling anything."""
from types import SimpleNamespace

import numpy as np
import pytest

from nexus_jax.envs.nexus import NexusParams
from train.suite import runner, scenarios
from experiments.populations.transfer import paired, seat_scenarios, verdicts

pytestmark = pytest.mark.slow  # a study's reproduction: the full tier (python -m pytest -m slow; CI runs it)


def test_seat_scenarios_reuse_the_suite_and_make_the_rest():
    sc = seat_scenarios([4, 8, 16, 64])
    assert list(sc) == ["train-like", "8-seats", "16-seats", "64-seats"]
    assert sc["8-seats"] is scenarios.SCENARIOS["8-seats"] and sc["16-seats"]["env_id"] == "nexus-16-v0"
    assert sc["64-seats"] == {"env_id": "nexus-v0", "overrides": {"num_agents": 64},
                              "note": "64 seats (default mix repeated); not in the suite"}


def test_verdicts_use_non_overlapping_cis():
    rows = {"seed0": {"mean": -60.0, "ci95": 1.0}, "random": {"mean": -90.0, "ci95": 1.0},
            "bully": {"mean": -70.0, "ci95": 1.0}, "altruist": {"mean": -61.5, "ci95": 1.0}}
    v = verdicts({"8-seats": {"rows": rows}})
    assert v == {"8-seats": {"seed0": {"beats": ["bully"], "not": ["altruist"]}}}


def test_suite_refuses_a_policy_outside_its_policy_seats():
    suite = runner.Suite(policy=object(), bank=None, policy_agents=4, episodes=2, policy_seats=(0,))
    cells = [([scenarios.HEURISTIC, scenarios.POLICY, scenarios.HEURISTIC, scenarios.HEURISTIC], [1, 0, 2, 3])]
    with pytest.raises(ValueError, match=r"seat\(s\) \[1\]"):
        suite.run_cells(NexusParams.create(), cells)


def test_suite_fits_any_n_only_for_entity_policies():
    class Flat:
        pass

    class Entity:
        def seat_obs(self, state, params, seat):
            raise AssertionError("not called")

    assert runner.Suite(Flat(), None, 4).fits(4) and not runner.Suite(Flat(), None, 4).fits(8)
    assert runner.Suite(Entity(), None, 4).fits(8) and runner.Suite(Entity(), None, 4).fits(64)
    assert not runner.Suite(None, None, 4).fits(4)


def test_paired_differences_cancel_the_shared_key_noise():
    noise = np.array([-100.0, 0.0, 100.0, 50.0])  # the economy's swing on each key, shared by every row
    ret = np.stack([noise + 2.0, noise, noise - 1.0])[:, :, None]  # (candidates, episodes, seats)
    out = paired({"64-seats": {"out": SimpleNamespace(returns=ret), "candidates": ["seed0", "random", "bully"]}})
    d = out["64-seats"]["seed0"]
    assert d["random"] == {"mean": 2.0, "ci95": 0.0} and d["bully"] == {"mean": 3.0, "ci95": 0.0}
