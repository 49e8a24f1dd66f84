"""Rollout memory: peak bytes per env and per env-step, the largest batch that fits a budget, and a big demo.

    python bench/memory.py                          # nexus-v0 and crisis-v0, budget 24 GiB
    python bench/memory.py --budget-gib 80 --steps 128
    python bench/memory.py --demo --envs 65536 --steps 128 --env-chunks 8   # run it (heavy)
    python bench/memory.py --demo --envs-ids nexus-v0 --no-masks ...       # uniform actions, no mask checks

Numbers come from XLA's own buffer assignment (`jit(...).lower(...).compile().memory_analysis()`:
arguments + outputs + temporaries = the peak the program needs), for the rollouts of
`nexus_jax.rollout.make_rollout` (random valid actions, auto-reset), compiled at two batch
sizes and two lengths and fitted as

    peak(E, T) = fixed + E * per_env + E * T * per_env_step

- `per_env` (summary mode: only per-env sums are kept, the scan carries the env state): the
  bytes one env needs in flight: its state, observation, action mask and the step's temporaries.
- `per_env_step` (trajectory mode): the bytes each env adds per stored step (obs, action,
  reward, done), what a PPO batch of T steps costs on top.

The largest batch for `--budget-gib` is reported for both: keeping a whole T-step trajectory,
and summary-only; with `env_chunks` > 1 (chunks run one after the other on each device) only
one chunk of envs is in flight, so the summary-mode limit is per chunk.
`--demo` runs one summary-mode rollout of `--envs` x `--steps` chunked over envs and reports
wall time, env steps/s, the compiled peak and this process's peak RSS. Everything is written
to bench/results/memory.json (demo: memory_demo.json).
"""
from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax  # noqa: E402

from nexus_jax.cli import ArgumentParser, entry_point, positive_int
import nexus_jax  # noqa: E402
from nexus_jax import rollout, sharding  # noqa: E402
from train.runtime import machine, write_report  # noqa: E402

GIB = 1024 ** 3
RESULTS = Path(__file__).resolve().parent / "results"


def peak_bytes(env, num_envs: int, num_steps: int, trajectory: bool, env_chunks: int = 1) -> dict:
    """XLA's buffer assignment for one compiled rollout: arguments + outputs + temporaries."""
    f = rollout.make_rollout(env, num_envs, num_steps, trajectory=trajectory, env_chunks=env_chunks)
    t0 = time.perf_counter()
    m = f.lower(jax.random.PRNGKey(0), env.default_params).compile().memory_analysis()
    total = m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes - m.alias_size_in_bytes
    return {"envs": num_envs, "steps": num_steps, "trajectory": trajectory, "env_chunks": env_chunks,
            "argument": m.argument_size_in_bytes, "output": m.output_size_in_bytes, "temp": m.temp_size_in_bytes,
            "peak": total, "compile_s": round(time.perf_counter() - t0, 1)}


