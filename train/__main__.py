"""`python -m train [--config FILE] [key=value ...]`: train PPO, evaluate against baselines, write a run folder.

The run folder `runs/<name>/` gets config.yaml, metrics.jsonl (one line per update),
learning_curve.png, eval_episode.png, eval.json, replay.html (one evaluation episode to watch:
train/replay.py), and checkpoint/ (orbax, verified at restore:
train/checkpoint.py), which `python -m train.evaluate runs/<name>` reloads and re-evaluates;
seeds/ (every seed's final params) and snapshots/ (params every `snapshot_every` updates) for
the evaluation suite; with `logger=tensorboard|wandb`, tensorboard/ or wandb/ (train/loggers.py).
Bad input (a missing or invalid config file, an unknown key, a bad env param) ends in one error
line and exit code 2 before the run folder is created.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import jax
import numpy as np
from tqdm import tqdm

from nexus_jax import sharding
from nexus_jax.cli import ArgumentParser, entry_point
from nexus_jax.distributed import is_main_process
from train.checkpoint import load_run_config, save_run
from train.config import load_config, resolve_checkpoint_every, save_config
from train.evaluate import evaluate_all, format_table, results_json, verdict
from train.models import make_policy
from train.plots import plot_eval_episode, plot_learning_curve
from train.ppo import make_env, make_mesh, make_runs
from train.replay import make_act, write_replay
from train.resume import Interrupted, resume_step, sigint_deferred, sweep_keys, train_resumable
from train.runtime import enable_compilation_cache
from train.snapshots import resolve_every, save_policies
from train.loggers import EVALUATION, open_logger
from train.tracking import close_tracking, device_feed, drain, log_history, ppo_runs


class Progress:
    """A tqdm bar over updates, fed from the device by `jax.debug.callback`."""

    def __init__(self, total: int, enabled: bool = True, initial: int = 0):
        self.bar = tqdm(total=total, initial=initial, desc="updates (compiling first)", disable=not enabled,
                        file=sys.stderr)

    def __call__(self, update_idx, episode_return):
        done = int(np.max(update_idx)) + 1
        if done > self.bar.n:
            self.bar.set_description("updates")
            self.bar.set_postfix(ret=f"{float(np.mean(episode_return)):.1f}")
            self.bar.update(done - self.bar.n)

    def close(self):
        self.bar.close()


def write_metrics(path: Path, metrics: dict, cfg) -> list[dict]:
    """metrics: name -> (L, S, U) arrays; one JSON line per update with every run's value (lr-major)."""
    steps_per_update = cfg.num_envs * cfg.num_steps
    records = []
    with open(path, "w") as f:
        for u in range(cfg.num_updates):
            rec = {"update": u, "env_steps": (u + 1) * steps_per_update}
            rec.update({k: np.asarray(v)[..., u].reshape(-1).round(5).tolist() for k, v in metrics.items()})
            records.append(rec)
            f.write(json.dumps(rec) + "\n")
    return records


def placement(mesh) -> str:
    """' (N devices, P processes)' for a run on a mesh, '' on one device."""
    if mesh is None:
        return ""
    return f" ({mesh.size} devices, {jax.process_count()} process{'es' if jax.process_count() > 1 else ''})"


