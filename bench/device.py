"""Accelerator sweep: env-steps/s of the nexus core and the env class for B = 2^10 .. 2^20 at N=4 and N=16,
and a short PPO run's rate, in one run of at most ~8 minutes (`bench/device.sh` runs it on a GPU host).

    python -m bench.device [--agents 4 16] [--log2-batches 10 12 14 16 18 20] [--budget-s 420]

Each row is a jitted reset + `lax.scan` of `--steps` vmapped steps (the harness of bench/speed.py),
timed on a second call after compilation. A batch size is skipped once the time budget is spent
or the previous batch of the same kind took more than `--max-call-s`; a failure (out of memory)
is recorded as a note and the sweep goes on. Prints a table and writes bench/results/device.json.
"""
from __future__ import annotations

import time
from pathlib import Path

import jax

import nexus_jax
from nexus_jax.cli import ArgumentParser, entry_point, positive_int
from train.runtime import machine, write_report
from bench.env_throughput import nexus_core_run
from bench.speed import learner_rollout, ppo_share, ppo_updates
from nexus_jax.envs.nexus.params import NexusParams
from train.config import load_config

OUT = Path(__file__).parent / "results" / "device.json"


def call_twice(fn, *args) -> tuple[float, float]:
    """-> (compile + first call s, second call s)."""
    t = time.perf_counter()
    jax.block_until_ready(fn(*args))
    first = time.perf_counter() - t
    t = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return first, time.perf_counter() - t


@entry_point("python -m bench.device")
def main(argv=None):
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", type=positive_int, nargs="+", default=[4, 16])
    ap.add_argument("--log2-batches", type=int, nargs="+", default=[10, 12, 14, 16, 18, 20])
    ap.add_argument("--steps", type=positive_int, default=20)
    ap.add_argument("--budget-s", type=float, default=420.0, help="stop starting new rows after this")
    ap.add_argument("--max-call-s", type=float, default=15.0, help="skip larger B once a call took this long")
    ap.add_argument("--train-envs", type=int, default=4096, help="num_envs of the PPO rows (0: no PPO rows)")
    ap.add_argument("--train-updates", type=positive_int, default=5)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    start, rows, notes = time.perf_counter(), [], []
    print(f"devices: {jax.devices()}", flush=True)
    for n in args.agents:
        env = nexus_jax.make("nexus-v0", num_agents=n)
        kinds = {
            "core": lambda b, n=n: (jax.jit(nexus_core_run(NexusParams.create(num_agents=n), args.steps)),
                                    (jax.random.split(jax.random.PRNGKey(0), b),)),
            "env.step": lambda b, env=env: (jax.jit(learner_rollout(env, b, args.steps, False)), (jax.random.PRNGKey(0),)),
        }
        for kind, build in kinds.items():
            for lb in args.log2_batches:
                b = 2 ** lb
                if time.perf_counter() - start > args.budget_s:
                    notes.append(f"budget spent: {kind} N={n} B=2^{lb} and larger not run")
                    break
                try:
                    fn, fn_args = build(b)
                    first, run = call_twice(fn, *fn_args)
                except Exception as e:  # out of memory at the largest B: record and go on
                    notes.append(f"{kind} N={n} B=2^{lb}: {type(e).__name__}: {str(e)[:120]}")
                    break
                r = {"kind": kind, "agents": n, "batch": b, "compile_s": first - run,
                     "env_steps_per_s": b * args.steps / run, "agent_steps_per_s": b * args.steps * n / run}
                rows.append(r)
                print(f"{kind:<9} N={n:<3} B=2^{lb:<3} {r['env_steps_per_s']:>14,.0f} env-steps/s "
                      f"{r['agent_steps_per_s']:>15,.0f} agent-steps/s  (compile {r['compile_s']:.1f} s)", flush=True)
                if run > args.max_call_s:
                    break
    if args.train_envs > 0 and time.perf_counter() - start < args.budget_s + 60:
        e = args.train_envs
        cfg = load_config(overrides=[f"num_envs={e}", "num_steps=100", "progress=false",
                                     f"total_timesteps={e * 100 * args.train_updates}"])
        runner, parts = ppo_updates(cfg)
        # the target's reference: the env class's raw rate (env.step + masks) at the same batch
        raw_fn = jax.jit(learner_rollout(nexus_jax.make(cfg.env_id, **cfg.env), e, 100, True))
        runs = {"raw": (raw_fn, jax.random.PRNGKey(0), 1), **{p: (jax.jit(f), runner, args.train_updates)
                                                                for p, f in parts.items()}}
        rates = {}
        for part, (fn, arg, updates) in runs.items():  # env.step + masks, train, and its rollout and update halves
            first, run = call_twice(fn, arg)
            rates[part] = e * 100 * updates / run
            rows.append({"kind": "env.step+masks" if part == "raw" else f"ppo_{part}", "agents": 4, "batch": e,
                         "compile_s": first - run, "env_steps_per_s": rates[part]})
            print(f"{'env.step + masks' if part == 'raw' else 'PPO ' + part:<16} N=4   envs={e}: {rates[part]:,.0f} "
                  f"env-steps/s (compile {first - run:.1f} s)", flush=True)
        print(ppo_share(e, rates["raw"], rates["train"], rates["rollout"], rates["update"]))
    for note in notes:
        print(note)
    write_report(args.out, {"rows": rows, "notes": notes, "machine": machine(),
                            "wall_s": time.perf_counter() - start}, indent=2)
    print(f"total {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
