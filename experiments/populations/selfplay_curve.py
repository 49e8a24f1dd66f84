"""Self-play over training: each snapshot of a run plays every seat of an N-seat economy; population metrics per snapshot.

`python -m experiments.populations.selfplay_curve RUN_DIR [--seats N] [--episodes E] [--seed S]` loads the run's
bank (`load_bank`: final seeds and snapshots/), puts snapshot u in *every* seat of the run's
env with `num_agents=N` (default: the run's own N), plays E episodes on the same keys for
every snapshot, and reduces the SPEC 3 episode metrics (`nexus_jax.wrappers.summarize`):

- trades completed per episode (`trades_completed`) and mean off-diagonal trust over the
  episode (`mean_trust`), mean ± 95% CI over episodes (`train.stats.mean_ci`);
- the attribution gap: trades with a partner per pair-step in the 10 steps after it broke a
  signal, force majeure minus malicious, pooled over every seat (the suite's
  `attribution_rates`, episode-bootstrap CIs; the suite reports seat 0 only);
- the mean seat return.

Writes RUN_DIR/selfplay_curve.json and RUN_DIR/selfplay_curve.png (docs/populations.md).
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
import nexus_jax  # noqa: E402
import numpy as np  # noqa: E402

from nexus_jax.cli import ArgumentParser, UserInputError, entry_point, positive_int  # noqa: E402
from train.runtime import enable_compilation_cache  # noqa: E402
from train.stats import mean_ci  # noqa: E402
from train.runtime import jsonable  # noqa: E402
from train.suite.runner import load_bank, make_suite  # noqa: E402
from train.suite.scenarios import POLICY  # noqa: E402
from train.suite.studies import attribution_rates, window_counts  # noqa: E402


def population_cells(num_agents: int, bank_indices) -> list:
    """One cell per bank entry: that policy in every seat."""
    return [([POLICY] * num_agents, [int(i)] * num_agents) for i in bank_indices]


def cell_metrics(summary: dict, cell: int) -> dict:
    """Population metrics of one cell from `summarize` outputs with leaves (C, E, ...)."""
    n = np.asarray(summary["returns"]).shape[-1]
    out = {}
    for key, col in (("trades_completed", "trades_completed"), ("mean_trust", "mean_trust")):
        m, ci = mean_ci(np.asarray(summary[col])[cell])
        out[key] = {"mean": m, "ci95": ci}
    m, ci = mean_ci(np.asarray(summary["returns"])[cell].mean(-1))
    out["seat_return"] = {"mean": m, "ci95": ci}
    out["attribution"] = attribution_rates(*window_counts(summary, cell, range(n)))
    return out


def run_curve(run_dir, seats: int | None = None, episodes: int = 8, seed: int = 0) -> dict:
    """Every snapshot of every seed in every seat of the run's env at N = `seats` -> JSON-able results."""
    cfg, policy, bank = load_bank([Path(run_dir)])
    if not bank.snapshots:
        raise UserInputError(f"{run_dir}: no snapshots/ (train with snapshot_every != 0)")
    n = seats or nexus_jax.make(cfg.env_id, **cfg.env).default_params.num_agents
    if n != nexus_jax.make(cfg.env_id, **cfg.env).default_params.num_agents and not hasattr(policy, "seat_obs"):
        raise UserInputError(f"{run_dir}: network={cfg.network!r} plays only at its training N; --seats needs "
                             f"network=entity")
    params = nexus_jax.make(cfg.env_id, **{**cfg.env, "num_agents": n}).default_params
    entries = [(name, u, steps, idx) for name, snaps in bank.snapshots.items() for u, steps, idx in snaps]
    suite = make_suite(cfg, policy, bank, episodes, chunk=len(entries), seed=seed)
    t0 = time.time()
    out = suite.run_cells(params, population_cells(n, [e[3] for e in entries]))
    rows = [{"seed": name, "update": u, "env_steps": steps, "agent_steps": steps * n,
             **cell_metrics(out.summary, c)} for c, (name, u, steps, _) in enumerate(entries)]
    return {"run_dir": str(run_dir), "env_id": cfg.env_id, "num_agents": n, "episodes": episodes, "seed": seed,
            "rows": rows, "wall_s": round(time.time() - t0, 1)}


