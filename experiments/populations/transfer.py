"""Transfer across the number of seats: an entity-network policy trained at one N, played at others.

`python -m experiments.populations.transfer RUN_DIR --seats 4 8 16 64 [--episodes E]` puts each of the run's
trained seeds, a random player and every heuristic archetype in seat 0 of an N-seat economy
(the other seats play their archetypes' NPC policies: the default mix repeated), on the same
episode keys, and reports seat 0's mean return with 95% CIs, which heuristics the policy
beats beyond the CIs, and the paired difference (policy minus heuristic on the same episode
key) with its 95% CI: at large N the seat's return is mostly the rest of the economy's
(reward mode "system"), which the same keys cancel. N=8 and 16 are the suite's held-out "8-seats" and "16-seats"
scenarios; other N are nexus-v0 with `num_agents=N`. Writes RUN_DIR/transfer.json.
"""
from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

import numpy as np

from nexus_jax.cli import ArgumentParser, UserInputError, entry_point, positive_int
from train.runtime import enable_compilation_cache
from train.stats import ci_above, summary
from train.runtime import jsonable
from train.suite.runner import load_bank, make_suite
from train.suite.scenarios import SCENARIOS
from train.suite.studies import run_scenarios


def seat_scenarios(seats) -> dict:
    """N -> scenario entries named "<N>-seats" ("train-like" for N=4), reusing the suite's where it has one."""
    out = {}
    for n in seats:
        if n == 4:
            out["train-like"] = SCENARIOS["train-like"]
        elif f"{n}-seats" in SCENARIOS:
            out[f"{n}-seats"] = SCENARIOS[f"{n}-seats"]
        else:
            out[f"{n}-seats"] = {"env_id": "nexus-v0", "overrides": {"num_agents": n},
                                 "note": f"{n} seats (default mix repeated); not in the suite"}
    return out


def verdicts(table: dict) -> dict:
    """Per scenario: the heuristics each trained seed beats beyond the 95% CIs, and those it does not."""
    out = {}
    for name, sc in table.items():
        rows = sc["rows"]
        heur = [k for k in rows if not k.startswith("seed") and k not in ("random", "trained (all seeds)")]
        out[name] = {seed: {"beats": [h for h in heur if ci_above(r, rows[h])],
                            "not": [h for h in heur if not ci_above(r, rows[h])]}
                     for seed, r in rows.items() if seed.startswith("seed")}
    return out


def paired(raw: dict) -> dict:
    """Per scenario, seed and heuristic: summary of seat 0's return of the seed minus the heuristic's, per key."""
    out = {}
    for name, r in raw.items():
        ret = np.asarray(r["out"].returns)[:, :, 0]  # (candidates, episodes)
        names = r["candidates"]
        seeds = [i for i, c in enumerate(names) if c.startswith("seed")]
        others = [i for i, c in enumerate(names) if not c.startswith("seed")]
        out[name] = {names[s]: {names[h]: summary(ret[s] - ret[h]) for h in others} for s in seeds}
    return out


def run_transfer(run_dir, seats=(4, 8, 16), episodes: int = 64, seed: int = 0, log=print) -> dict:
    cfg, policy, bank = load_bank([Path(run_dir)])
    if not hasattr(policy, "seat_obs"):
        raise UserInputError(f"{run_dir}: network={cfg.network!r}; transfer across N needs network=entity")
    suite = make_suite(cfg, policy, bank, episodes, chunk=8, seed=seed, policy_seats=(0,))
    scenarios = seat_scenarios(seats)
    t0 = time.time()
    table, raw = run_scenarios(suite, bank, list(scenarios), scenarios, log)
    returns = {name: {c: np.asarray(r["out"].returns)[i, :, 0].tolist() for i, c in enumerate(r["candidates"])}
               for name, r in raw.items()}
    return {"run_dir": str(run_dir), "episodes": episodes, "seed": seed, "scenarios": table,
            "verdicts": verdicts(table), "paired": paired(raw), "seat0_returns": returns,
            "wall_s": round(time.time() - t0, 1)}


def format_transfer(res: dict) -> str:
    lines = [f"Transfer: seat-0 return over {res['episodes']} episodes per row (same keys), mean ± 95% CI"]
    for name, sc in res["scenarios"].items():
        lines.append(f"\n[{name}] N={sc['num_agents']}")
        for cand, r in sc["rows"].items():
            lines.append(f"  {cand:<22}{r['mean']:>9.2f} ± {r['ci95']:<6.2f} trades {r['trades']:>5.1f}  "
                         f"invalid {r['invalid_rate']:.3f}")
        for s, v in res["verdicts"][name].items():
            lines.append(f"  {s} beats beyond the CIs: {', '.join(v['beats']) or 'none'}; "
                         f"not: {', '.join(v['not']) or '-'}")
            diffs = res["paired"][name][s]
            lines.append(f"  {s} minus each, paired on keys: " +
                         ", ".join(f"{h} {d['mean']:+.2f} ± {d['ci95']:.2f}" for h, d in diffs.items()))
    return "\n".join(lines)


@entry_point("python -m experiments.populations.transfer")
def main(argv=None) -> int:
    ap = ArgumentParser(prog="python -m experiments.populations.transfer", description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--seats", type=positive_int, nargs="+", default=[4, 8, 16])
    ap.add_argument("--episodes", type=positive_int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if any(n < 2 or n > 64 for n in args.seats):
        raise UserInputError(f"--seats: every N must lie in 2..64, got {args.seats}")
    enable_compilation_cache()
    res = run_transfer(args.run_dir, args.seats, args.episodes, args.seed, log=lambda *a: print(*a, flush=True))
    res["command"] = "python -m experiments.populations.transfer " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    print(format_transfer(res))
    path = Path(args.run_dir) / "transfer.json"
    path.write_text(json.dumps(jsonable(res), indent=1))
    print(f"\nwrote {path} ({res['wall_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
