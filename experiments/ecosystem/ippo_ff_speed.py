"""`python -m experiments.ecosystem.ippo_ff_speed`: IPPO-FF's training throughput on nexus-v0 (compact and flat
actions) against JaxMARL's MPE_simple_spread_v3, the same trainer in one process, interleaved.

The trainer is experiments/ecosystem/ippo_ff.py (upstream ippo_ff_mpe.py's data path and yaml hyperparameters)
through JaxMARL's `LogWrapper`, NUM_ENVS `--num-envs` (64), one seed, for `--total-timesteps` env steps per call.
The three programs are compiled first, then called in turn for `--rounds` rounds; each one's best call gives its
env-steps/s (an env step is one step of all its agents: nexus-v0 has one learner seat, MPE three agents). Prints
the rates and each nexus rate over MPE's, writes experiments/ecosystem/results/ippo_ff_speed.json. Needs the
`jaxmarl` extra.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

# first: nexus_jax's XLA:CPU flag must precede jaxmarl's import (experiments/ecosystem/ecosystem.py)
import nexus_jax

import jax
import jaxmarl
from jaxmarl.wrappers.baselines import LogWrapper

from experiments.ecosystem.ippo_ff import DEFAULT_CONFIG, make_train
from nexus_jax.cli import ArgumentParser, entry_point, positive_int
from train.runtime import machine, write_report

OUT = Path(__file__).parent / "results" / "ippo_ff_speed.json"
RUNS = {"nexus-v0 compact": ("nexus-v0", {"action_format": "compact"}),
        "nexus-v0 flat": ("nexus-v0", {"action_format": "flat"}),
        "MPE_simple_spread_v3": ("MPE_simple_spread_v3", {})}
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def trainer(env_id: str, env_kwargs: dict, config: dict):
    """IPPO-FF's `train(key)` on `env_id` (nexus ids through `nexus_jax.make`, the rest through JaxMARL's)."""
    make = nexus_jax.make if env_id in nexus_jax.registered_envs() else jaxmarl.make
    return make_train(config, LogWrapper(make(env_id, **env_kwargs)))


def seconds(fn, key, clock: str) -> float:
    now = CLOCKS[clock]
    t = now()
    jax.block_until_ready(fn(key))
    return now() - t


@entry_point("python -m experiments.ecosystem.ippo_ff_speed")
def main(argv=None) -> int:
    ap = ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--num-envs", type=positive_int, default=64)
    ap.add_argument("--total-timesteps", type=float, default=2 ** 18, help="env steps per timed call")
    ap.add_argument("--rounds", type=positive_int, default=3)
    ap.add_argument("--clock", choices=tuple(CLOCKS), default="wall",
                    help="cpu: CPU seconds of this process (steadier when other jobs share the cores)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    config = {**DEFAULT_CONFIG, "NUM_ENVS": args.num_envs, "TOTAL_TIMESTEPS": args.total_timesteps}
    per_update = config["NUM_STEPS"] * args.num_envs
    env_steps = int(args.total_timesteps // per_update) * per_update
    key = jax.random.PRNGKey(30)  # the upstream yaml's SEED
    rows = {}
    for name, (env_id, kwargs) in RUNS.items():
        t = time.perf_counter()
        compiled = jax.jit(trainer(env_id, kwargs, config)).lower(key).compile()
        rows[name] = {"fn": compiled, "compile_s": round(time.perf_counter() - t, 1), "best_s": float("inf")}
        print(f"compiled {name} in {rows[name]['compile_s']} s", flush=True)
    for _ in range(args.rounds):
        for row in rows.values():
            row["best_s"] = min(row["best_s"], seconds(row["fn"], key, args.clock))
    mpe = env_steps / rows["MPE_simple_spread_v3"]["best_s"]
    report = {"command": "python -m experiments.ecosystem.ippo_ff_speed " +
                         " ".join(argv if argv is not None else sys.argv[1:]),
              "config": config, "env_steps_per_call": env_steps, "clock": args.clock, "rows": {}}
    for name, row in rows.items():
        rate = env_steps / row["best_s"]
        report["rows"][name] = {"env_steps_per_s": round(rate), "over_mpe": round(rate / mpe, 3),
                                "compile_s": row["compile_s"], "best_s": round(row["best_s"], 2)}
        print(f"{name:<22} {rate:>10,.0f} env-steps/s  {rate / mpe:5.2f}x MPE  (compile {row['compile_s']} s)")
    report["machine"] = machine()
    write_report(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
