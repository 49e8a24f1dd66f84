"""The suite's studies over a bank of policies: held-out scenarios, cross-play with Elo, snapshot curves, shock attribution.

Each study builds cells (`train.suite.scenarios`), runs them through a `Suite`
(`train.suite.runner`) and reduces the returns on the host; `snapshot_curve` and
`attribution_rates` are the study-specific reductions (pure numpy, testable on hand data),
the shared statistics live in `train.stats`. `format_*` print each study's table.
"""
from __future__ import annotations

import time

import numpy as np

from train.stats import bradley_terry, elo_from_strengths, mean_ci, pairwise_wins, row_wins
from train.suite.runner import Bank, Suite
from train.suite.scenarios import (ATTRIBUTION_SCENARIO, CROSSPLAY_HEURISTICS, POLICY, RANDOM, SCENARIOS,
                                   heuristic_candidates, scenario_params, seat0_cells, versus_cells)


def snapshot_curve(returns: np.ndarray) -> dict:
    """"Am I getting better": snapshots 0..S-1 in training order, returns (S, S, E) as in cross-play.

    For each snapshot j >= 1: `vs_past_return` = mean over past i < j of its mean seat-0
    return against i; `vs_past_gain` = mean over i < j of (return of j facing i - return of i
    facing j) on the same keys; `vs_past_winrate` = share of paired episodes j beat i
    (ties half). Snapshot 0 has no past: NaN.
    """
    r = np.asarray(returns, np.float64)
    s = r.shape[0]
    m = r.mean(-1)
    w = pairwise_wins(r) / r.shape[-1]
    ret, gain, win = [np.nan], [np.nan], [np.nan]
    for j in range(1, s):
        ret.append(float(m[j, :j].mean()))
        gain.append(float((m[j, :j] - m[:j, j]).mean()))
        win.append(float(w[j, :j].mean()))
    return {"vs_past_return": ret, "vs_past_gain": gain, "vs_past_winrate": win, "self_play_return": m.diagonal().tolist()}


def attribution_rates(fm_trades, fm_steps, mal_trades, mal_steps, boot: int = 1000, seed: int = 0) -> dict:
    """Pooled trade rates with a partner inside the windows after its force-majeure vs malicious breaks.

    Inputs are per-episode counts (E,) of the learner seat (metrics.py: after_*_trades and
    after_*_steps). rate = sum(trades) / sum(pair-steps); 95% CIs by an episode bootstrap.
    """
    a = [np.asarray(x, np.float64).reshape(-1) for x in (fm_trades, fm_steps, mal_trades, mal_steps)]
    fm_t, fm_s, mal_t, mal_s = a

    def rates(idx):
        f = fm_t[idx].sum() / fm_s[idx].sum() if fm_s[idx].sum() > 0 else np.nan
        m = mal_t[idx].sum() / mal_s[idx].sum() if mal_s[idx].sum() > 0 else np.nan
        return f, m

    full = np.arange(len(fm_t))
    f, m = rates(full)
    rng = np.random.default_rng(seed)
    bs = np.array([rates(rng.integers(0, len(fm_t), len(fm_t))) for _ in range(boot)]) if len(fm_t) > 1 else \
        np.full((1, 2), np.nan)
    gap = bs[:, 0] - bs[:, 1]

    def ci(x):
        x = x[np.isfinite(x)]
        return [float(np.percentile(x, 2.5)), float(np.percentile(x, 97.5))] if len(x) else [np.nan, np.nan]

    return {"rate_fm": float(f), "rate_mal": float(m), "gap": float(f - m),
            "ci_fm": ci(bs[:, 0]), "ci_mal": ci(bs[:, 1]), "ci_gap": ci(gap),
            "fm_pair_steps": float(fm_s.sum()), "mal_pair_steps": float(mal_s.sum()),
            "episodes_with_fm": int((fm_s > 0).sum()), "episodes_with_mal": int((mal_s > 0).sum())}


def _policy_cand(bank: Bank, i: int) -> tuple[str, int, int]:
    return (bank.names[i], POLICY, i)


