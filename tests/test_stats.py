"""train.stats: the one module of means, CIs and 'beats beyond the CIs'."""
import math

import numpy as np

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
