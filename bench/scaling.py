"""Scaling table: env rollouts and PPO training on a 1-D data mesh of 1, 2, 4 devices.

    python bench/scaling.py                           # 4 forced CPU devices (sets XLA_FLAGS itself)
    python bench/scaling.py --devices 1 2 4 8 --envs 512 --steps 32
    python bench/scaling.py --real                    # use the real devices as they are (GPUs, TPU cores)
    python bench/scaling.py --fast-compile            # CPU: the tests' fast-compile XLA flags (a loaded machine)

On CPU the devices are forced (`--xla_force_host_platform_device_count`) and share the same
cores, so the table measures correctness and the cost of sharding (partitioning, collectives,
per-device dispatch), not speedup; on a machine with several accelerators (`--real`) the same
table is the speedup. Rows:

- `rollout`: `nexus_jax.rollout.make_rollout` of nexus-v0 (summary mode, random valid
  actions), env batch split over the mesh with `shard_map`; checked against the 1-device
  result (per-env return sums).
- `ppo`: `train.ppo.make_train` with `mesh=` (env batch sharded, parameters replicated,
  gradients all-reduced by XLA); checked against the 1-device parameters. `collectives` counts
  the all-reduce / all-gather / all-to-all / collective-permute ops in the compiled program.

Run times are the best of `--reps` calls after compilation. Printed, and written to
bench/results/scaling.json.
"""
from __future__ import annotations

import os
import sys

if "--real" not in sys.argv:  # XLA_FLAGS must be set before JAX starts
    n = 4
    if "--devices" in sys.argv:
        i = sys.argv.index("--devices") + 1
        while i < len(sys.argv) and sys.argv[i].isdigit():
            n = max(n, int(sys.argv[i]))
            i += 1
    flags = os.environ.get("XLA_FLAGS", "")
    if "--fast-compile" in sys.argv:  # the test suite's XLA CPU options: 3-4x faster compiles, slower code
        from nexus_jax.xla_flags import FAST_COMPILE  # imports no JAX backend

        flags += " " + FAST_COMPILE
    if "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={n}".strip()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")

import re  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax  # noqa: E402
import numpy as np  # noqa: E402

from nexus_jax.cli import ArgumentParser, entry_point, positive_int  # noqa: E402
import nexus_jax  # noqa: E402
from nexus_jax import rollout, sharding  # noqa: E402
from train.config import validate  # noqa: E402
from train.ppo import make_env, make_train  # noqa: E402
from train.runtime import machine, write_report  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
COLLECTIVES = ("all-reduce", "all-gather", "all-to-all", "collective-permute", "reduce-scatter")


def best_time(f, *args, reps: int = 3) -> float:
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(f(*args))
        best = min(best, time.perf_counter() - t0)
    return best


def count_collectives(hlo: str) -> dict:
    return {c: len(re.findall(rf"\b{c}(?:-start)?\(", hlo)) for c in COLLECTIVES if re.search(rf"\b{c}", hlo)}


def rollout_rows(devices: list[int], num_envs: int, num_steps: int, reps: int) -> list[dict]:
    env = nexus_jax.make("nexus-v0")
    key = jax.random.PRNGKey(0)
    rows, ref = [], None
    for d in devices:
        mesh = sharding.data_mesh(d) if d > 1 else None
        f = rollout.make_rollout(env, num_envs, num_steps, mesh=mesh, trajectory=False)
        t0 = time.perf_counter()
        compiled = f.lower(key, env.default_params).compile()
        compile_s = time.perf_counter() - t0
        out = compiled(key, env.default_params)
        ret = np.asarray(out.return_sum)
        ref = ret if ref is None else ref
        run_s = best_time(compiled, key, env.default_params, reps=reps)
        rows.append({"bench": "rollout", "env": "nexus-v0", "devices": d, "envs": num_envs, "steps": num_steps,
                     "compile_s": round(compile_s, 1), "run_s": round(run_s, 3),
                     "env_steps_per_s": round(num_envs * num_steps / run_s),
                     "max_abs_diff_vs_1": float(np.abs(ret - ref).max()),
                     "collectives": count_collectives(compiled.as_text())})
        print(rows[-1], flush=True)
    return rows