def run_scenarios(suite: Suite, bank: Bank, names=None, scenarios: dict | None = None,
                  log=None) -> tuple[dict, dict]:
    """Every candidate in seat 0 of each scenario -> ({scenario: {candidate: stats}}, raw outputs)."""
    scenarios = scenarios or SCENARIOS
    table, raw = {}, {}
    for name in names or list(scenarios):
        t0 = time.time()
        params, _ = scenario_params(name, scenarios)
        cands = []
        if suite.fits(params.num_agents):
            cands += [_policy_cand(bank, i) for i in bank.seeds] + [("random", RANDOM, 0)]
        cands += heuristic_candidates()
        out = suite.run_cells(params, seat0_cells(params, cands))
        rows = {}
        for c, (cn, kind, _) in enumerate(cands):
            rows[cn] = _seat0_stats(out, c)
        if len(bank.seeds) > 1 and suite.fits(params.num_agents):
            rows["trained (all seeds)"] = _seat0_stats(out, [i for i, c in enumerate(cands) if c[1] == POLICY])
        table[name] = {"env_id": scenarios[name]["env_id"], "overrides": scenarios[name]["overrides"],
                       "note": scenarios[name]["note"], "num_agents": params.num_agents,
                       "policy_fits": suite.fits(params.num_agents), "rows": rows}
        raw[name] = {"candidates": [c[0] for c in cands], "out": out}
        if log is not None:
            log(f"  scenario {name}: {len(cands)} candidates, {time.time() - t0:.0f} s")
    return table, raw


def _seat0_stats(out, cells) -> dict:
    cells = np.atleast_1d(cells)
    s = out.summary
    pick = lambda x: np.asarray(x)[cells].reshape((-1,) + np.asarray(x).shape[2:])  # noqa: E731
    ret = pick(out.returns)[:, 0]
    m, ci = mean_ci(ret)
    stats = {"mean": m, "ci95": ci, "n": int(len(ret))}
    for key, col in (("trades", "trades"), ("invalid_rate", "invalid_action_rate"), ("final_utility", "final_utility"),
                     ("signals_broken", "signals_broken")):
        stats[key] = float(pick(s[col])[:, 0].mean())
    stats["system_utility_end"] = float(pick(s["system_utility_end"]).mean())
    stats["shocks"] = float(pick(s["shocks"]).mean())
    return stats


def format_scenarios(table: dict) -> str:
    lines = []
    for name, sc in table.items():
        over = ", ".join(f"{k}={v}" for k, v in sc["overrides"].items()) or "defaults"
        lines.append(f"\n[{name}] {sc['env_id']} ({over}), N={sc['num_agents']}: {sc['note']}")
        if not sc["policy_fits"]:
            lines.append("  (trained policies not evaluated here: their input size is fixed by the training N)")
        lines.append(f"  {'policy in seat 0':<22}{'mean return':>12}{'± 95% CI':>10}{'trades':>8}{'invalid':>9}"
                     f"{'sys U end':>11}")
        for cn, r in sc["rows"].items():
            lines.append(f"  {cn:<22}{r['mean']:>12.2f}{r['ci95']:>10.2f}{r['trades']:>8.1f}{r['invalid_rate']:>9.3f}"
                         f"{r['system_utility_end']:>11.1f}")
    return "\n".join(lines)


def crossplay_candidates(bank: Bank, heuristics=CROSSPLAY_HEURISTICS, early_snapshot: bool = True) -> list:
    """Trained seeds, the first seed's untrained (update 0) snapshot, random, and heuristic archetypes."""
    cands = [_policy_cand(bank, i) for i in bank.seeds]
    if early_snapshot and bank.snapshots:
        first = next(iter(bank.snapshots.values()))
        cands.append(_policy_cand(bank, first[0][2]))
    return cands + [("random", RANDOM, 0)] + heuristic_candidates(heuristics)


def run_crossplay(suite: Suite, cands: list, scenario: str = "train-like", scenarios: dict | None = None) -> dict:
    """Row policy in seat 0 vs the column policy in every other seat -> returns (K, K, E), Elo."""
    params, _ = scenario_params(scenario, scenarios)
    out = suite.run_cells(params, versus_cells(params, cands, cands))
    k = len(cands)
    ret = np.asarray(out.returns)[:, :, 0].reshape(k, k, -1)
    return {"scenario": scenario, "names": [c[0] for c in cands], "mean": ret.mean(-1).tolist(),
            "ci95": [[mean_ci(ret[a, b])[1] for b in range(k)] for a in range(k)],
            **crossplay_ratings(ret), "episodes": int(ret.shape[-1]), "_returns": ret}


def crossplay_ratings(ret: np.ndarray) -> dict:
    """Two Elo ratings from (K, K, E) cross-play returns (see docs/evaluation.md):
    `elo`: head-to-head, a-facing-b vs b-facing-a on the same key (who gains more from the pairing);
    `elo_same_opponents`: a vs c in seat 0 against the same column b on the same key (who plays seat 0 better)."""
    wins = pairwise_wins(ret)
    return {"winrate": (wins / ret.shape[-1]).tolist(),
            "elo": elo_from_strengths(bradley_terry(wins, prior=1.0)).tolist(),
            "elo_same_opponents": elo_from_strengths(bradley_terry(row_wins(ret), prior=1.0)).tolist()}


