"""Training throughput with each experiment logger on and off, in one process, repetitions interleaved.

For each logger (none, tensorboard, wandb offline) the same PPO sweep (`make_runs`: seeds x
learning rates, `progress` off) is compiled once; the repetitions then run round-robin, so the
load of a shared machine falls on every logger alike. A repetition is timed until the results
are on the host AND the feed has written every update (`DeviceFeed.flush`), so a logger that
lags behind the device pays for it here; in wall seconds and in this process's CPU seconds
(all threads; steadier on a shared machine, but wandb's own service process is not in it).
Also recorded: the host callbacks in each compiled program (none: 0, the program without
tracking; on: 1, one per update for every run) and the time the feed's thread spends in the
logger per update. Prints a table and writes bench/results/logging_overhead.json.

    python bench/logging_overhead.py [--reps 5] [--updates 8] [--loggers none tensorboard wandb] [key=value ...]
"""
from __future__ import annotations

import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import jax

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nexus_jax.cli import ArgumentParser, entry_point, positive_int  # noqa: E402
from train.config import load_config  # noqa: E402
from train.loggers import LOGGERS, Logger, NullLogger, open_logger  # noqa: E402
from train.ppo import make_env, make_runs  # noqa: E402
from train.resume import sweep_keys  # noqa: E402
from train.runtime import machine, write_report  # noqa: E402
from train.tracking import device_feed, drain, ppo_runs  # noqa: E402

CALLBACK = re.compile(r"custom_call @xla\w*python\w*callback")


def bench_config(overrides: list, updates: int, logger: str):
    """The PPO config of a repetition: `updates` updates, one compiled program, no progress bar, this logger."""
    probe = load_config(overrides=overrides)
    return load_config(overrides=overrides + [
        "progress=false", "checkpoint_every=0", f"total_timesteps={probe.num_envs * probe.num_steps * updates}",
        f"logger={logger}", "wandb_mode=offline", f"name=bench-{logger}"])


class TimedLogger(Logger):
    """`inner` with the time spent in its `log_scalars` added up (the feed thread's host work per update)."""

    def __init__(self, inner: Logger):
        self.inner, self.seconds, self.calls = inner, 0.0, 0

    def log_scalars(self, run, step, values):
        t = time.perf_counter()
        self.inner.log_scalars(run, step, values)
        self.seconds += time.perf_counter() - t
        self.calls += 1

    def close(self):
        self.inner.close()


def setup(cfg, env, folder: Path) -> dict:
    """Open the logger, compile the sweep with its feed -> {run, logger, feed, compile_s, callbacks}."""
    runs, configs = ppo_runs(cfg)
    inner = open_logger(cfg, folder, configs)
    logger = inner if type(inner) is NullLogger else TimedLogger(inner)
    feed = device_feed(logger, runs, cfg.num_envs * cfg.num_steps)
    keys = sweep_keys(cfg)
    t = time.perf_counter()
    lowered = make_runs(cfg, None, env, feed=feed).lower(*keys)
    compiled = lowered.compile()
    return {"run": lambda: jax.block_until_ready(compiled(*keys)), "logger": logger, "feed": feed,
            "compile_s": time.perf_counter() - t, "callbacks": len(CALLBACK.findall(lowered.as_text()))}


def write_per_update(case: dict, cfg) -> float:
    """Seconds the feed thread spent in the logger per update (all runs of the update), 0 when off."""
    logger = case["logger"]
    if not isinstance(logger, TimedLogger) or not logger.calls:
        return 0.0
    runs = cfg.num_seeds * len(cfg.sweep_lrs)
    return logger.seconds / (logger.calls / runs)


def timed(case: dict) -> tuple[float, float]:
    """(wall s, CPU s of this process, all threads) of one repetition, until every update is written."""
    t, c = time.perf_counter(), time.process_time()
    case["run"]()
    if case["feed"] is not None:
        case["feed"].flush()
    return time.perf_counter() - t, time.process_time() - c


