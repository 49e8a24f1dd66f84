"""`python -m experiments.crisis.seeds`: PPO on crisis-v0 over several training seeds against EDF, with CIs.

Trains `--seeds` PPO runs of `configs/crisis_ppo.yaml` (plus `key=value` overrides) in one
vmapped jit (run i's key is `split(PRNGKey(seed), seeds)[i]`), then evaluates every run's
sampled and argmax policies, a fresh (untrained) policy's and the EDF heuristic on the holdout and fixed evaluations of
`experiments.crisis.evaluate` (same episode keys for every agent). Prints one row per run and agent
(mean ± 95% CI over `--episodes` episodes), whether each run beats EDF (CIs apart), and the
paired difference to EDF on the same episodes (mean ± 95% CI of reward - EDF's reward), and
where each run's argmax policy departs from EDF (`departures`: per holdout step, which kind of
action it takes instead of EDF's on the same state); writes `runs/<name>/crisis_seeds.json` and the
runs' stacked params (`params.msgpack`, `train.checkpoint.save_params`).
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import nexus_jax
from nexus_jax import rollout
from nexus_jax.cli import ArgumentParser, entry_point, folder_name, positive_int
from train.checkpoint import load_params, save_params
from train.config import load_config
from experiments.crisis.evaluate import (CRISIS_PPO_CONFIG, FIXED_ENV, FIXED_SEED, HOLDOUT_ENV, NO_NEGOTIATION, edf,
                               make_rollout, observation_env, ppo_policy, write_outputs)
from train.networks import ActorCritic
from train.ppo import make_env, make_train
from train.runtime import enable_compilation_cache
from train.snapshots import resolve_every, snapshot_updates
from train.stats import beats, mean_ci

METRICS = ("total_reward", "on_time_rate", "completion_rate", "belief_accuracy")


def train_runs(cfg, seeds: int, snapshot_every: int = 0):
    """-> (policy, stacked params (seeds, ...), env): `seeds` PPO runs in one jit. `snapshot_every` k > 0:
    -> (policy, params, env, snapshots (seeds, slots, ...)), the params after 0, k, 2k, ... updates
    (`train.snapshots`; the training itself is the same)."""
    env = make_env(cfg)
    train = jax.jit(jax.vmap(make_train(cfg, None, env, snapshot_every=snapshot_every)))
    out = jax.block_until_ready(train(jax.random.split(jax.random.PRNGKey(cfg.seed), seeds)))
    policy = ActorCritic.from_config(cfg, env)
    return (policy, out["params"], env) + ((out["snapshots"],) if snapshot_every else ())


def evaluate(policy, params, runs: int, episodes: int, holdout_seed: int, no_negotiation: bool = False,
             fresh=None, obs_env: dict | None = None) -> dict:
    """{scenario: {agent: {metric: (episodes,)}}}: EDF and every run's sampled and argmax policies on the
    holdout and fixed evaluations (`experiments.crisis.evaluate`), the same episode keys for every agent;
    `no_negotiation`: both with the negotiation phases off; `fresh` (params of an untrained policy):
    also its sampled and argmax rows (the seed's "fresh agent"); `obs_env`: the training config's observation
    options (`crisis_eval.observation_env`), given to every evaluation env (EDF reads the state, not the obs)."""
    off = {**(NO_NEGOTIATION if no_negotiation else {}), **(obs_env or {})}
    env = nexus_jax.make("crisis-v0", info_mode="full", **HOLDOUT_ENV, **(obs_env or {}))
    scen = {"holdout": (nexus_jax.make("crisis-v0", **HOLDOUT_ENV, **off).default_params, holdout_seed),
            "fixed": (nexus_jax.make("crisis-v0", **FIXED_ENV, **off).default_params, FIXED_SEED)}
    fns = {"sampled": make_rollout(env, ppo_policy(policy), episodes),
           "argmax": make_rollout(env, ppo_policy(policy, greedy=True), episodes)}
    run_edf = make_rollout(env, edf, episodes)
    res: dict = {}
    for s, (p, seed) in scen.items():
        key = jax.random.PRNGKey(seed)
        res[s] = {"edf": jax.device_get(run_edf(None, p, key))}
        named = [(f"run{i}", jax.tree.map(lambda x: x[i], params)) for i in range(runs)]
        for name, pi in named + ([("fresh", fresh)] if fresh is not None else []):
            for kind, fn in fns.items():
                res[s][f"{name}_{kind}"] = jax.device_get(fn(pi, p, key))
    return res


DEPARTURES = ("other_slot", "yield", "wait", "release")  # what the policy does where EDF requests (HOLD) or waits


def departures(policy, params, env_params, key, episodes: int, obs_env: dict | None = None) -> dict:
    """{kind: departures per episode (mean over `episodes`, all seats)} of the argmax policy from EDF, judged
    on the states the policy itself reaches: REQUEST of another slot than EDF's, EDF's request with YIELD,
    WAIT (or YIELD-WAIT) where EDF requests, RELEASE; plus "steps" (seat-steps per episode). `obs_env` as in
    `evaluate` (`env_params` must have been made with it too)."""
    env = nexus_jax.make("crisis-v0", info_mode="full", **HOLDOUT_ENV, **(obs_env or {}))
    greedy = ppo_policy(policy, greedy=True)

    def act(k, obs, state, masks):
        return greedy(params, k, obs, state, masks, env_params), edf(None, k, obs, state, masks, env_params)

    def count(acc, s):
        a, e = s.action // 2, s.extra // 2  # base actions: 0 WAIT, 1 RELEASE, 2 + k REQUEST k
        kinds = jnp.stack([(a >= 2) & (e >= 2) & (a != e), (a == e) & (s.action % 2 == 1) & (e >= 2),
                           (a == 0) & (e >= 2), a == 1], -1)
        return acc + kinds.sum(1)

    T = int(env.default_params.max_steps)
    acc = rollout.evaluate(rollout.EpisodeEnv(env, env_params), act, key, episodes, T, env_params, fold=count,
                           fold0=jnp.zeros((episodes, len(DEPARTURES)), jnp.int32)).extra
    mean = np.asarray(acc).mean(0)
    return {**{k: float(v) for k, v in zip(DEPARTURES, mean)}, "steps": T * env.num_agents}


def fresh_params(policy, env, seed: int):
    """An untrained policy's parameters (the seed's fresh agent), initialised from `seed`."""
    obs, st = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(0), 1))
    return policy.init(jax.random.PRNGKey(seed), obs, jax.vmap(env.masks)(st))


def saved_report(run_dir: str) -> tuple[dict, object]:
    """A saved `crisis_seeds` folder's report (crisis_seeds.json) and its training config."""
    report = json.loads((Path(run_dir) / "crisis_seeds.json").read_text())
    return report, load_config(None, report["config"])


