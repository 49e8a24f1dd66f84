"""Accelerator sweep in one process (`bash bench/device.sh`; about 8 minutes on one GPU): env-steps/s and
compile seconds of the nexus core, env.step (as shipped, and with the XLA:CPU fast paths flipped: `nexus_jax.fastpaths`;
plain JAX on an accelerator, so the flipped row measures the fast forms there), env.step + masks and
JaxMARL's MPE_simple_spread_v3 for B = 2^10 .. 2^20 at N = 4 and 16; then PPO training at 4,096 envs as a
share of the env class's raw rate (env.step + masks) at the same batch.

    python -m bench.device [--agents 4 16] [--log2-batches 10 12 14 16 18 20] [--budget-s 360]

Each env row is a jitted reset + `lax.scan` of `--steps` vmapped steps (bench/speed.py's harness). Every
program is lowered and compiled ahead, `--compile-threads` at a time (XLA compiles outside the GIL), so a
row's `compile_s` is measured beside others compiling: an upper bound of its compile alone (`--compile-threads
1` gives the plain figure). Each row is then called once to warm up and timed on a second call. A kind stops
at the batch where a call took more than `--max-call-s` or failed (out of memory: recorded as a note, the
sweep goes on); rows not timed within `--budget-s` are dropped with a note. MPE (3 agents, uniform random
actions) is timed once per B, beside N = 4's rows. Prints the table and the ratios (batch-minor over plain
vmap, env.step over MPE) and writes bench/results/device.json.
"""
from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jax

import nexus_jax
from nexus_jax import fastpaths
from nexus_jax.cli import ArgumentParser, entry_point, positive_int
from train.runtime import machine, write_report
from bench.env_throughput import nexus_core_run
from bench.speed import learner_rollout, mpe_rollout, ppo_share, ppo_updates
from nexus_jax.envs.nexus.params import NexusParams
from train.config import load_config

OUT = Path(__file__).parent / "results" / "device.json"
MPE = "MPE_simple_spread_v3"
FLIPPED = "env.step, fast paths flipped"
KINDS = ("core", "env.step", FLIPPED, "env.step+masks", MPE)
LOWER_LOCK = threading.Lock()  # the fast-path mode is process-wide: one trace at a time


def env_programs(kind: str, n: int, b: int, steps: int):
    """-> (jitted fn, args, agents) of one env row: `b` envs of N = `n` seats stepped `steps` times."""
    key = jax.random.PRNGKey(0)
    if kind == "core":
        return jax.jit(nexus_core_run(NexusParams.create(num_agents=n), steps)), (jax.random.split(key, b),), n
    if kind == MPE:
        return jax.jit(mpe_rollout(b, steps)), (jax.random.split(key, b),), 3
    env = nexus_jax.make("nexus-v0", num_agents=n)
    run = learner_rollout(env, b, steps, kind == "env.step+masks")
    if kind == FLIPPED:
        run = traced_under("off" if fastpaths.enabled() else "on", run)
    return jax.jit(run), (key,), n


def traced_under(mode: str, fn):
    """`fn` whose trace runs under `fastpaths.use(mode)`."""
    def call(*args):
        with fastpaths.use(mode):
            return fn(*args)
    return call


def sweep_rows(args, notes: list) -> list[dict]:
    """Every env row of the sweep, in timing order (by N, kind, then B); MPE with the first N."""
    try:
        import jaxmarl  # noqa: F401  (the `jaxmarl` extra; bench/device-requirements.txt on a GPU host)
        kinds = KINDS
    except ImportError as e:
        kinds = KINDS[:-1]
        notes.append(f"MPE not timed: jaxmarl is not importable ({e})")
    rows = []
    for n in args.agents:
        for kind in kinds:
            if kind == MPE and n != args.agents[0]:
                continue
            rows += [{"kind": kind, "agents": 3 if kind == MPE else n, "batch": 2 ** lb, "steps": args.steps}
                     for lb in args.log2_batches]
    return rows


