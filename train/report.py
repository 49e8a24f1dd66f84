"""`python -m train.report RUN_DIR`: run the evaluation suite on a run folder and write RUN_DIR/report.md + PNGs.

Figures (RUN_DIR/report/): learning curves with 95% CIs across seeds, trust heatmaps
through an episode, utility and shock timeline, the trade network, the cross-play matrix
and Elo, the shock-attribution plot, the snapshot ("am I getting better") curve, and the
held-out scenario returns. `--reuse` redraws from RUN_DIR/suite.json and
suite_arrays.npz instead of re-running the suite.
"""
from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from nexus_jax.cli import ArgumentParser, UserInputError, entry_point, one_line, positive_int  # noqa: E402
from train.checkpoint import load_run_config  # noqa: E402
from train.config import load_config  # noqa: E402
from train.runtime import enable_compilation_cache  # noqa: E402
from train.stats import t_ci  # noqa: E402
from train.suite.cli import run_suite  # noqa: E402
from train.suite.scenarios import SCENARIOS  # noqa: E402
from train.suite.studies import crossplay_ratings  # noqa: E402

ARCH_SHORT = {0: "LRN", 1: "BUL", 2: "ALT", 3: "TFT", 4: "REC", 5: "CHT"}


def seat_labels(archetypes) -> list[str]:
    return [f"{i}:{ARCH_SHORT.get(int(a), '?')}" for i, a in enumerate(archetypes)]


# ---- figures ---------------------------------------------------------------------------------

def fig_learning_curves(records: list[dict], path: Path) -> None:
    """Episode return and invalid rate per update: mean over runs (seeds x lrs) with a 95% t-CI band."""
    steps = np.array([r["env_steps"] for r in records])
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, key, label in ((axes[0], "episode_return", "episode return (seat 0)"),
                           (axes[1], "invalid_rate", "invalid-action rate")):
        v = np.array([r[key] for r in records])  # (U, runs)
        for j in range(v.shape[1]):
            ax.plot(steps, v[:, j], lw=0.8, alpha=0.5, label=f"run {j}")
        mc = np.array([t_ci(row) for row in v])
        ax.plot(steps, mc[:, 0], color="k", lw=2, label=f"mean of {v.shape[1]}")
        if v.shape[1] > 1:
            ax.fill_between(steps, mc[:, 0] - mc[:, 1], mc[:, 0] + mc[:, 1], color="k", alpha=0.15, label="95% CI")
        ax.set(xlabel="env steps", ylabel=label)
        ax.legend(fontsize=7)
    n_runs = len(records[0]["episode_return"])
    axes[0].set_title(f"Learning curves ({n_runs} run(s) = seeds x lrs; band: 95% t-CI of the mean)", fontsize=10)
    axes[1].set_title("Invalid actions")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def fig_trust(trust: np.ndarray, labels: list[str], path: Path, title: str) -> None:
    """T[i, j] (row i trusts column j) at five points of episode 0."""
    t_max = trust.shape[0]
    times = sorted(set(int(round(x)) for x in np.linspace(0, t_max - 1, 5)))
    fig, axes = plt.subplots(1, len(times), figsize=(3.5 * len(times) + 1, 3.6))
    fig.subplots_adjust(wspace=0.45)
    im = None
    for ax, t in zip(np.atleast_1d(axes), times):
        im = ax.imshow(trust[t], vmin=0, vmax=1, cmap="viridis")
        ax.set_title(f"after step {t + 1}", fontsize=9)
        ax.set_xticks(range(len(labels)), labels, fontsize=7, rotation=45)
        ax.set_yticks(range(len(labels)), labels, fontsize=7)
        for i in range(trust.shape[1]):
            for j in range(trust.shape[2]):
                if i != j:
                    ax.text(j, i, f"{trust[t, i, j]:.2f}", ha="center", va="center", fontsize=6,
                            color="w" if trust[t, i, j] < 0.6 else "k")
    np.atleast_1d(axes)[0].set_ylabel("truster (row)")
    fig.suptitle(title, fontsize=10)
    fig.colorbar(im, ax=list(np.atleast_1d(axes)), shrink=0.8, label="T[row, col]")
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