@entry_point("python -m bench.logging_overhead")
def main(argv=None):
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=positive_int, default=5, help="timed repetitions per logger (interleaved)")
    ap.add_argument("--updates", type=positive_int, default=8, help="PPO updates per repetition")
    ap.add_argument("--loggers", nargs="+", choices=LOGGERS, default=list(LOGGERS))
    ap.add_argument("overrides", nargs="*", help="config key=value (configs/ppo.yaml keys), e.g. num_seeds=4")
    args = ap.parse_args(argv)
    os.environ.setdefault("WANDB_SILENT", "true")
    base = bench_config(args.overrides, args.updates, "none")
    env = make_env(base)
    with tempfile.TemporaryDirectory() as tmp:
        cases = {}
        for kind in args.loggers:
            cases[kind] = setup(bench_config(args.overrides, args.updates, kind), env, Path(tmp) / kind)
            cases[kind]["run"]()  # warm-up: the first execution
            print(f"{kind}: compiled in {cases[kind]['compile_s']:.1f} s, {cases[kind]['callbacks']} host "
                  f"callback(s) in the program", flush=True)
        times = {kind: [] for kind in cases}
        for rep in range(args.reps):
            for kind, case in cases.items():
                times[kind].append(timed(case))
            print(f"rep {rep + 1}/{args.reps}: " + ", ".join(f"{k} {v[-1][0]:.2f} s ({v[-1][1]:.2f} CPU s)"
                                                           for k, v in times.items()), flush=True)
        for case in cases.values():
            drain(case["feed"])
            case["logger"].close()
    steps = base.num_updates * base.num_envs * base.num_steps * base.num_seeds * len(base.sweep_lrs)
    median = {kind: [statistics.median(x[i] for x in t) for i in (0, 1)] for kind, t in times.items()}
    best = {kind: min(x[0] for x in t) for kind, t in times.items()}
    ref = median[args.loggers[0]]
    rows = [{"logger": kind, "best_wall_s": best[kind], "best_wall_ratio": best[kind] / best[args.loggers[0]],
             "median_wall_s": median[kind][0], "median_cpu_s": median[kind][1],
             "wall_ratio": median[kind][0] / ref[0], "cpu_ratio": median[kind][1] / ref[1],
             "env_steps_per_wall_s": steps / median[kind][0], "times_wall_cpu_s": t,
             "host_callbacks": cases[kind]["callbacks"], "compile_s": cases[kind]["compile_s"],
             "write_s_per_update": write_per_update(cases[kind], base)} for kind, t in times.items()]
    print(f"\nratios to {args.loggers[0]}: best (least disturbed) and median of {args.reps} interleaved repetitions")
    print(f"{'logger':>12}{'best s':>9}{'ratio':>7}{'median s':>10}{'ratio':>7}{'CPU s':>8}{'ratio':>7}"
          f"{'callbacks':>11}{'write ms/update':>17}")
    for r in rows:
        print(f"{r['logger']:>12}{r['best_wall_s']:>9.2f}{r['best_wall_ratio']:>7.3f}{r['median_wall_s']:>10.2f}"
              f"{r['wall_ratio']:>7.3f}{r['median_cpu_s']:>8.2f}{r['cpu_ratio']:>7.3f}{r['host_callbacks']:>11}"
              f"{1e3 * r['write_s_per_update']:>17.2f}")
    meta = {**machine(), "env_id": base.env_id, "num_envs": base.num_envs, "num_steps": base.num_steps,
            "updates": base.num_updates, "runs": base.num_seeds * len(base.sweep_lrs), "reps": args.reps,
            "overrides": args.overrides}
    write_report(Path(__file__).resolve().parent / "results" / "logging_overhead.json", {"meta": meta, "rows": rows},
                 indent=2)


if __name__ == "__main__":
    main()
