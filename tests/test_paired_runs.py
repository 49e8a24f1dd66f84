"""`python -m train.evaluate RUN --against OTHER`: seed i of one run against seed i of another on the same keys."""
import json
import shutil

import numpy as np
import pytest

from nexus_jax.cli import UserInputError
from train.evaluate import main, paired_runs

TINY = ["hidden_size=8", "num_layers=1"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, run_writer):
    """Two saved runs on one env: A's seed i holds the template's params x (1 + 0.1 i), B's the template's."""
    root = tmp_path_factory.mktemp("paired")
    run_writer(root / "a", ["name=a", *TINY], spread=0.1, invalid=[0.0, 0.0])
    run_writer(root / "b", ["name=b", *TINY], spread=0.0, invalid=[0.0, 0.0])
    return root


@pytest.mark.slow
def test_seed_pairs_share_keys_so_equal_params_differ_by_exactly_zero(runs, capsys):
    assert main([str(runs / "a"), "--against", str(runs / "b"), "--episodes", "8", "--seed", "3"]) == 0
    assert "pooled" in capsys.readouterr().out
    res = json.loads((runs / "a" / "paired.json").read_text())
    s0, s1 = res["seeds"]
    assert s0["a_minus_b"] == [0.0, 0.0] and s0["a"] == s0["b"]  # seed 0: the same params on the same keys
    assert s1["b"] == s0["b"]  # B's two seeds are the same params
    assert np.isclose(s1["a_minus_b"][0], s1["a"][0] - s1["b"][0])
    assert np.isclose(res["pooled_a_minus_b"][0], (s0["a_minus_b"][0] + s1["a_minus_b"][0]) / 2)


def test_refuses_runs_on_different_rules_or_seed_counts(runs, run_writer, tmp_path, capsys):
    run_writer(tmp_path / "other", ["name=other", *TINY], spread=0.0, invalid=[0.0, 0.0], episode_steps=5)
    with pytest.raises(UserInputError, match="same env and rules"):
        paired_runs(runs / "a", tmp_path / "other", num_episodes=8, seed=3)
    one = tmp_path / "one"
    shutil.copytree(runs / "b", one)
    for f in (one / "seeds").glob("seed_1.*"):
        f.unlink()
    with pytest.raises(UserInputError, match="holds 2 seed"):
        paired_runs(runs / "a", one, num_episodes=8, seed=3)
    assert main([str(runs / "a"), "--against", str(runs / "b"), "--suite"]) == 2
    assert "--against compares two runs" in capsys.readouterr().err
