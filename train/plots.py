"""PNG plots of a run: the learning curve, trust and utility through one evaluation episode, the pipeline's stage table."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def plot_learning_curve(records: list[dict], path: str | Path, baselines: dict | None = None) -> None:
    """Mean episode return of the learner seat per update (band: min..max over seeds/sweep members)."""
    steps = np.array([r["env_steps"] for r in records])
    ret = np.array([r["episode_return"] for r in records])  # (U, runs)
    inv = np.array([r["invalid_rate"] for r in records])
    # Only updates in which episodes finished carry a return (short rollouts end episodes every few updates).
    ended = np.array([r["episodes"] for r in records]).min(1) > 0 if "episodes" in records[0] else np.ones(len(steps), bool)
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    ax.plot(steps[ended], ret[ended].mean(1), label="trained (mean over runs)")
    if ret.shape[1] > 1:
        ax.fill_between(steps[ended], ret[ended].min(1), ret[ended].max(1), alpha=0.3)
    for name, value in (baselines or {}).items():
        ax.axhline(value, ls="--", lw=1, label=f"{name} (eval)", color=f"C{1 + list(baselines).index(name)}")
    ax.set(xlabel="env steps", ylabel="episode return (learner seat)", title="Learning curve")
    ax.legend(fontsize=7)
    ax2.plot(steps, inv.mean(1))
    ax2.set(xlabel="env steps", ylabel="invalid-action rate", title="Invalid actions")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_eval_episode(result, path: str | Path) -> None:
    """Trust the others place in seat 0, seat 0's trust in them, and every seat's utility, per step."""
    trust = np.asarray(result.trace_trust)  # (T, N, N)
    util = np.asarray(result.trace_utility)  # (T, N)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    n = trust.shape[1]
    for j in range(1, n):
        ax1.plot(trust[:, j, 0], label=f"T[{j}, 0] (seat {j} trusts learner)")
        ax1.plot(trust[:, 0, j], ls="--", label=f"T[0, {j}] (learner trusts seat {j})")
    ax1.set(xlabel="step", ylabel="trust", title="Trust through an evaluation episode", ylim=(0, 1))
    ax1.legend(fontsize=6)
    for i in range(util.shape[1]):
        ax2.plot(util[:, i], label=f"seat {i}" + (" (learner)" if i == 0 else ""))
    ax2.set(xlabel="step", ylabel="utility min(E, C)", title="Utility through an evaluation episode")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_pipeline_table(table: dict, path, metrics) -> None:
    """The pipeline's stages side by side, one panel per metric (key, title, format), mean ± 95% CI."""
    stages = list(table)
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.2 * len(metrics), 3.6))
    for ax, (k, title, _) in zip(axes, metrics):
        means = [table[st][k]["mean"] for st in stages]
        cis = [table[st][k]["ci95"] for st in stages]
        ax.bar(range(len(stages)), means, yerr=cis, capsize=4, color=[f"C{i}" for i in range(len(stages))])
        ax.set_xticks(range(len(stages)))
        ax.set_xticklabels(stages, rotation=30, fontsize=8)
        ax.set_title(title, fontsize=9)
    fig.suptitle("random -> BC -> GRPO / PPO (unmasked policy, mean ± 95% CI over evaluation episodes)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
