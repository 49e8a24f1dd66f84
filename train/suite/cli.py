"""Running the suite on a run folder: `run_suite` (the asked parts, JSON-able results) and the CLI glue of
`python -m train.evaluate RUN_DIR --suite ...` (suite.json merged across partial runs, suite_arrays.npz)."""
from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

import numpy as np

from nexus_jax.cli import UserInputError
from train.suite.runner import load_bank, make_suite
from train.runtime import jsonable
from train.suite.scenarios import ATTRIBUTION_SCENARIO, SCENARIOS, scenario_params
from train.suite.studies import (attribution_from, crossplay_candidates, format_attribution, format_crossplay,
                                 format_scenarios, format_snapshots, run_crossplay, run_scenarios, run_snapshot_curves)



def run_suite(run_dir, parts=("scenarios", "crossplay", "snapshots", "attribution"), scenario_names=None,
              episodes: int = 32, seed: int = 0, extra_runs=(), chunk: int = 8, scenarios: dict | None = None,
              log=lambda *a: print(*a, flush=True)) -> tuple[dict, dict]:
    """Run the asked suite parts on a run folder -> (results (JSON-able), arrays for the report)."""
    cfg, policy, bank = load_bank([Path(run_dir)] + [Path(r) for r in extra_runs])
    suite = make_suite(cfg, policy, bank, episodes, chunk, seed)
    scenarios = scenarios or SCENARIOS
    results = {"run_dir": str(run_dir), "episodes": episodes, "seed": seed, "bank": bank.names}
    arrays = {}
    t0 = time.time()
    if "scenarios" in parts or "attribution" in parts:
        names = list(scenario_names or scenarios)
        if "attribution" in parts and ATTRIBUTION_SCENARIO in scenarios and ATTRIBUTION_SCENARIO not in names:
            names.append(ATTRIBUTION_SCENARIO)
        table, raw = run_scenarios(suite, bank, names, scenarios, log)
        if "scenarios" in parts:
            results["scenarios"] = table
            log(format_scenarios(table))
        first = next((n for n in names if table[n]["policy_fits"]), None)
        if first is not None:
            o, c = raw[first]["out"], 0
            arrays.update(trace_scenario=first, trace_policy=raw[first]["candidates"][c],
                          trace_trust=o.trace_trust[c], trace_utility=o.trace_utility[c],
                          trace_shock=o.trace_shock[c], trade_matrix=o.trade_matrix[c].mean(0),
                          trace_archetypes=np.asarray(scenario_params(first, scenarios)[0].archetypes))
        if "attribution" in parts and ATTRIBUTION_SCENARIO in raw:
            # free for every scenario (the windows are counted in every episode); the study's own is cheater-storm
            by = {n: attribution_from(raw[n]) for n in raw}
            by = {n: rows for n, rows in by.items()
                  if any(r["fm_pair_steps"] > 0 and r["mal_pair_steps"] > 0 for r in rows.values())}
            results["attribution"] = {"scenario": ATTRIBUTION_SCENARIO, "rows": by[ATTRIBUTION_SCENARIO]
                                      if ATTRIBUTION_SCENARIO in by else attribution_from(raw[ATTRIBUTION_SCENARIO]),
                                      "by_scenario": by}
            for n, rows in by.items():
                log(format_attribution(rows, n))
        log(f"[scenarios] {time.time() - t0:.0f} s")
    if "crossplay" in parts:
        t1 = time.time()
        cp = run_crossplay(suite, crossplay_candidates(bank), scenarios=scenarios)
        arrays["crossplay_returns"] = cp["_returns"]
        results["crossplay"] = cp
        log(format_crossplay(cp))
        log(f"[crossplay] {time.time() - t1:.0f} s")
    if "snapshots" in parts:
        t1 = time.time()
        results["snapshots"] = run_snapshot_curves(suite, bank, scenarios=scenarios)
        log(format_snapshots(results["snapshots"]))
        log(f"[snapshots] {time.time() - t1:.0f} s")
    results["wall_s"] = round(time.time() - t0, 1)
    return jsonable(results), arrays


def merge_results(old: dict, new: dict) -> dict:
    """A partial suite run updates suite.json: scenario tables merge per scenario, other parts are replaced,
    and `commands` keeps every command that contributed."""
    out = {**old, **new}
    if "scenarios" in old and "scenarios" in new:
        out["scenarios"] = {**old["scenarios"], **new["scenarios"]}
    out["commands"] = old.get("commands", [old["command"]] if "command" in old else []) + [new.get("command", "?")]
    return out


def run_suite_cli(args) -> int:
    parts = set()
    if args.suite:
        parts = {"scenarios", "crossplay", "snapshots", "attribution"}
    if args.scenarios is not None:
        parts.add("scenarios")
    for p in ("crossplay", "snapshots", "attribution"):
        if getattr(args, p):
            parts.add(p)
    unknown = [n for n in (args.scenarios or []) if n not in SCENARIOS]
    if unknown:
        raise UserInputError(f"unknown scenario(s) {unknown}; known: {list(SCENARIOS)}")
    results, arrays = run_suite(args.run_dir, tuple(parts), args.scenarios or None, args.episodes or 32,
                                args.seed or 0, args.runs)
    results["command"] = "python -m train.evaluate " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    run = Path(args.run_dir)
    path = run / "suite.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    merged = merge_results(old, results)
    path.write_text(json.dumps(merged, indent=1))
    arr_path = run / "suite_arrays.npz"
    old_arrays = dict(np.load(arr_path)) if arr_path.exists() else {}
    np.savez(arr_path, **{**old_arrays, **{k: np.asarray(v) for k, v in arrays.items()}})
    print(f"\nwrote {path} and {run / 'suite_arrays.npz'} ({results['wall_s']} s)")
    return 0