def compile_row(row: dict, build) -> dict:
    """Lower and compile `build()`'s program; -> the row with `compiled`, `args`, `compile_s` (or `error`)."""
    t = time.perf_counter()
    try:
        fn, fn_args, _ = build()
        with LOWER_LOCK:
            lowered = fn.lower(*fn_args)
        row["compiled"], row["args"] = lowered.compile(), fn_args
    except Exception as e:  # out of memory while compiling the largest B: the row is reported, not fatal
        row["error"] = f"{type(e).__name__}: {str(e)[:160]}"
    row["compile_s"] = time.perf_counter() - t
    return row


def time_row(row: dict, env_steps: int) -> None:
    """Warm-up call, then the timed one; sets `run_s` and `env_steps_per_s` (or `error`)."""
    try:
        jax.block_until_ready(row["compiled"](*row["args"]))
        t = time.perf_counter()
        jax.block_until_ready(row["compiled"](*row["args"]))
        row["run_s"] = time.perf_counter() - t
        row["env_steps_per_s"] = env_steps / row["run_s"]
    except Exception as e:  # out of memory at run time
        row["error"] = f"{type(e).__name__}: {str(e)[:160]}"
    finally:  # free the executable and its inputs now
        row.pop("compiled", None)
        row.pop("args", None)


def run_sweep(args, start: float, notes: list) -> list[dict]:
    rows = sweep_rows(args, notes)
    stopped = set()  # (kind, agents) that hit the call limit or failed: larger B is not run
    pool = ThreadPoolExecutor(args.compile_threads)
    futures = [pool.submit(compile_row, r, lambda r=r: env_programs(r["kind"], r["agents"], r["batch"], r["steps"]))
               for r in rows]
    done = []
    try:
        for row, fut in zip(rows, futures):
            group = (row["kind"], row["agents"])
            if group in stopped or time.perf_counter() - start > args.budget_s:
                fut.cancel()
                if group not in stopped:
                    notes.append(f"budget spent: {row['kind']} N={row['agents']} B={row['batch']} not run")
                continue
            fut.result()
            if "error" not in row:
                time_row(row, row["batch"] * row["steps"])
            if "error" in row:
                notes.append(f"{row['kind']} N={row['agents']} B={row['batch']}: {row['error']}")
                stopped.add(group)
                continue
            done.append(row)
            print(f"{row['kind']:<20} N={row['agents']:<3} B=2^{row['batch'].bit_length() - 1:<3} "
                  f"{row['env_steps_per_s']:>14,.0f} env-steps/s  (compile {row['compile_s']:.1f} s)", flush=True)
            if row["run_s"] > args.max_call_s:
                stopped.add(group)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # programs of rows dropped are not compiled
    return done


def ppo_rows(args) -> tuple[list[dict], str]:
    """PPO at `--train-envs` envs (configs/ppo.yaml, 100 steps per update): training, its rollout and update
    halves, and the env class's raw rate (env.step + masks) at the same batch; -> rows and the share line."""
    e = args.train_envs
    cfg = load_config(overrides=[f"num_envs={e}", "num_steps=100", "progress=false",
                                 f"total_timesteps={e * 100 * args.train_updates}"])
    runner, parts = ppo_updates(cfg)
    raw = learner_rollout(nexus_jax.make(cfg.env_id, **cfg.env), e, 100, True)
    programs = {"raw": (raw, jax.random.PRNGKey(0), 1), **{p: (f, runner, args.train_updates) for p, f in parts.items()}}
    rows, rates = [], {}
    with ThreadPoolExecutor(args.compile_threads) as pool:
        compiled = {p: pool.submit(compile_row, {}, lambda f=f, a=a: (jax.jit(f), (a,), 4))
                    for p, (f, a, _) in programs.items()}
        for part, (_, _, updates) in programs.items():
            row = compiled[part].result()
            if "error" in row:
                raise RuntimeError(f"PPO {part} at {e} envs: {row['error']}")
            time_row(row, e * 100 * updates)
            rates[part] = row["env_steps_per_s"]
            kind = "env.step+masks" if part == "raw" else f"ppo_{part}"
            rows.append({"kind": kind, "agents": 4, "batch": e, "steps": 100 * updates, "compile_s": row["compile_s"],
                         "run_s": row["run_s"], "env_steps_per_s": rates[part]})
            print(f"{'env.step + masks' if part == 'raw' else 'PPO ' + part:<20} N=4   envs={e}: {rates[part]:>14,.0f} "
                  f"env-steps/s  (compile {row['compile_s']:.1f} s)", flush=True)
    return rows, ppo_share(e, rates["raw"], rates["train"], rates["rollout"], rates["update"])


