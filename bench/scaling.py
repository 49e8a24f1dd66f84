"""Scaling table: env rollouts and PPO training on a 1-D data mesh of 1, 2, 4 devices.

    python bench/scaling.py                           # 4 forced CPU devices (sets XLA_FLAGS itself)
    python bench/scaling.py --devices 1 2 4 8 --envs 512 --steps 32
    python bench/scaling.py --real                    # use the real devices as they are (GPUs, TPU cores)
    python bench/scaling.py --fast-compile            # CPU: the tests' fast-compile XLA flags (a loaded machine)
    python bench/scaling.py --multiprocess            # 1 process x 1 device, 1 x 2, 2 processes x 1 device

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

`--multiprocess` compares where the devices live: 1 process x 1 device, 1 process x 2 devices and
2 processes x 1 device (`python -m nexus_jax.launch`: jax.distributed over 127.0.0.1, gloo
collectives on CPU), each layout a fresh run of this script (`--worker`), the layouts run
`--rounds` times in turn (the best run of each kept: the machine may be shared). Both benches as
above, plus the bytes each device's collectives move per run (rollout) or per PPO update, read
from the compiled HLO (`collective_bytes`: the result size of every all-reduce / all-gather /
... times the trip counts of the loops around it). Written to bench/results/scaling_multiprocess.json.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nexus_jax.xla_flags import FAST_COMPILE  # noqa: E402  (imports no JAX backend)

if "--real" not in sys.argv and "--worker" not in sys.argv:  # XLA_FLAGS must be set before JAX starts
    n = 4
    if "--devices" in sys.argv:
        i = sys.argv.index("--devices") + 1
        while i < len(sys.argv) and sys.argv[i].isdigit():
            n = max(n, int(sys.argv[i]))
            i += 1
    flags = os.environ.get("XLA_FLAGS", "")
    if "--fast-compile" in sys.argv:  # the test suite's XLA CPU options: 3-4x faster compiles, slower code
        flags += " " + FAST_COMPILE
    if "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={n}".strip()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse  # noqa: E402
import collections  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

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


_DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "bf16": 2, "f16": 2, "s16": 2, "u16": 2, "f32": 4, "s32": 4, "u32": 4,
                "f64": 8, "s64": 8, "u64": 8}
_HEADER = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
_COLLECTIVE = re.compile(r"=\s*(.+?)\s+(" + "|".join(COLLECTIVES) + r")(?:-start)?\(")
_ARRAY = re.compile(r"\b(pred|bf16|[suf]\d+)\[([\d,]*)\]")
_CALLEE = re.compile(r"\b(body|calls|to_apply|condition|true_computation|false_computation)=%([\w.\-]+)")
_TRIPS = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')


def collective_bytes(hlo: str) -> dict:
    """Bytes each device's collectives produce in one run of a compiled program (its HLO text): per kind,
    the result size of every collective op times the known trip counts of the while loops around it."""
    ops, callers, entry, comp = collections.defaultdict(list), collections.defaultdict(list), None, None
    for line in hlo.splitlines():
        header = _HEADER.match(line)
        if header and not line.startswith(" "):
            comp = header.group(1)
            entry = comp if line.startswith("ENTRY") else entry
            continue
        found = _COLLECTIVE.search(line)
        if found and comp:
            size = sum(_DTYPE_BYTES[t] * int(np.prod([int(d) for d in dims.split(",") if d])) for t, dims in
                       _ARRAY.findall(found.group(1)))
            ops[comp].append((found.group(2), size))
        trips = _TRIPS.search(line)
        for kind, callee in _CALLEE.findall(line):
            callers[callee].append((comp, int(trips.group(1)) if kind == "body" and trips else 1))

    def runs(c, seen=()):  # executions of computation c per run of the entry computation
        if c == entry:
            return 1
        return sum(f * runs(p, seen + (c,)) for p, f in callers.get(c, []) if p not in seen)

    total = collections.Counter()
    for c, found in ops.items():
        n = runs(c)
        for kind, size in found:
            total[kind] += n * size
    return dict(total)


def rollout_row(d: int, num_envs: int, num_steps: int, reps: int) -> tuple[dict, np.ndarray]:
    """The sharded rollout on the first d devices (every process's) -> (row, per-env return sums)."""
    env = nexus_jax.make("nexus-v0")
    key = jax.random.PRNGKey(0)
    mesh = sharding.data_mesh(d) if d > 1 else None
    f = rollout.make_rollout(env, num_envs, num_steps, mesh=mesh, trajectory=False)
    t0 = time.perf_counter()
    compiled = f.lower(key, env.default_params).compile()
    compile_s = time.perf_counter() - t0
    ret = sharding.to_host(compiled(key, env.default_params).return_sum)
    run_s = best_time(compiled, key, env.default_params, reps=reps)
    hlo = compiled.as_text()
    return {"bench": "rollout", "env": "nexus-v0", "devices": d, "processes": jax.process_count(), "envs": num_envs,
            "steps": num_steps, "compile_s": round(compile_s, 1), "run_s": round(run_s, 3),
            "env_steps_per_s": round(num_envs * num_steps / run_s), "collectives": count_collectives(hlo),
            "comm_bytes_per_run": collective_bytes(hlo)}, ret


def ppo_config(num_envs: int, num_steps: int, updates: int):
    return validate({"env_id": "nexus-v0", "num_envs": num_envs, "num_steps": num_steps, "num_minibatches": 4,
                     "update_epochs": 2, "hidden_size": 64, "total_timesteps": num_envs * num_steps * updates,
                     "progress": False})


def ppo_row(d: int, cfg, reps: int) -> tuple[dict, list[np.ndarray]]:
    """`make_train` with the env batch over the first d devices (every process's) -> (row, param leaves)."""
    key = jax.random.PRNGKey(0)
    mesh = sharding.data_mesh(d) if d > 1 else None
    f = jax.jit(make_train(cfg, env=make_env(cfg), mesh=mesh))
    t0 = time.perf_counter()
    compiled = f.lower(key).compile()
    compile_s = time.perf_counter() - t0
    out = compiled(key)
    leaves = [np.asarray(x) for x in jax.tree.leaves(out["params"])]  # replicated: readable on every process
    run_s = best_time(compiled, key, reps=reps)
    steps = cfg.num_updates * cfg.num_envs * cfg.num_steps
    hlo = compiled.as_text()
    per_update = {k: v // cfg.num_updates for k, v in collective_bytes(hlo).items()}
    return {"bench": "ppo", "env": "nexus-v0", "devices": d, "processes": jax.process_count(), "envs": cfg.num_envs,
            "steps": cfg.num_steps, "updates": cfg.num_updates, "compile_s": round(compile_s, 1),
            "run_s": round(run_s, 3), "env_steps_per_s": round(steps / run_s),
            "params_replicated": all(x.sharding.is_fully_replicated for x in jax.tree.leaves(out["params"])),
            "collectives": count_collectives(hlo), "comm_bytes_per_update": per_update}, leaves


def max_diff(a, b) -> float:
    return max(float(np.abs(np.asarray(x) - np.asarray(y)).max()) for x, y in zip(a, b))


def rollout_rows(devices: list[int], num_envs: int, num_steps: int, reps: int) -> list[dict]:
    rows, ref = [], None
    for d in devices:
        row, ret = rollout_row(d, num_envs, num_steps, reps)
        ref = ret if ref is None else ref
        rows.append({**row, "max_abs_diff_vs_1": max_diff([ret], [ref])})
        print(rows[-1], flush=True)
    return rows


def ppo_rows(devices: list[int], num_envs: int, num_steps: int, updates: int, reps: int) -> list[dict]:
    cfg = ppo_config(num_envs, num_steps, updates)
    rows, ref = [], None
    for d in devices:
        row, leaves = ppo_row(d, cfg, reps)
        ref = leaves if ref is None else ref
        rows.append({**row, "max_param_diff_vs_1": max_diff(leaves, ref)})
        print(rows[-1], flush=True)
    return rows


# ---- several processes ------------------------------------------------------------------------

LAYOUTS = ((1, 1), (1, 2), (2, 1))  # (processes, devices per process)


def worker(args) -> None:
    """One layout (run by `multiprocess_rows`, under `python -m nexus_jax.launch` for several processes):
    both benches over every device of every process; process 0 writes rows and outputs to args.worker."""
    d = jax.device_count()
    rows, outputs = [], {}
    row, outputs["rollout"] = rollout_row(d, args.envs, args.steps, args.reps)
    rows.append(row)
    if not args.skip_ppo:
        row, leaves = ppo_row(d, ppo_config(args.ppo_envs, args.ppo_steps, args.ppo_updates), args.reps)
        rows.append(row)
        outputs.update({f"ppo_{i}": x for i, x in enumerate(leaves)})
    if jax.process_index() == 0:
        np.savez(args.worker, rows=json.dumps(rows), **outputs)


def multiprocess_rows(args, argv: list[str]) -> list[dict]:
    """Every layout of LAYOUTS, `args.rounds` times in turn, each a fresh worker -> rows (best run of each)."""
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root), "XLA_FLAGS": FAST_COMPILE if args.fast_compile else "",
           "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu")}
    passed = [a for a in argv if a not in ("--multiprocess", "--fast-compile")]
    best, outputs = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for procs, per in LAYOUTS:
                out = Path(tmp) / f"{procs}x{per}_{r}.npz"
                job = ["-m", "bench.scaling", "--worker", str(out), *passed]
                if procs > 1:
                    job = ["-m", "nexus_jax.launch", "--processes", str(procs), "--devices-per-process", str(per),
                           "--log-dir", str(Path(tmp) / "logs"), *job]
                print(f"round {r + 1}/{args.rounds}: {procs} process(es) x {per} device(s)", flush=True)
                subprocess.run([sys.executable, *job], cwd=root, check=True,
                               env={**env, "JAX_NUM_CPU_DEVICES": str(per)})
                with np.load(out) as z:
                    outputs[procs, per] = {k: z[k] for k in z.files if k != "rows"}
                    for row in json.loads(str(z["rows"])):
                        key = (row["bench"], procs, per)
                        if key not in best or row["run_s"] < best[key]["run_s"]:
                            best[key] = {**row, "devices_per_process": per}
    ref = outputs[LAYOUTS[0]]
    rows = []
    for (bench, procs, per), row in sorted(best.items(), key=lambda kv: (kv[0][0] != "rollout", LAYOUTS.index(kv[0][1:]))):
        keys = ["rollout"] if bench == "rollout" else sorted(k for k in ref if k.startswith("ppo_"))
        rows.append({**row, "max_diff_vs_1x1": max_diff([outputs[procs, per][k] for k in keys], [ref[k] for k in keys]),
                     "vs_1x1": round(best[bench, 1, 1]["run_s"] / row["run_s"], 2)})
    return rows


