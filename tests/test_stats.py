"""train.stats: the one module of means, CIs, 'beats beyond the CIs', paired wins and Bradley-Terry / Elo."""
import math

import numpy as np
import pytest

from train import stats
from train.stats import beats, ci_above, mean_ci, summary


def test_mean_ci_against_the_formula():
    x = np.array([1.0, 2.0, 4.0, 7.0])
    m, c = mean_ci(x)
    assert m == 3.5 and math.isclose(c, 1.96 * np.std(x, ddof=1) / 2.0)
    assert mean_ci([5.0]) == (5.0, 0.0) and math.isnan(mean_ci([])[0])


def test_beats_needs_non_overlapping_cis():
    assert beats([10.0, 10.1, 9.9], [1.0, 1.1, 0.9])
    assert not beats([1.0, 3.0], [2.0, 2.5]) and not beats([1.0, 1.1, 0.9], [10.0, 10.1, 9.9])
    assert ci_above({"mean": 2.0, "ci95": 0.4}, {"mean": 1.0, "ci95": 0.5})
    assert not ci_above({"mean": 2.0, "ci95": 0.6}, {"mean": 1.0, "ci95": 0.5})
    assert summary([1.0, 3.0]) == {"mean": 2.0, "ci95": mean_ci([1.0, 3.0])[1]}


# ---- paired wins and ratings (cross-play) ---------------------------------------------------

def test_bradley_terry_two_players_by_hand():
    # a beat b 3 times, lost once: p_a / p_b = 3, an Elo gap of 400 log10 3 = 190.85
    p = stats.bradley_terry(np.array([[0.0, 3.0], [1.0, 0.0]]))
    assert p[0] / p[1] == pytest.approx(3.0, rel=1e-9)
    elo = stats.elo_from_strengths(p)
    assert elo[0] - elo[1] == pytest.approx(400 * math.log10(3), abs=1e-6)
    assert elo.mean() == pytest.approx(1000.0)


def test_bradley_terry_recovers_consistent_strengths():
    # win counts generated from strengths 4 : 2 : 1 (100 games per pair) are fitted exactly
    true = np.array([4.0, 2.0, 1.0])
    w = 100 * true[:, None] / (true[:, None] + true[None, :])
    np.fill_diagonal(w, 0.0)
    p = stats.bradley_terry(w)
    assert p / p[2] == pytest.approx(true, rel=1e-6)
    elo = stats.elo_from_strengths(p)
    assert elo[0] - elo[2] == pytest.approx(400 * math.log10(4), abs=1e-4)


def test_bradley_terry_prior_keeps_a_perfect_record_finite():
    p = stats.bradley_terry(np.array([[0.0, 2.0], [0.0, 0.0]]), prior=1.0)  # 2 wins + 0.5 each way: 2.5 : 0.5
    assert p[0] / p[1] == pytest.approx(5.0, rel=1e-9)


def test_pairwise_wins_and_elo_on_a_hand_matrix():
    # returns[a, b, e]: a in seat 0 facing b, episode key e
    r = np.zeros((2, 2, 4))
    r[0, 1] = [5, 1, 3, 2]  # policy 0 facing 1
    r[1, 0] = [4, 2, 3, 0]  # policy 1 facing 0, same keys
    w = stats.pairwise_wins(r)
    # key 0: 5 > 4 win for 0; key 1: 1 < 2 win for 1; key 2: tie (half each); key 3: 2 > 0 win for 0
    assert w.tolist() == [[0.0, 2.5], [1.5, 0.0]]
    elo = stats.elo_ratings(r, prior=0.0)
    assert elo[0] - elo[1] == pytest.approx(400 * math.log10(2.5 / 1.5), abs=1e-6)