def profile(env_id: str, e1: int, e2: int, t1: int, t2: int, budget: float, steps: int) -> dict:
    env = nexus_jax.make(env_id)
    s1, s2 = peak_bytes(env, e1, t1, False), peak_bytes(env, e2, t1, False)
    per_env = (s2["peak"] - s1["peak"]) / (e2 - e1)
    fixed = max(s1["peak"] - e1 * per_env, 0.0)
    a, b = peak_bytes(env, e2, t1, True), peak_bytes(env, e2, t2, True)
    per_env_step = (b["peak"] - a["peak"]) / (e2 * (t2 - t1))
    traj_per_env = max(a["peak"] - fixed - e2 * t1 * per_env_step, 0.0) / e2  # in flight, besides the stored steps
    fit = lambda n: int((budget - fixed) // n)  # noqa: E731
    return {
        "env": env_id,
        "agents_driven": len(env.agents),
        "obs_dim": int(env.observation_space(env.agents[0]).shape[0]),
        "fixed_bytes": int(fixed),
        "bytes_per_env": round(per_env, 1),
        "bytes_per_env_step": round(per_env_step, 1),
        "budget_gib": budget / GIB,
        "steps": steps,
        "max_envs_trajectory": fit(traj_per_env + steps * per_env_step),
        "max_envs_summary_per_chunk": fit(per_env),
        "trajectory_gib_at_65536_envs": round((fixed + 65536 * (traj_per_env + steps * per_env_step)) / GIB, 2),
        "summary_gib_at_65536_envs": round((fixed + 65536 * per_env) / GIB, 2),
        "compiled": [s1, s2, a, b],
    }


def demo(env_id: str, num_envs: int, num_steps: int, env_chunks: int, use_masks: bool = True) -> dict:
    env = nexus_jax.make(env_id)
    mesh = sharding.data_mesh() if jax.device_count() > 1 else None
    f = rollout.make_rollout(env, num_envs, num_steps, mesh=mesh, env_chunks=env_chunks, trajectory=False,
                              use_masks=use_masks)
    key = jax.random.PRNGKey(0)
    t0 = time.perf_counter()
    compiled = f.lower(key, env.default_params).compile()
    compile_s = time.perf_counter() - t0
    m = compiled.memory_analysis()
    t0 = time.perf_counter()
    out = jax.block_until_ready(compiled(key, env.default_params))
    run_s = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    return {
        "env": env_id, "envs": num_envs, "steps": num_steps, "env_chunks": env_chunks, "devices": jax.device_count(),
        "actions": "random valid (masked)" if use_masks else "uniform flat, no masks (invalid -> WAIT)",
        "env_steps": num_envs * num_steps, "compile_s": round(compile_s, 1), "run_s": round(run_s, 1),
        "env_steps_per_s": round(num_envs * num_steps / run_s),
        "compiled_peak_gib": round((m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes) / GIB, 3),
        "process_peak_rss_gib": round(rss / GIB, 3),
        "episodes_finished": int(out.episodes.sum()), "mean_return_per_env": float(out.return_sum.mean()),
        "machine": machine(),
    }


@entry_point("python -m bench.memory")
def main(argv=None) -> None:
    ap = ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--envs-ids", nargs="+", default=["nexus-v0", "crisis-v0"])
    ap.add_argument("--budget-gib", type=float, default=24.0)
    ap.add_argument("--steps", type=positive_int, default=128, help="rollout length the budget is computed for")
    ap.add_argument("--probe-envs", type=positive_int, nargs=2, default=[64, 128], help="two batch sizes compiled for the fit")
    ap.add_argument("--probe-steps", type=positive_int, nargs=2, default=[2, 4], help="two lengths compiled for the fit")
    ap.add_argument("--demo", action="store_true", help="run one big summary-mode rollout instead")
    ap.add_argument("--envs", type=positive_int, default=65536)
    ap.add_argument("--env-chunks", type=positive_int, default=8)
    ap.add_argument("--no-masks", action="store_true", help="demo: uniform flat actions, no mask computation")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    RESULTS.mkdir(exist_ok=True)

    if args.demo:
        rows = [demo(e, args.envs, args.steps, args.env_chunks, not args.no_masks) for e in args.envs_ids]
        for r in rows:
            print(f"{r['env']:10s} {r['envs']} envs x {r['steps']} steps ({r['env_chunks']} chunks, {r['devices']} dev): "
                  f"run {r['run_s']} s ({r['env_steps_per_s']:,} env steps/s), compile {r['compile_s']} s, "
                  f"compiled peak {r['compiled_peak_gib']} GiB, process peak RSS {r['process_peak_rss_gib']} GiB")
        write_report(args.out or RESULTS / "memory_demo.json", rows)
        return

    budget = args.budget_gib * GIB
    rows = [profile(e, *args.probe_envs, *args.probe_steps, budget, args.steps) for e in args.envs_ids]
    print(f"budget {args.budget_gib} GiB, rollouts of {args.steps} steps (XLA memory_analysis, {jax.default_backend()})")
    print(f"{'env':10s} {'obs':>5s} {'B/env':>10s} {'B/env/step':>11s} {'max envs (traj)':>16s} "
          f"{'max envs (summary)':>19s} {'GiB @2^16 traj':>15s} {'GiB @2^16 summ':>15s}")
    for r in rows:
        print(f"{r['env']:10s} {r['obs_dim']:5d} {r['bytes_per_env']:10.0f} {r['bytes_per_env_step']:11.0f} "
              f"{r['max_envs_trajectory']:16,d} {r['max_envs_summary_per_chunk']:19,d} "
              f"{r['trajectory_gib_at_65536_envs']:15.2f} {r['summary_gib_at_65536_envs']:15.2f}")
    write_report(args.out or RESULTS / "memory.json", {"machine": machine(), "rows": rows})


if __name__ == "__main__":
    main()