def print_multiprocess(rows: list[dict]) -> None:
    print(f"\n{'bench':8s} {'layout':>14s} {'compile s':>9s} {'run s':>8s} {'env steps/s':>12s} {'vs 1x1':>7s} "
          f"{'max diff':>9s}  bytes per device ({'per run' if rows else ''} rollout, per update PPO)")
    for r in rows:
        comm = r.get("comm_bytes_per_update", r.get("comm_bytes_per_run"))
        layout = f"{r['processes']} proc x {r['devices_per_process']} dev"
        print(f"{r['bench']:8s} {layout:>14s} {r['compile_s']:9.1f} {r['run_s']:8.3f} {r['env_steps_per_s']:12,d} "
              f"{r['vs_1x1']:6.2f}x {r['max_diff_vs_1x1']:9.1e}  {comm or '-'}")


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
    ap.add_argument("--multiprocess", action="store_true", help="compare 1x1, 1x2 and 2 processes x 1 device")
    ap.add_argument("--rounds", type=positive_int, default=2, help="--multiprocess: runs of every layout, in turn")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)  # one layout's run (multiprocess_rows)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args)
    if args.multiprocess:
        load = os.getloadavg()
        rows = multiprocess_rows(args, sys.argv[1:] if argv is None else argv)
        print_multiprocess(rows)
        info = {**machine(), "load_average_1_5_15_before": [round(x, 2) for x in load],
                "layouts": [list(x) for x in LAYOUTS], "rounds": args.rounds, "cpu_collectives": "gloo",
                "xla_flags": FAST_COMPILE if args.fast_compile else ""}
        write_report(args.out or RESULTS / "scaling_multiprocess.json", {"machine": info, "rows": rows})
        return None
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