def ppo_rows(devices: list[int], num_envs: int, num_steps: int, updates: int, reps: int) -> list[dict]:
    cfg = validate({"env_id": "nexus-v0", "num_envs": num_envs, "num_steps": num_steps, "num_minibatches": 4,
                    "update_epochs": 2, "hidden_size": 64, "total_timesteps": num_envs * num_steps * updates,
                    "progress": False})
    env = make_env(cfg)
    key = jax.random.PRNGKey(0)
    rows, ref = [], None
    for d in devices:
        mesh = sharding.data_mesh(d) if d > 1 else None
        f = jax.jit(make_train(cfg, env=env, mesh=mesh))
        t0 = time.perf_counter()
        compiled = f.lower(key).compile()
        compile_s = time.perf_counter() - t0
        out = compiled(key)
        leaves = [np.asarray(x) for x in jax.tree.leaves(out["params"])]
        ref = leaves if ref is None else ref
        diff = max(float(np.abs(a - b).max()) for a, b in zip(leaves, ref))
        run_s = best_time(compiled, key, reps=reps)
        steps = cfg.num_updates * num_envs * num_steps
        rows.append({"bench": "ppo", "env": "nexus-v0", "devices": d, "envs": num_envs, "steps": num_steps,
                     "updates": cfg.num_updates, "compile_s": round(compile_s, 1), "run_s": round(run_s, 3),
                     "env_steps_per_s": round(steps / run_s), "max_param_diff_vs_1": diff,
                     "params_replicated": all(x.sharding.is_fully_replicated for x in jax.tree.leaves(out["params"])),
                     "collectives": count_collectives(compiled.as_text())})
        print(rows[-1], flush=True)
    return rows


@entry_point("python -m bench.scaling")
def main(argv=None) -> None:
    ap = ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--devices", type=positive_int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--envs", type=positive_int, default=256, help="rollout bench: envs")
    ap.add_argument("--steps", type=positive_int, default=32, help="rollout bench: steps")
    ap.add_argument("--ppo-envs", type=positive_int, default=32)
    ap.add_argument("--ppo-steps", type=positive_int, default=16)
    ap.add_argument("--ppo-updates", type=positive_int, default=2)
    ap.add_argument("--reps", type=positive_int, default=3)
    ap.add_argument("--skip-ppo", action="store_true")
    ap.add_argument("--real", action="store_true", help="real devices (no forcing)")
    ap.add_argument("--fast-compile", action="store_true", help="XLA CPU fast-compile flags (as in tests/conftest.py)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    devices = [d for d in args.devices if d <= jax.device_count()]

    rows = rollout_rows(devices, args.envs, args.steps, args.reps)
    if not args.skip_ppo:
        rows += ppo_rows(devices, args.ppo_envs, args.ppo_steps, args.ppo_updates, args.reps)

    load = os.getloadavg()
    print(f"\n{jax.device_count()} {jax.default_backend()} devices ({'real' if args.real else 'forced'}), "
          f"load average {load[0]:.1f}")
    print(f"{'bench':8s} {'dev':>3s} {'envs x steps':>13s} {'compile s':>9s} {'run s':>8s} {'env steps/s':>12s} "
          f"{'vs 1 dev':>8s} {'max diff vs 1':>13s}  collectives")
    base = {}
    for r in rows:
        base.setdefault(r["bench"], r["run_s"])
        diff = r.get("max_abs_diff_vs_1", r.get("max_param_diff_vs_1"))
        print(f"{r['bench']:8s} {r['devices']:3d} {r['envs']:>6d} x {r['steps']:<4d} {r['compile_s']:9.1f} "
              f"{r['run_s']:8.3f} {r['env_steps_per_s']:12,d} {base[r['bench']] / r['run_s']:7.2f}x "
              f"{diff:13.2e}  {r['collectives'] or '-'}")
    info = {**machine(), "load_average_1_5_15_before": [round(x, 2) for x in load],
            "device_count": jax.device_count(), "forced_cpu_devices": not args.real,
            "xla_flags": os.environ.get("XLA_FLAGS", "")}
    write_report(args.out or RESULTS / "scaling.json", {"machine": info, "rows": rows})


if __name__ == "__main__":
    main()