def load_runs(run_dir: str):
    """A saved `crisis_seeds` folder -> (policy, stacked params (runs, ...), runs, the config's observation options
    (`crisis_eval.observation_env`)), rebuilt from its config."""
    report, cfg = saved_report(run_dir)
    env = make_env(cfg)
    policy = ActorCritic.from_config(cfg, env)
    runs = len(report["run_means"]["holdout"]["total_reward"])
    template = jax.tree.map(lambda x: np.stack([np.asarray(x)] * runs), fresh_params(policy, env, cfg.seed))
    return policy, load_params(template, Path(run_dir) / "params.msgpack"), runs, observation_env(cfg)


def load_snapshots(run_dir: str):
    """A `crisis_seeds --snapshot-every` folder -> (policy, snapshots (runs, slots, ...), the update count of each
    slot, the config's observation options)."""
    report, cfg = saved_report(run_dir)
    env = make_env(cfg)
    policy = ActorCritic.from_config(cfg, env)
    runs, updates = len(report["run_means"]["holdout"]["total_reward"]), report["snapshot_updates"]
    one = fresh_params(policy, env, cfg.seed)
    template = jax.tree.map(lambda x: np.zeros((runs, len(updates)) + np.shape(x), np.asarray(x).dtype), one)
    return policy, load_params(template, Path(run_dir) / "snapshots.msgpack"), updates, observation_env(cfg)


def table(res: dict) -> tuple[list, dict]:
    """-> (markdown rows, JSON summary): mean ± 95% CI per agent and metric, whether the agent's reward
    CI lies above EDF's ("beats"), below ("loses") or overlaps it, and the paired reward difference to
    EDF on the same episodes (mean ± 95% CI)."""
    lines = ["| Scenario | Agent | Reward | On time | Completion | Belief acc. | vs EDF (reward) | Paired reward - EDF |",
             "|---|---|---|---|---|---|---|---|"]
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
    return lines, summary


