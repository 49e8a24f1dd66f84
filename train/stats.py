"""The statistics every report shares: means with 95% confidence intervals and "beats beyond the CIs"."""
from __future__ import annotations

import math

import numpy as np


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