def fig_utility_shocks(util: np.ndarray, shock: np.ndarray, labels: list[str], path: Path, title: str) -> None:
    """Every seat's utility per step, shocks shaded (orange: solar flare, blue: grid failure)."""
    fig, ax = plt.subplots(figsize=(10, 4))
    steps = np.arange(1, len(util) + 1)
    colors = {1: ("tab:orange", "solar flare (E)"), 2: ("tab:blue", "grid failure (C)")}
    seen = set()
    for t, k in enumerate(shock):
        if int(k) in colors:
            c, lab = colors[int(k)]
            ax.axvspan(t + 0.5, t + 1.5, color=c, alpha=0.2, lw=0, label=None if k in seen else lab)
            seen.add(k)
    for i in range(util.shape[1]):
        ax.plot(steps, util[:, i], lw=2 if i == 0 else 1.2, label=f"seat {labels[i]}" + (" (evaluated)" if i == 0 else ""))
    ax.set(xlabel="step", ylabel="utility min(E, C liquid)", title=title)
    ax.legend(fontsize=7, ncol=2, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def fig_trade_network(tm: np.ndarray, labels: list[str], path: Path, title: str) -> None:
    """Seats on a circle; edge width and label = mean trade volume per episode between the pair (both ways)."""
    n = tm.shape[0]
    sym = tm + tm.T
    ang = np.pi / 2 - 2 * np.pi * np.arange(n) / n
    xy = np.stack([np.cos(ang), np.sin(ang)], 1)
    fig, ax = plt.subplots(figsize=(6, 6))
    vmax = max(sym.max(), 1e-9)
    for i in range(n):
        for j in range(i + 1, n):
            if sym[i, j] > 0:
                w = 0.5 + 9.5 * sym[i, j] / vmax
                ax.plot(*zip(xy[i], xy[j]), color="tab:green", lw=w, alpha=0.6, zorder=1)
                mid = (xy[i] + xy[j]) / 2
                ax.text(*mid, f"{sym[i, j]:.1f}", fontsize=8, ha="center", va="center",
                        bbox=dict(boxstyle="round,pad=0.15", fc="w", ec="none", alpha=0.8), zorder=3)
    ax.scatter(xy[:, 0], xy[:, 1], s=900, c=["tab:red"] + ["tab:gray"] * (n - 1), zorder=2)
    for i in range(n):
        ax.text(*xy[i], labels[i], ha="center", va="center", fontsize=8, color="w", zorder=4)
    ax.set_title(title, fontsize=10)
    ax.set_xlim(-1.35, 1.35)
    ax.set_ylim(-1.35, 1.35)
    ax.set_aspect("equal")
    ax.axis("off")
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


def fig_crossplay(cp: dict, path: Path) -> None:
    names, m = cp["names"], np.array(cp["mean"])
    elo, elo2 = np.array(cp["elo"]), np.array(cp["elo_same_opponents"])
    k = len(names)
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(14, 5.8), gridspec_kw={"width_ratios": [1.4, 1]})
    im = ax.imshow(m, cmap="RdYlGn")
    ax.set_xticks(range(k), names, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(k), names, fontsize=8)
    ax.set_xlabel("column policy in every other seat")
    ax.set_ylabel("row policy in seat 0")
    lo, hi = m.min(), m.max()
    for a in range(k):
        for b in range(k):
            ax.text(b, a, f"{m[a, b]:.0f}", ha="center", va="center", fontsize=7,
                    color="k" if 0.25 < (m[a, b] - lo) / max(hi - lo, 1e-9) < 0.75 else "w")
    fig.colorbar(im, ax=ax, shrink=0.8, label="mean seat-0 return")
    ax.set_title(f"Cross-play ({cp['scenario']}, {cp['episodes']} episodes per cell)", fontsize=10)
    order = np.argsort(elo2)
    y = np.arange(k)
    ax2.barh(y + 0.2, elo2[order] - 1000, 0.4, left=1000, color="tab:purple",
             label="same opponents: a vs c in seat 0 facing the same column")
    ax2.barh(y - 0.2, elo[order] - 1000, 0.4, left=1000, color="tab:olive",
             label="head-to-head: a facing b vs b facing a")
    ax2.set_yticks(y, [names[i] for i in order], fontsize=8)
    ax2.axvline(1000, color="k", lw=0.8)
    ax2.legend(fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), title="Elo ratings", title_fontsize=9)
    ax2.set(xlabel="Elo (Bradley-Terry on paired wins; mean 1000)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def fig_attribution(panels: dict, path: Path) -> None:
    """panels: {scenario: {policy: attribution_rates(...)}}, one panel per scenario."""
    k = len(panels)
    width = max(7, 1.1 * max(len(a) for a in panels.values()) + 2)
    fig, axes = plt.subplots(k, 1, figsize=(width, 4.2 * k), squeeze=False)
    for ax, (scenario, att) in zip(axes[:, 0], panels.items()):
        _attribution_panel(ax, att, scenario)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _attribution_panel(ax, att: dict, scenario: str) -> None:
    names = list(att)
    x = np.arange(len(names))
    for off, key, ci, lab, c in ((-0.2, "rate_fm", "ci_fm", "after force-majeure break", "tab:blue"),
                                 (0.2, "rate_mal", "ci_mal", "after malicious break", "tab:red")):
        v = np.array([att[n][key] if att[n][key] is not None else np.nan for n in names], float)
        lo = np.array([att[n][ci][0] if att[n][ci][0] is not None else np.nan for n in names], float)
        hi = np.array([att[n][ci][1] if att[n][ci][1] is not None else np.nan for n in names], float)
        err = np.nan_to_num(np.stack([v - lo, hi - v]), nan=0.0)
        ax.bar(x + off, np.nan_to_num(v), 0.4, yerr=err, capsize=3, color=c, label=lab)
    ticks = [f"{n}\n{int(att[n]['fm_pair_steps'])} / {int(att[n]['mal_pair_steps'])}" for n in names]
    ax.set_xticks(x, ticks, fontsize=8)
    ax.set(ylabel="seat 0's trades per partner-step\nin the 10 steps after the break",
           title=f"Shock attribution ({scenario}): trades with a partner after its force-majeure vs malicious break "
                 f"(under each name: FM / malicious pair-steps)")
    ax.title.set_fontsize(9)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def fig_snapshots(snaps: dict, path: Path) -> None:
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for seed, r in snaps.items():
        steps = np.array(r["env_steps"])
        ax.plot(steps[1:], np.array(r["vs_past_gain"][1:], float), marker="o", label=seed)
        ax2.plot(steps[1:], np.array(r["vs_past_winrate"][1:], float), marker="o", label=seed)
    ax.axhline(0, color="k", lw=0.8)
    ax2.axhline(0.5, color="k", lw=0.8)
    ax.set(xlabel="env steps of the snapshot", ylabel="mean paired return gain vs past snapshots",
           title="Am I getting better? (return gain vs the past)")
    ax2.set(xlabel="env steps of the snapshot", ylabel="win rate vs past snapshots", ylim=(0, 1),
            title="Win rate against past snapshots")
    ax.legend(fontsize=8)
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def fig_scenarios(table: dict, path: Path) -> None:
    """Mean seat-0 return ± 95% CI per candidate, one panel per scenario."""
    names = list(table)
    cols = min(4, len(names))
    rows = int(np.ceil(len(names) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.3 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        r = table[name]["rows"]
        cands = list(r)
        y = np.arange(len(cands))
        m = np.array([r[c]["mean"] for c in cands])
        ci = np.array([r[c]["ci95"] for c in cands])
        colors = ["tab:red" if c.startswith(("seed", "trained")) or "/seed" in c else
                  "tab:gray" if c == "random" else "tab:blue" for c in cands]
        ax.errorbar(m, y, xerr=ci, fmt="none", ecolor="k", capsize=2)
        ax.scatter(m, y, c=colors, zorder=3)
        ax.set_yticks(y, cands, fontsize=7)
        ax.invert_yaxis()
        ax.set_title(f"{name} (N={table[name]['num_agents']})", fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
        ax.set_xlabel("seat-0 return", fontsize=8)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ---- the report --------------------------------------------------------------------------------

def _table_md(header: list[str], rows: list[list]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def _f(x, fmt=".3f"):
    return "n/a" if x is None or (isinstance(x, float) and not np.isfinite(x)) else format(x, fmt)


def train_command(cfg) -> str:
    """`python -m train k=v ...` with every config key that differs from the current defaults (configs/ppo.yaml)."""
    try:
        base = load_config().to_dict()
    except Exception:  # noqa: BLE001 - a broken default config should not stop a report
        base = {}
    parts = []
    for k, v in cfg.to_dict().items():
        if k == "env":
            parts += [f"env.{ek}={ev}" for ek, ev in v.items() if base.get("env", {}).get(ek) != ev]
        elif base.get(k) != v:
            parts.append(f"{k}={json.dumps(v) if isinstance(v, (list, bool)) else v}")
    return "python -m train " + " ".join(parts)


def _header(run_dir: Path, cfg, results: dict, command: str, suite_command: str) -> list[str]:
    """Title, the commands behind the report, the suite's size and what the intervals are."""
    return [f"# Evaluation report: `{run_dir}`", "",
            f"Generated by `{command}` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}); suite results from "
            f"{' then '.join(f'`{c}`' for c in results.get('commands', [results.get('command', '(not recorded)')]))} "
            f"(the whole suite is the same as `{suite_command}`). Training: `{train_command(cfg)}` (every key that differs from the current "
            f"configs/ppo.yaml; `config.yaml` in the run folder holds every value: {cfg.env_id}, lr {cfg.lr}, "
            f"{cfg.num_updates} updates x {cfg.num_envs} envs x {cfg.num_steps} steps, {cfg.num_seeds} seed(s)).", "",
            f"Suite: {results['episodes']} episodes per cell, episode keys from seed {results['seed']} shared by every "
            f"cell (paired comparisons); {results.get('wall_s', '?')} s wall. Policies in the bank: "
            f"{', '.join(results['bank'])}.", "",
            "Intervals are 95%: normal-approximation over episodes for returns (Student t over runs for the "
            "learning curves), episode bootstrap for the attribution rates.", ""]


def _learning_section(records: list[dict], fig_dir: Path) -> list[str]:
    """Learning curves from metrics.jsonl."""
    fig_learning_curves(records, fig_dir / "learning_curves.png")
    md = ["## Learning curves", "", "![learning curves](report/learning_curves.png)", "",
          f"Episode return of seat 0 per update for each of the {len(records[0]['episode_return'])} runs, their "
          "mean and a 95% t-interval across runs (from `metrics.jsonl`).", ""]
    return md


def _scenarios_section(results: dict, arrays: dict, fig_dir: Path) -> list[str]:
    """Held-out scenarios: bar chart and one table per scenario."""
    if "scenarios" not in results:
        return []
    fig_scenarios(results["scenarios"], fig_dir / "scenarios.png")
    md = ["## Held-out scenarios", "", "![scenarios](report/scenarios.png)", "",
          "Each candidate plays seat 0 (the LEARNER economy); every other seat is its scenario's NPC. "
          "Only `train-like` is the training distribution.", ""]
    for name, sc in results["scenarios"].items():
        over = ", ".join(f"`{k}={v}`" for k, v in sc["overrides"].items()) or "defaults"
        md += [f"**{name}** — `{sc['env_id']}`, {over}, N={sc['num_agents']}: {sc['note']}."
               + ("" if sc["policy_fits"] else " Trained policies not evaluated (input size fixed by the "
                                                  "training N)."), ""]
        md.append(_table_md(["policy in seat 0", "mean return ± 95% CI", "trades", "invalid rate",
                             "system U end", "shocks"],
                            [[c, f"{r['mean']:.2f} ± {r['ci95']:.2f}", f"{r['trades']:.1f}",
                              f"{r['invalid_rate']:.3f}", f"{r['system_utility_end']:.1f}", f"{r['shocks']:.1f}"]
                             for c, r in sc["rows"].items()]))
        md.append("")
    return md


def _episode_section(results: dict, arrays: dict, fig_dir: Path) -> list[str]:
    """One episode of the first scenario a policy plays: trust, utility and shocks, trades."""
    if "trace_trust" not in arrays:
        return []
    labels = seat_labels(arrays["trace_archetypes"])
    who = f"{arrays['trace_policy']} in seat 0, scenario {arrays['trace_scenario']}, episode 0"
    fig_trust(np.asarray(arrays["trace_trust"]), labels, fig_dir / "trust_heatmaps.png",
              f"Trust matrix through one episode ({who})")
    fig_utility_shocks(np.asarray(arrays["trace_utility"]), np.asarray(arrays["trace_shock"]), labels,
                       fig_dir / "utility_shocks.png", f"Utility and shocks ({who})")
    fig_trade_network(np.asarray(arrays["trade_matrix"]), labels, fig_dir / "trade_network.png",
                      f"Trade network: mean volume per episode between seats\n({arrays['trace_policy']} in "
                      f"seat 0, {arrays['trace_scenario']}, {results['episodes']} episodes)")
    md = ["## One episode: trust, utility, shocks, trades", "",
          "![trust](report/trust_heatmaps.png)", "",
          f"T[row, col] = how much the row seat trusts the column seat, at five points of episode 0 ({who}). "
          "Seat labels: index and archetype (LRN learner seat, BUL bully, ALT altruist, TFT tit-for-tat, "
          "REC reciprocator, CHT cheater).", "",
          "![utility](report/utility_shocks.png)", "",
          "Each seat's utility min(E, C) per step of the same episode; shaded steps had a shock active.", "",
          "![trade network](report/trade_network.png)", "",
          "Edge width and label: mean trade volume (give + want) per episode between the two seats, over all "
          "episodes of that cell.", ""]
    return md


def _crossplay_section(results: dict, arrays: dict, fig_dir: Path) -> list[str]:
    """Cross-play matrix and the two Elo ratings."""
    if "crossplay" not in results:
        return []
    cp = results["crossplay"]
    if "elo_same_opponents" not in cp and "crossplay_returns" in arrays:  # a suite.json from before
        cp.update(crossplay_ratings(np.asarray(arrays["crossplay_returns"])))
    fig_crossplay(cp, fig_dir / "crossplay.png")
    md = ["## Cross-play and ratings", "", "![cross-play](report/crossplay.png)", "",
          f"Cell (row a, column b): mean return of a in seat 0 while b plays every other seat (those seats keep "
          f"their economy: {cp['scenario']}'s archetype endowments and incomes). A trained policy in a non-zero "
          "seat sees that seat's id one-hot, which it never saw in training. Two Elo ratings, both Bradley-Terry "
          "fitted to paired wins on shared episode keys (ties half, one virtual draw per pair, 400 log10 "
          "strength, mean 1000): *same opponents* — a beats c when a in seat 0 returned more than c in seat 0 "
          "against the same column policy (who plays the seat better); *head-to-head* — a beats b when "
          "a-facing-b returned more than b-facing-a (who gains more from the pairing; in this general-sum game "
          "with a system-utility reward, being surrounded by generous opponents dominates it).", "",
          _table_md(["policy", "Elo (same opponents)", "Elo (head-to-head)", "mean return vs all columns"],
                    [[n, f"{e2:.0f}", f"{e:.0f}", f"{np.mean(cp['mean'][i]):.2f}"]
                     for i, (n, e, e2) in sorted(enumerate(zip(cp["names"], cp["elo"], cp["elo_same_opponents"])),
                                                 key=lambda t: -t[1][2])]),
          ""]
    return md


def _attribution_section(results: dict, arrays: dict, fig_dir: Path) -> list[str]:
    """Trade rates after force-majeure vs malicious breaks."""
    if "attribution" not in results:
        return []
    att = results["attribution"]["rows"]
    by = results["attribution"].get("by_scenario") or {results["attribution"]["scenario"]: att}
    panels = {n: by[n] for n in ("cheater-mix", results["attribution"]["scenario"]) if n in by} or by
    fig_attribution(panels, fig_dir / "attribution.png")
    md = ["## Shock attribution", "", "![attribution](report/attribution.png)", "",
          f"Scenario `{results['attribution']['scenario']}`. After partner j breaks a signal to seat 0, for 10 "
          "steps: seat 0's trades with j per pair-step (nexus_jax/wrappers/metrics.py), pooled over episodes, "
          "split by whether the ledger marked the break force majeure. A policy that tells shocks from "
          "cheating trades more after force-majeure breaks (gap > 0).", "",
          _table_md(["policy in seat 0", "rate after FM [95% CI]", "rate after malicious [95% CI]",
                     "gap FM − mal [95% CI]", "FM / mal pair-steps"],
                    [[n, f"{_f(r['rate_fm'])} [{_f(r['ci_fm'][0])}, {_f(r['ci_fm'][1])}]",
                      f"{_f(r['rate_mal'])} [{_f(r['ci_mal'][0])}, {_f(r['ci_mal'][1])}]",
                      f"{_f(r['gap'])} [{_f(r['ci_gap'][0])}, {_f(r['ci_gap'][1])}]",
                      f"{int(r['fm_pair_steps'])} / {int(r['mal_pair_steps'])}"] for n, r in att.items()]), ""]
    others = {n: rows for n, rows in by.items() if n != results["attribution"]["scenario"]}
    if others:
        md += ["The same windows are counted in every scenario; gap FM − malicious [95% CI] (FM / malicious "
               "pair-steps) where both kinds of break happened:", "",
               _table_md(["policy in seat 0"] + list(others),
                         [[p] + [f"{_f(others[n][p]['gap'])} [{_f(others[n][p]['ci_gap'][0])}, "
                                 f"{_f(others[n][p]['ci_gap'][1])}] ({int(others[n][p]['fm_pair_steps'])}/"
                                 f"{int(others[n][p]['mal_pair_steps'])})" if p in others[n] else "—"
                                 for n in others] for p in att]), ""]
    return md


def _snapshots_section(results: dict, arrays: dict, fig_dir: Path) -> list[str]:
    """Each snapshot against its past snapshots."""
    if not results.get("snapshots"):
        return []
    fig_snapshots(results["snapshots"], fig_dir / "snapshots.png")
    rows = []
    for seed, r in results["snapshots"].items():
        for j, u in enumerate(r["updates"]):
            rows.append([seed, u, r["env_steps"][j], _f(r["vs_past_return"][j], ".2f"),
                         _f(r["vs_past_gain"][j], "+.2f"), _f(r["vs_past_winrate"][j], ".2f"),
                         _f(r["self_play_return"][j], ".2f")])
    md = ["## Self-play snapshots: am I getting better?", "", "![snapshots](report/snapshots.png)", "",
          "Snapshots of each seed's params (update 0 = initialisation) play one another as in cross-play. "
          "For snapshot j: mean return in seat 0 against each earlier snapshot i < j, the mean paired gain "
          "(return of j facing i minus return of i facing j, same keys) and the win rate against earlier ones.",
          "", _table_md(["seed", "update", "env steps", "return vs past", "gain vs past", "win rate vs past",
                         "self-play return"], rows), ""]
    return md


def write_report(run_dir: Path, results: dict, arrays: dict, command: str, suite_command: str) -> Path:
    """RUN_DIR/report.md and its figures (RUN_DIR/report/*.png) from the suite's results and arrays."""
    run_dir = Path(run_dir)
    fig_dir = run_dir / "report"
    fig_dir.mkdir(exist_ok=True)
    cfg = load_config(run_dir / "config.yaml")
    records = [json.loads(line) for line in open(run_dir / "metrics.jsonl")]
    md = _header(run_dir, cfg, results, command, suite_command) + _learning_section(records, fig_dir)
    for section in (_scenarios_section, _episode_section, _crossplay_section, _attribution_section,
                    _snapshots_section):
        md += section(results, arrays, fig_dir)
    path = run_dir / "report.md"
    path.write_text("\n".join(md) + "\n")
    return path


def _read_suite(run: Path) -> tuple[dict, dict]:
    """suite.json + suite_arrays.npz of an earlier report, or UserInputError naming the file."""
    try:
        results = json.loads((run / "suite.json").read_text())
        arrays = dict(np.load(run / "suite_arrays.npz", allow_pickle=False))
    except FileNotFoundError as e:
        raise UserInputError(f"--reuse: {e.filename!r} not found (run without --reuse first)") from None
    except (ValueError, OSError, UnicodeDecodeError) as e:  # invalid JSON, a damaged npz
        raise UserInputError(f"--reuse: {str(run)!r}: suite.json or suite_arrays.npz is damaged ({one_line(e)})") \
            from None
    return results, {k: (v.item() if v.ndim == 0 else v) for k, v in arrays.items()}


@entry_point("python -m train.report")
def main(argv=None) -> int:
    ap = ArgumentParser(prog="python -m train.report", description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--episodes", type=positive_int, default=32, help="episodes per suite cell (default 32)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scenarios", nargs="*", default=None, metavar="NAME", help="default: all (train/suite/scenarios.py)")
    ap.add_argument("--reuse", action="store_true", help="redraw from suite.json + suite_arrays.npz")
    args = ap.parse_args(argv)
    run = Path(args.run_dir)
    load_run_config(run)  # a missing folder or config.yaml: one error line before anything runs
    unknown = [n for n in (args.scenarios or []) if n not in SCENARIOS]
    if unknown:
        ap.error(f"unknown scenario(s) {unknown}; known: {list(SCENARIOS)}")
    command = "python -m train.report " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    if args.reuse:
        results, arrays = _read_suite(run)
    else:
        enable_compilation_cache()
        results, arrays = run_suite(run, scenario_names=args.scenarios, episodes=args.episodes, seed=args.seed)
        results["command"] = command
        (run / "suite.json").write_text(json.dumps(results, indent=1))
        np.savez(run / "suite_arrays.npz", **{k: np.asarray(v) for k, v in arrays.items()})
    suite_command = (f"python -m train.evaluate {run} --suite --episodes {results['episodes']} --seed {results['seed']}"
                     + (" --scenarios " + " ".join(args.scenarios) if args.scenarios else ""))
    path = write_report(run, results, arrays, command, suite_command)
    print(f"wrote {path} and {run / 'report'}/*.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
