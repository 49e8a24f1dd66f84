"""`python -m train.crisis_seeds`: PPO on crisis-v0 over several training seeds against EDF, with CIs.

Trains `--seeds` PPO runs of `configs/crisis_ppo.yaml` (plus `key=value` overrides) in one
vmapped jit (run i's key is `split(PRNGKey(seed), seeds)[i]`), then evaluates every run's
sampled and argmax policies and the EDF heuristic on the holdout and fixed evaluations of
`train.crisis_eval` (same episode keys for every agent). Prints one row per run and agent
(mean ± 95% CI over `--episodes` episodes), whether each run beats EDF (CIs apart), and the
paired difference to EDF on the same episodes (mean ± 95% CI of reward - EDF's reward);
writes `runs/<name>/crisis_seeds.json`.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import jax
import numpy as np

import nexus_jax
from nexus_jax.cli import ArgumentParser, entry_point, positive_int
from train.config import load_config
from train.crisis_eval import FIXED_ENV, FIXED_SEED, HOLDOUT_ENV, edf, make_rollout, ppo_policy
from train.networks import ActorCritic
from train.ppo import make_env, make_train
from train.runtime import enable_compilation_cache
from train.stats import beats, mean_ci

METRICS = ("total_reward", "on_time_rate", "completion_rate")


def train_runs(cfg, seeds: int):
    """-> (policy, stacked params (seeds, ...), env): `seeds` PPO runs in one jit."""
    env = make_env(cfg)
    train = jax.jit(jax.vmap(make_train(cfg, None, env)))
    out = jax.block_until_ready(train(jax.random.split(jax.random.PRNGKey(cfg.seed), seeds)))
    return ActorCritic.from_config(cfg, env), out["params"], env


@entry_point("python -m train.crisis_seeds")
def main(argv=None) -> int:
    ap = ArgumentParser(prog="python -m train.crisis_seeds", description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=positive_int, default=3, help="training runs (default 3)")
    ap.add_argument("--episodes", type=positive_int, default=1000, help="evaluation episodes per agent and scenario")
    ap.add_argument("--holdout-seed", type=int, default=2024)
    ap.add_argument("--ppo-config", default=str(Path(__file__).resolve().parent.parent / "configs" / "crisis_ppo.yaml"))
    ap.add_argument("--name", default="crisis-seeds", help="run folder: runs/<name>/")
    ap.add_argument("ppo_overrides", nargs="*", help="key=value overrides of the PPO config")
    args = ap.parse_args(argv)
    if not args.name or "/" in args.name or args.name in (".", ".."):
        ap.error(f"--name must be a folder name, got {args.name!r}")
    cfg = load_config(args.ppo_config, args.ppo_overrides)
    enable_compilation_cache()
    t0 = time.time()
    policy, params, _ = train_runs(cfg, args.seeds)
    train_s = time.time() - t0

    env = nexus_jax.make("crisis-v0", info_mode="full", **HOLDOUT_ENV)
    scen = {"holdout": (env.default_params, args.holdout_seed),
            "fixed": (nexus_jax.make("crisis-v0", **FIXED_ENV).default_params, FIXED_SEED)}
    runs = {"sampled": make_rollout(env, ppo_policy(policy), args.episodes),
            "argmax": make_rollout(env, ppo_policy(policy, greedy=True), args.episodes)}
    run_edf = make_rollout(env, edf, args.episodes)
    res: dict = {}
    for s, (p, seed) in scen.items():
        key = jax.random.PRNGKey(seed)
        res[s] = {"edf": jax.device_get(run_edf(None, p, key))}
        for i in range(args.seeds):
            pi = jax.tree.map(lambda x: x[i], params)
            for kind, fn in runs.items():
                res[s][f"run{i}_{kind}"] = jax.device_get(fn(pi, p, key))
    lines = [f"PPO {cfg.num_updates * cfg.num_envs * cfg.num_steps:,} env steps per run x {args.seeds} runs in "
             f"{train_s:.0f} s; {args.episodes} episodes per agent and scenario", "",
             "| Scenario | Agent | Reward | On time | Completion | vs EDF (reward) | Paired reward - EDF |",
             "|---|---|---|---|---|---|---|"]
    summary: dict = {}
    for s, r in res.items():
        for a, out in r.items():
            cells = [f"{mean_ci(out[k])[0]:.1f} ± {mean_ci(out[k])[1]:.1f}" if k == "total_reward"
                     else f"{mean_ci(out[k])[0]:.3f} ± {mean_ci(out[k])[1]:.3f}" for k in METRICS]
            vs = "" if a == "edf" else ("beats" if beats(out["total_reward"], r["edf"]["total_reward"]) else
                                        "loses" if beats(r["edf"]["total_reward"], out["total_reward"]) else "overlap")
            d = np.asarray(out["total_reward"]) - np.asarray(r["edf"]["total_reward"])
            paired = "" if a == "edf" else f"{mean_ci(d)[0]:+.2f} ± {mean_ci(d)[1]:.2f}"
            lines.append(f"| {s} | {a} | " + " | ".join(cells) + f" | {vs} | {paired} |")
            summary.setdefault(s, {})[a] = {k: dict(zip(("mean", "ci95"), mean_ci(out[k]))) for k in METRICS}
            summary[s][a].update(vs_edf=vs, paired_delta=dict(zip(("mean", "ci95"), mean_ci(d))))
    text = "\n".join(lines)
    print(text)
    run_dir = Path("runs") / args.name
    run_dir.mkdir(parents=True, exist_ok=True)
    report = {"command": "python -m train.crisis_seeds " + " ".join(argv if argv is not None else sys.argv[1:]),
              "train_wall_s": round(train_s, 1), "config": cfg.to_dict(), "results": summary,
              "run_means": {s: {m: [float(np.mean(res[s][f"run{i}_argmax"][m])) for i in range(args.seeds)]
                                for m in METRICS} for s in res}}
    (run_dir / "crisis_seeds.json").write_text(json.dumps(report, indent=2, default=str))
    (run_dir / "crisis_seeds.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
