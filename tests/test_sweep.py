"""train.sweep: one trace and one program for a whole grid of env rules; axes checked; pooled numbers by hand."""
import numpy as np
import pytest

import jax

from nexus_jax.cli import UserInputError
from nexus_jax.envs.nexus import BASELINES
from train import sweep as S
from train.config import load_config

TINY = ["num_envs=2", "num_steps=10", "total_timesteps=40", "hidden_size=8", "num_layers=1", "num_minibatches=1",
        "update_epochs=1", "env.max_steps=10"]


def lowered(x, y, seeds=2):
    cfg = load_config(S.SWEEP_CONFIG, TINY)
    base, grid = S.grid_params(cfg, x, y)
    rngs = jax.random.split(jax.random.PRNGKey(0), seeds)
    return S.make_sweep(cfg, base, episodes=2).lower(rngs, grid), grid


@pytest.mark.slow
def test_a_grid_traces_once_and_other_values_reuse_the_program():
    """A 2 x 2 grid x 2 seeds traces the per-cell program once (vmapped, no per-cell retrace); a grid of
    other values (same axes sizes) lowers to the identical program, so the compiled one is reused."""
    S.TRACES.clear()
    a, grid_a = lowered(("p_grid_failure", (0.05, 0.25)), ("vault_delay", (1, 6)))
    assert S.TRACES["cell"] == 1
    assert np.asarray(grid_a.vault_delay).tolist() == [1, 1, 6, 6]  # y-major cells
    np.testing.assert_allclose(np.asarray(grid_a.p_grid_failure), [0.05, 0.25, 0.05, 0.25])
    b, _ = lowered(("p_grid_failure", (0.1, 0.15)), ("vault_delay", (2, 3)))
    assert a.as_text() == b.as_text()  # values are inputs, not constants baked into the program


@pytest.mark.slow
def test_a_recurrent_policy_trains_and_plays_in_every_cell():
    cfg = load_config(S.SWEEP_CONFIG, TINY + ["memory=gru", "memory_size=8"])
    base, grid = S.grid_params(cfg, ("p_grid_failure", (0.05, 0.25)), ("vault_delay", (1,)))
    res = S.make_sweep(cfg, base, episodes=2)(jax.random.split(jax.random.PRNGKey(0), 1), grid)
    ret = np.asarray(res["trained"]["return"])
    assert ret.shape == (2, 1, 2) and np.isfinite(ret).all()


@pytest.mark.parametrize("text, words", [
    ("vault_delay", "FIELD=V1"), ("nope=1,2", "unknown"), ("num_agents=2,4", "cannot be swept"),
    ("max_steps=10,20", "cannot be swept"), ("shock_severity=a,b", "numbers"),
])
def test_bad_axes_are_one_line_errors(text, words):
    with pytest.raises(UserInputError, match=words):
        S.parse_axis(text)


def test_a_bad_cell_value_names_the_cell():
    cfg = load_config(S.SWEEP_CONFIG, TINY)
    with pytest.raises(UserInputError, match="cell p_grid_failure=2.0"):
        S.grid_params(cfg, ("p_grid_failure", (0.1, 2.0)), ("vault_delay", (1,)))


def test_pooled_numbers():
    """Trade completion, attribution gap and the paired hedge difference, pooled over seeds x episodes."""
    g, s, e = 1, 2, 2
    ones = np.ones((g, s, e))
    trained = {"return": np.array([[[-10.0, -12.0], [-8.0, -10.0]]]), "trades": 2 * ones, "proposals": 4 * ones,
               "vault": 10 * ones, "trust_in_learner": 0.5 * ones,
               "fm_trades": np.array([[[1.0, 0.0], [1.0, 0.0]]]), "fm_steps": 10 * ones,
               "mal_trades": np.array([[[0.0, 0.0], [1.0, 0.0]]]), "mal_steps": 10 * ones}
    counts = np.zeros((g, s, e, 3, 2, 2))  # (kind FM/MAL/BASE, stratum, (pair-steps, proposals)) per episode
    counts[..., 0, 0, :] = (10, 5)  # after force majeure: proposes at its baseline rate 0.5 ...
    counts[..., 1, 0, :] = (10, 2)  # ... after malice 0.2
    counts[..., 2, 0, :] = (10, 5)
    trained["attribution_counts"] = counts
    names = [b.name for b in BASELINES]
    base = np.full((g, s, len(names), e), -20.0)
    base[:, :, names.index("hedge")] = -11.0
    base[:, :, names.index("reciprocator")] = -13.0
    base[:, :, names.index("tit_for_tat")] = [[-9.0, -11.0], [-10.0, -10.0]]  # the best, level with the learner
    res = {"trained": trained, "hedge": {"return": -11.0 * ones}, "reciprocator": {"return": -13.0 * ones},
           "baselines": {"return": base}}
    row = S.pooled(res, 1)[0]
    assert row["best_baseline"] == "tit_for_tat" and row["return_minus_best_baseline"] == pytest.approx(0.0)
    assert not row["beats_every_baseline"] and row["not_beaten"] == ["hedge", "tit_for_tat"]
    assert row["attribution_gap_controlled"] == pytest.approx(0.3)
    assert row["return"] == pytest.approx(-10.0) and row["return_minus_hedge"] == pytest.approx(1.0)
    assert row["trade_completion"] == pytest.approx(0.5) and row["vault_use"] == pytest.approx(10.0)
    assert row["attribution_gap"] == pytest.approx(2 / 40 - 1 / 40)
    assert row["seed_returns"] == [-11.0, -9.0]
    assert row["hedge_worth"] == pytest.approx(2.0) and row["hedge_worth_ci95"] == 0.0
    lo, hi = row["attribution_gap_ci95"]
    assert lo <= row["attribution_gap"] <= hi
    res["trained"]["mal_steps"] = 0 * ones  # no malicious window: the gap is undefined, not 0
    assert np.isnan(S.pooled(res, 1)[0]["attribution_gap"])