def plot_curve(res: dict, path: Path) -> None:
    """Trade completion, trust, attribution (FM and malicious rates, gap) and return against training env steps."""
    fig, axes = plt.subplots(1, 4, figsize=(18, 3.8))
    for seed in sorted({r["seed"] for r in res["rows"]}):
        rows = [r for r in res["rows"] if r["seed"] == seed]
        x = np.array([r["env_steps"] for r in rows])
        for ax, key, label in ((axes[0], "trades_completed", "trades completed per episode"),
                               (axes[1], "mean_trust", "mean trust (off-diagonal, over the episode)"),
                               (axes[3], "seat_return", "mean seat return")):
            m = np.array([r[key]["mean"] for r in rows])
            ci = np.array([r[key]["ci95"] for r in rows])
            ax.errorbar(x, m, yerr=ci, marker="o", capsize=3, label=seed)
            ax.set(xlabel="training env steps", ylabel=label)
        att = [r["attribution"] for r in rows]
        num = lambda v: np.nan if v is None else v  # noqa: E731  (JSON null: no window of that kind)
        val = lambda k: np.array([num(a[k]) for a in att], float)  # noqa: E731
        err = lambda k, ck: np.nan_to_num(np.abs(np.array([[num(a[ck][0]), num(a[ck][1])] for a in att],  # noqa: E731
                                                          float).T - val(k)))
        for k, ck, lab, c in (("rate_fm", "ci_fm", "after force majeure", "tab:blue"),
                              ("rate_mal", "ci_mal", "after malicious", "tab:red"),
                              ("gap", "ci_gap", "gap FM - malicious", "k")):
            axes[2].errorbar(x, val(k), yerr=err(k, ck), marker="o", capsize=3, color=c, label=f"{seed}: {lab}")
        axes[2].axhline(0, color="gray", lw=0.8)
        axes[2].set(xlabel="training env steps", ylabel="trades per partner-step, 10 steps after a break")
    for ax in axes:
        ax.legend(fontsize=7)
    fig.suptitle(f"{res['env_id']}, N={res['num_agents']}: each snapshot in every seat, {res['episodes']} episodes "
                 f"per point (95% CIs)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def format_curve(res: dict) -> str:
    """The table; attribution rates are trades per 1,000 pair-steps (per-pair rates are small at large N)."""
    k = lambda x: "n/a" if x is None or not np.isfinite(x) else f"{1000 * x:+.3f}"  # noqa: E731
    lines = [f"{res['env_id']} N={res['num_agents']}, {res['episodes']} episodes per snapshot (same keys); "
             "attribution: trades per 1,000 pair-steps after a partner's break",
             f"{'seed':<7}{'update':>7}{'env steps':>10}{'trades':>16}{'mean trust':>18}{'after FM':>10}"
             f"{'after mal':>10}{'gap FM-mal [95% CI]':>28}{'FM/mal pair-steps':>20}{'return':>18}"]
    for r in res["rows"]:
        a = r["attribution"]
        gap = f"{k(a['gap'])} [{k(a['ci_gap'][0])}, {k(a['ci_gap'][1])}]"
        lines.append(f"{r['seed']:<7}{r['update']:>7}{r['env_steps']:>10}"
                     f"{r['trades_completed']['mean']:>9.1f} ± {r['trades_completed']['ci95']:<5.1f}"
                     f"{r['mean_trust']['mean']:>11.3f} ± {r['mean_trust']['ci95']:<5.3f}"
                     f"{k(a['rate_fm']):>10}{k(a['rate_mal']):>10}{gap:>28}"
                     f"{int(a['fm_pair_steps']):>11} / {int(a['mal_pair_steps']):<7}"
                     f"{r['seat_return']['mean']:>11.2f} ± {r['seat_return']['ci95']:<5.2f}")
    return "\n".join(lines)


@entry_point("python -m experiments.populations.selfplay_curve")
def main(argv=None) -> int:
    ap = ArgumentParser(prog="python -m experiments.populations.selfplay_curve", description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--seats", type=positive_int, default=None, help="N (default: the run's own)")
    ap.add_argument("--episodes", type=positive_int, default=8, help="episodes per snapshot (default 8)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.seats is not None and not 2 <= args.seats <= 64:
        raise UserInputError(f"--seats: N must lie in 2..64, got {args.seats}")
    enable_compilation_cache()
    res = run_curve(args.run_dir, args.seats, args.episodes, args.seed)
    res["command"] = "python -m experiments.populations.selfplay_curve " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    res = jsonable(res)
    print(format_curve(res))
    run = Path(args.run_dir)
    (run / "selfplay_curve.json").write_text(json.dumps(res, indent=1))
    plot_curve(res, run / "selfplay_curve.png")
    print(f"\nwrote {run / 'selfplay_curve.json'} and {run / 'selfplay_curve.png'} ({res['wall_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