@entry_point("python -m train")
def main(argv=None) -> int:
    ap = ArgumentParser(prog="python -m train", description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=None, help="YAML defaults (default: configs/ppo.yaml)")
    ap.add_argument("overrides", nargs="*", help="key=value overrides, e.g. lr=1e-3 env.num_agents=6")
    ap.add_argument("--resume", metavar="RUN_DIR", default=None,
                    help="continue a run trained with checkpoint_every > 0 from its checkpoint (its own config)")
    args = ap.parse_args(argv)
    if args.resume:
        if args.config or args.overrides:
            ap.error("--resume continues a run with its own config.yaml: no --config or key=value overrides")
        run_dir = Path(args.resume)
        cfg = load_run_config(run_dir)
        start = resume_step(run_dir, cfg)  # the checkpoint is verified before anything runs
    else:
        cfg = resolve_checkpoint_every(load_config(args.config, args.overrides))  # validated; -1 made concrete
        run_dir, start = Path(cfg.run_dir) / cfg.name, 0

    enable_compilation_cache()
    env = make_env(cfg)
    mesh = make_mesh(cfg)  # over several processes: every process's devices (each process runs this command)
    writer = is_main_process()  # only process 0 writes the run folder and prints
    if writer:
        run_dir.mkdir(parents=True, exist_ok=True)
        save_config(cfg, run_dir / "config.yaml")  # first: --resume reads it if training is interrupted
    lrs = cfg.sweep_lrs
    obs = "entities" if cfg.network == "entity" else env.obs_dim
    if writer:
        print(f"env {cfg.env_id}: learners {env.agents}, obs {obs}, network {cfg.network}, head {cfg.action_head}, "
              f"critic {cfg.critic}; {cfg.num_updates} updates x {cfg.num_envs} envs x {cfg.num_steps} steps; "
              f"{cfg.num_seeds} seed(s) x {len(lrs)} lr(s) on {jax.devices()[0].platform}{placement(mesh)}", flush=True)

    progress = Progress(cfg.num_updates, cfg.progress and writer, initial=start)
    runs, run_configs = ppo_runs(cfg)
    logger = open_logger(cfg, run_dir, {**run_configs, EVALUATION: cfg.to_dict()}, writer)
    feed = device_feed(logger, runs, cfg.num_envs * cfg.num_steps)
    every = resolve_every(cfg.snapshot_every, cfg.num_updates)
    t0 = time.time()
    try:
        if cfg.checkpoint_every:
            out = train_resumable(cfg, env, run_dir, every, progress, resume=bool(args.resume), mesh=mesh, feed=feed)
        else:
            out = jax.block_until_ready(make_runs(cfg, progress, env, mesh, snapshot_every=every, feed=feed)(
                *sweep_keys(cfg)))
    except Interrupted as e:
        progress.close()
        close_tracking(logger, feed)
        if writer:
            print(f"python -m train: {e}", file=sys.stderr, flush=True)
        return 130
    except KeyboardInterrupt:
        progress.close()
        close_tracking(logger, feed)
        if writer:
            print("python -m train: interrupted; nothing saved (one compiled program: set checkpoint_every=k to "
                  "checkpoint every k updates)", file=sys.stderr, flush=True)
        return 130
    train_s = time.time() - t0
    progress.close()
    drain(feed)  # every update written before the results are

    host = sharding.tree_to_host({k: v for k, v in out.items() if k != "train"})  # every process: a gather
    metrics = host["metrics"]
    log_history(logger, feed, runs, metrics, cfg.num_envs * cfg.num_steps)  # a multi-process run: no feed ran
    # Keep the run with the best return over the last quarter of training (episode-weighted: an
    # update in which no episode ended reports 0).
    last = slice(-max(1, cfg.num_updates // 4), None)
    ret, eps = np.asarray(metrics["episode_return"])[..., last], np.asarray(metrics["episodes"])[..., last]
    tail = (ret * eps).sum(-1) / np.maximum(eps.sum(-1), 1)  # (L, S)
    li, si = np.unravel_index(int(np.argmax(tail)), tail.shape)
    params = jax.tree.map(lambda x: x[li, si], host["params"])
    with sigint_deferred():  # a save is never cut in half
        save_run(run_dir, cfg, params, train=out.get("train"))  # with checkpoint_every: the final training state too
    if not writer:
        return 0
    records = write_metrics(run_dir / "metrics.jsonl", metrics, cfg)
    save_policies(run_dir, cfg, host, li)  # seeds/ and snapshots/ (train.evaluate --crossplay)

    env_steps = cfg.num_updates * cfg.num_envs * cfg.num_steps
    print(f"trained {env_steps:,} env steps per run ({env_steps * cfg.num_seeds * len(lrs):,} in all) in "
          f"{train_s:.0f} s wall (compile included); kept lr={lrs[li]} seed #{si}", flush=True)

    t1 = time.time()
    policy = make_policy(cfg, env)
    results = evaluate_all(env, policy, params, cfg.eval_episodes, cfg.eval_seed)
    eval_s = time.time() - t1
    note = verdict(results)
    table = format_table(results, note)
    print(f"\nEvaluation: {cfg.eval_episodes} episodes per policy, same keys (seed {cfg.eval_seed}); {eval_s:.0f} s")
    print(table)

    plot_learning_curve(records, run_dir / "learning_curve.png",
                        {k: v["mean"] for k, v in results.items() if k != "trained"})
    plot_eval_episode(results["trained"]["result"], run_dir / "eval_episode.png")
    summary = {"env_steps_per_run": env_steps, "runs": cfg.num_seeds * len(lrs), "train_wall_s": round(train_s, 1),
               "eval_wall_s": round(eval_s, 1), "kept": {"lr": lrs[li], "seed_index": int(si)},
               "eval": results_json(results), "verdict": note}
    with open(run_dir / "eval.json", "w") as f:
        json.dump(summary, f, indent=2)
    write_replay(env, make_act(env, "trained", policy, params)[0], jax.random.PRNGKey(cfg.eval_seed),
                 run_dir / "replay.html", f"{cfg.name} (trained)")
    logger.log_table(EVALUATION, "evaluation", [{"policy": k, "mean_return": v["mean"], "ci95": v["ci95"],
                                                 "invalid_rate": v["invalid_rate"]} for k, v in results.items()])
    for name in ("learning_curve.png", "eval_episode.png", "eval.json", "replay.html"):
        logger.log_artifact(EVALUATION, run_dir / name)
    logger.close()
    print(f"\nrun folder: {run_dir}/ (config.yaml, metrics.jsonl, learning_curve.png, eval_episode.png, "
          f"eval.json, replay.html, checkpoint/, seeds/, snapshots/)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
