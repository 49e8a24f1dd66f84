"""The statistics every report shares: means with 95% CIs, "beats beyond the CIs", paired wins and Bradley-Terry / Elo.

Host-side numpy only, so tests check them on hand data without compiling anything.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats as _scipy_stats


def mean_ci(x) -> tuple[float, float]:
    """Mean and the half-width of its normal-approximation 95% CI (1.96 x sample sd / sqrt(n)).

    The half-width is 0 for fewer than two values; the mean of no values is NaN.
    """
    x = np.asarray(x, np.float64).reshape(-1)
    if len(x) < 2:
        return (float(x.mean()) if len(x) else float("nan")), 0.0
    return float(x.mean()), float(1.96 * x.std(ddof=1) / math.sqrt(len(x)))


def summary(x) -> dict:
    """{"mean", "ci95"} of `x` (the shape reports and JSON files use)."""
    return dict(zip(("mean", "ci95"), mean_ci(x)))


def ci_above(a: dict, b: dict) -> bool:
    """a's 95% CI lies entirely above b's: a.mean - a.ci95 > b.mean + b.ci95 (summaries as `summary` gives)."""
    return a["mean"] - a["ci95"] > b["mean"] + b["ci95"]


def beats(a, b) -> bool:
    """Samples a beat samples b beyond the 95% CIs (non-overlapping, a above)."""
    return ci_above(summary(a), summary(b))


def t_ci(x) -> tuple[float, float]:
    """Mean and 95% half-width with Student's t (for a handful of seeds)."""
    x = np.asarray(x, np.float64).reshape(-1)
    if len(x) < 2:
        return float(x.mean()), 0.0
    return float(x.mean()), float(_scipy_stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))


# ---- paired comparisons and ratings (cross-play) -------------------------------------------

def pairwise_wins(returns: np.ndarray) -> np.ndarray:
    """returns (K, K, E): seat-0 return of policy a against opponents b on shared episode keys.

    -> W (K, K): W[a, b] = number of episodes where a facing b did better than b facing a
    (the same keys, the same seat), ties counting half. The diagonal is 0.
    """
    r = np.asarray(returns, np.float64)
    diff = r - r.transpose(1, 0, 2)
    w = (diff > 0).sum(-1) + 0.5 * (diff == 0).sum(-1)
    np.fill_diagonal(w, 0.0)
    return w


def row_wins(returns: np.ndarray) -> np.ndarray:
    """returns (K, K, E) as in `pairwise_wins` -> W (K, K): W[a, c] = number of (column b, episode) pairs where
    a in seat 0 did better than c in seat 0 against the *same* opponents b on the same key (ties half)."""
    r = np.asarray(returns, np.float64)
    diff = r[:, None] - r[None, :]  # (a, c, b, e)
    w = (diff > 0).sum((-1, -2)) + 0.5 * (diff == 0).sum((-1, -2))
    np.fill_diagonal(w, 0.0)
    return w


def bradley_terry(wins: np.ndarray, prior: float = 0.0, iters: int = 2000, tol: float = 1e-12) -> np.ndarray:
    """Bradley-Terry strengths p (geometric mean 1) from a win-count matrix by Hunter's MM updates.

    P(a beats b) = p_a / (p_a + p_b). `prior` adds that many virtual draws (half a win each
    way) to every pair, which keeps strengths finite when a policy wins every game.
    """
    w = np.asarray(wins, np.float64).copy()
    k = w.shape[0]
    if prior:
        w = w + prior / 2.0 * (1.0 - np.eye(k))
    n = w + w.T  # games per pair
    total_wins = w.sum(1)
    p = np.ones(k)
    for _ in range(iters):
        denom = (n / (p[:, None] + p[None, :])).sum(1)
        new = np.where(denom > 0, total_wins / np.maximum(denom, 1e-300), p)
        new = np.maximum(new, 1e-300)
        new = new / np.exp(np.mean(np.log(new)))
        if np.max(np.abs(new - p)) < tol:
            p = new
            break
        p = new
    return p


def elo_from_strengths(p: np.ndarray, base: float = 1000.0) -> np.ndarray:
    """Elo scale: 400 log10 p, shifted so the mean rating is `base` (a 400-point gap = 10:1 odds)."""
    e = 400.0 * np.log10(np.asarray(p, np.float64))
    return e - e.mean() + base


def elo_ratings(returns: np.ndarray, prior: float = 1.0) -> np.ndarray:
    """Elo of each policy from the (K, K, E) cross-play returns (paired wins -> Bradley-Terry)."""
    return elo_from_strengths(bradley_terry(pairwise_wins(returns), prior=prior))