@entry_point("python -m experiments.crisis.seeds")
def main(argv=None) -> int:
    ap = ArgumentParser(prog="python -m experiments.crisis.seeds", description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=positive_int, default=3, help="training runs (default 3)")
    ap.add_argument("--episodes", type=positive_int, default=1000, help="evaluation episodes per agent and scenario")
    ap.add_argument("--holdout-seed", type=int, default=2024)
    ap.add_argument("--ppo-config", default=str(CRISIS_PPO_CONFIG))
    ap.add_argument("--name", type=folder_name, default="crisis-seeds", help="run folder: runs/<name>/")
    ap.add_argument("--no-negotiation", action="store_true",
                    help="the same learner with negotiation off: in training (env.negotiation_min_level) and evaluation")
    ap.add_argument("--snapshot-every", type=int, default=0, metavar="K",
                    help="also save every run's params after 0, K, 2K, ... updates (snapshots.msgpack; "
                         "`crisis_chain_states --curve` reads them); 0 (default): none")
    ap.add_argument("--runs-from", default=None, metavar="RUN_DIR",
                    help="evaluate the runs saved in this crisis_seeds folder instead of training (e.g. on more "
                         "episodes or other holdout keys); --seeds, --snapshot-every and overrides do not apply; give "
                         "--no-negotiation if the runs were trained with it")
    ap.add_argument("ppo_overrides", nargs="*", help="key=value overrides of the PPO config")
    args = ap.parse_args(argv)
    enable_compilation_cache()
    t0 = time.time()
    every, snaps = 0, []
    if args.runs_from:
        if args.ppo_overrides or args.snapshot_every:
            ap.error("--runs-from evaluates saved runs: key=value overrides and --snapshot-every do not apply")
        if not (Path(args.runs_from) / "crisis_seeds.json").is_file():
            ap.error(f"--runs-from {args.runs_from!r}: no crisis_seeds.json (not a folder written by experiments.crisis.seeds)")
        _, cfg = saved_report(args.runs_from)
        policy, params, args.seeds, _ = load_runs(args.runs_from)
        lenv = make_env(cfg)
    else:
        extra = [f"env.{k}={v}" for k, v in NO_NEGOTIATION.items()] if args.no_negotiation else []
        cfg = load_config(args.ppo_config, args.ppo_overrides + extra)
        every = resolve_every(args.snapshot_every, cfg.num_updates) if args.snapshot_every else 0
        policy, params, lenv, *snaps = train_runs(cfg, args.seeds, every)
    train_s = time.time() - t0

    obs_env = observation_env(cfg)
    res = evaluate(policy, params, args.seeds, args.episodes, args.holdout_seed, args.no_negotiation,
                   fresh_params(policy, lenv, cfg.seed + 1), obs_env)
    lines, summary = table(res)
    hold = nexus_jax.make("crisis-v0", **HOLDOUT_ENV, **(NO_NEGOTIATION if args.no_negotiation else {}),
                          **obs_env).default_params
    dep = [departures(policy, jax.tree.map(lambda x: x[i], params), hold, jax.random.PRNGKey(args.holdout_seed),
                      args.episodes, obs_env) for i in range(args.seeds)]
    lines += ["", "Departures of each run's argmax policy from EDF (holdout, per episode of "
              f"{dep[0]['steps']} seat-steps): " + "; ".join(
                  f"run{i} " + ", ".join(f"{k} {d[k]:.2f}" for k in DEPARTURES) for i, d in enumerate(dep))]
    steps = cfg.num_updates * cfg.num_envs * cfg.num_steps
    trained = (f"the runs saved in {args.runs_from}" if args.runs_from
               else f"PPO {steps:,} env steps per run x {args.seeds} runs in {train_s:.0f} s")
    lines = [f"{trained}; {args.episodes} episodes per agent and scenario (holdout keys {args.holdout_seed})"
             + ("; negotiation off in training and evaluation" if args.no_negotiation else ""), ""] + lines
    text = "\n".join(lines)
    print(text)
    report = {"command": "python -m experiments.crisis.seeds " + " ".join(argv if argv is not None else sys.argv[1:]),
              "train_wall_s": None if args.runs_from else round(train_s, 1), "runs_from": args.runs_from, "config": cfg.to_dict(), "results": summary,
              "run_means": {s: {m: [float(np.mean(res[s][f"run{i}_argmax"][m])) for i in range(args.seeds)]
                                for m in METRICS} for s in res}}
    report["departures"] = dep
    if every:
        report["snapshot_updates"] = snapshot_updates(cfg.num_updates, every)
    out_dir = write_outputs(args.name, "crisis_seeds", report, text)
    save_params(params, out_dir / "params.msgpack")  # with --runs-from, the same params: the folder re-evaluates too
    if every:
        save_params(snaps[0], out_dir / "snapshots.msgpack")
    return 0


if __name__ == "__main__":
    sys.exit(main())