def ratios(rows: list[dict]) -> dict:
    """Same-run ratios: env.step as shipped over the fast paths flipped, and nexus env.step over MPE, per (N, B)."""
    rate = {(r["kind"], r["agents"], r["batch"]): r["env_steps_per_s"] for r in rows}
    out = {}
    for (kind, n, b), v in rate.items():
        if kind == "env.step" and (FLIPPED, n, b) in rate:
            out[f"as shipped ({'fast' if fastpaths.enabled() else 'plain'}) / flipped, env.step N={n} B={b}"] = v / rate[(FLIPPED, n, b)]
        if kind == "env.step" and (MPE, 3, b) in rate:
            out[f"env.step / MPE, N={n} B={b}"] = v / rate[(MPE, 3, b)]
    return out


def table(rows: list[dict]) -> str:
    lines = [f"{'kind':<20}{'N':>4}{'B':>10}{'env-steps/s':>16}{'agent-steps/s':>16}{'compile s':>11}"]
    for r in rows:
        lines.append(f"{r['kind']:<20}{r['agents']:>4}{r['batch']:>10}{r['env_steps_per_s']:>16,.0f}"
                     f"{r['env_steps_per_s'] * r['agents']:>16,.0f}{r['compile_s']:>11.1f}")
    return "\n".join(lines)


@entry_point("python -m bench.device")
def main(argv=None):
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", type=positive_int, nargs="+", default=[4, 16])
    ap.add_argument("--log2-batches", type=int, nargs="+", default=[10, 12, 14, 16, 18, 20])
    ap.add_argument("--steps", type=positive_int, default=20)
    ap.add_argument("--budget-s", type=float, default=360.0, help="env rows not timed by then are dropped (noted)")
    ap.add_argument("--max-call-s", type=float, default=15.0, help="skip larger B once a call of a kind took this long")
    ap.add_argument("--compile-threads", type=positive_int, default=max(1, min(8, (os.cpu_count() or 2) // 2)))
    ap.add_argument("--train-envs", type=int, default=4096, help="num_envs of the PPO rows (0: no PPO rows)")
    ap.add_argument("--train-updates", type=positive_int, default=5)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    start, notes = time.perf_counter(), []
    print(f"jax {jax.__version__}, devices: {jax.devices()}; compiling {args.compile_threads} programs at a time",
          flush=True)
    rows = run_sweep(args, start, notes)
    share = None
    if args.train_envs > 0:
        ppo, share = ppo_rows(args)
        rows += ppo
    print("\n" + table(rows))
    found = ratios(rows)
    for name, value in found.items():
        print(f"{name}: {value:.2f}x")
    if share:
        print(share)
    for note in notes:
        print("note:", note)
    wall = time.perf_counter() - start
    write_report(args.out, {"rows": rows, "ratios": found, "ppo_share": share, "notes": notes, "machine": machine(),
                            "jax": jax.__version__, "devices": [str(d) for d in jax.devices()],
                            "args": {k: str(v) for k, v in vars(args).items()}, "wall_s": wall}, indent=2)
    print(f"wrote {args.out}; total {wall:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