def run_snapshot_curves(suite: Suite, bank: Bank, scenario: str = "train-like", max_snapshots: int = 6,
                        scenarios: dict | None = None) -> dict:
    """Per seed: every snapshot against every other (cross-play among snapshots) -> snapshot_curve."""
    params, _ = scenario_params(scenario, scenarios)
    res = {}
    for seed_name, snaps in bank.snapshots.items():
        if len(snaps) > max_snapshots:  # keep the first and last, evenly spaced between
            keep = np.unique(np.round(np.linspace(0, len(snaps) - 1, max_snapshots)).astype(int))
            snaps = [snaps[i] for i in keep]
        cands = [_policy_cand(bank, idx) for _, _, idx in snaps]
        out = suite.run_cells(params, versus_cells(params, cands, cands))
        k = len(cands)
        ret = np.asarray(out.returns)[:, :, 0].reshape(k, k, -1)
        res[seed_name] = {"updates": [u for u, _, _ in snaps], "env_steps": [s for _, s, _ in snaps],
                          **snapshot_curve(ret), "mean": ret.mean(-1).tolist()}
    return res


def window_counts(summary: dict, cell: int, seats=(0,)) -> tuple:
    """Per-episode (fm_trades, fm_steps, mal_trades, mal_steps) of cell `cell`, summed over `seats`, from
    `metrics.summarize` outputs with leaves (C, E, N): the inputs of `attribution_rates`."""
    seats = list(seats)
    pick = lambda k: np.asarray(summary[k])[cell][:, seats]  # noqa: E731  (E, len(seats))
    fm_s, mal_s = pick("attribution_windows_force_majeure"), pick("attribution_windows_malicious")
    fm_t = np.round(pick("trade_rate_after_force_majeure") * np.maximum(fm_s, 1))
    mal_t = np.round(pick("trade_rate_after_malicious") * np.maximum(mal_s, 1))
    return fm_t.sum(1), fm_s.sum(1), mal_t.sum(1), mal_s.sum(1)


def attribution_from(raw_scenario: dict) -> dict:
    """Seat 0's trade rate with a partner after its force-majeure vs malicious breaks, per candidate."""
    s = raw_scenario["out"].summary
    return {name: attribution_rates(*window_counts(s, c)) for c, name in enumerate(raw_scenario["candidates"])}


def format_crossplay(cp: dict) -> str:
    names = cp["names"]
    w = max(len(n) for n in names) + 2
    lines = [f"\nCross-play ({cp['scenario']}, {cp['episodes']} episodes per cell): mean return of the row policy in "
             f"seat 0 with the column policy in every other seat", " " * w + "".join(f"{n[:9]:>10}" for n in names)]
    for a, n in enumerate(names):
        lines.append(f"{n:<{w}}" + "".join(f"{v:>10.1f}" for v in cp["mean"][a]))
    lines.append("Elo head-to-head (a facing b vs b facing a, same keys; Bradley-Terry, mean 1000): " +
                 ", ".join(f"{n} {e:.0f}" for n, e in sorted(zip(names, cp["elo"]), key=lambda t: -t[1])))
    lines.append("Elo same opponents (a vs c in seat 0 against the same column, same keys): " +
                 ", ".join(f"{n} {e:.0f}" for n, e in sorted(zip(names, cp["elo_same_opponents"]),
                                                             key=lambda t: -t[1])))
    return "\n".join(lines)


def format_snapshots(res: dict) -> str:
    lines = ["\nSnapshots vs their past (mean over earlier snapshots; seat-0 return, paired gain, win rate):"]
    for seed, r in res.items():
        for j, u in enumerate(r["updates"]):
            if j == 0:
                lines.append(f"  {seed} update {u:>5}: (no past)  self-play return {r['self_play_return'][0]:.2f}")
            else:
                lines.append(f"  {seed} update {u:>5}: return {r['vs_past_return'][j]:7.2f}  gain "
                             f"{r['vs_past_gain'][j]:+6.2f}  win rate {r['vs_past_winrate'][j]:.2f}")
    return "\n".join(lines)


def format_attribution(att: dict, scenario: str = ATTRIBUTION_SCENARIO) -> str:
    lines = [f"\nShock attribution ({scenario}): seat 0's trades per partner-step in the 10 steps after "
             f"that partner broke a signal to it", f"  {'policy in seat 0':<22}{'after FM':>10}{'after malicious':>17}"
             f"{'gap (95% CI)':>24}{'FM / mal pair-steps':>22}"]
    for name, r in att.items():
        f = lambda x: "n/a" if x is None or not np.isfinite(x) else f"{x:.3f}"  # noqa: E731
        gap = f"{f(r['gap'])} [{f(r['ci_gap'][0])}, {f(r['ci_gap'][1])}]"
        lines.append(f"  {name:<22}{f(r['rate_fm']):>10}{f(r['rate_mal']):>17}{gap:>24}"
                     f"{int(r['fm_pair_steps']):>11} / {int(r['mal_pair_steps'])}")
    return "\n".join(lines)
