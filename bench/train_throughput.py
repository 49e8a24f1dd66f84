"""Training throughput: env steps/s of PPO (rollout + learning) next to the raw env rate, same process,
with and without a recurrent policy (`memory`).

For each number of envs: the raw rate is a jitted scan of vmapped env steps with random
valid actions (masks computed, as the trainer does); the training rate is `make_train`
end to end (rollout, GAE, epochs x minibatches), once per `--memory` kind (none: the
feedforward policy; gru: the GRU core, minibatches of env sequences). Each training program is
compiled once, then `--reps` repetitions run round-robin over the kinds, so the load of a shared
machine falls on each alike; the table gives the best and the median repetition and the cost
ratio of each kind to the first (time per update, memory / none). Prints a table and writes
bench/results/train_throughput.json.

    python bench/train_throughput.py [--envs 16 64 256] [--memory none gru] [--reps 3] [--steps 100] [--updates 4] [key=value ...]
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import jax

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from train.runtime import machine, write_report  # noqa: E402
from nexus_jax.cli import ArgumentParser, entry_point, positive_int
from train.config import load_config  # noqa: E402
from train.config.network import MEMORY_KINDS  # noqa: E402
from train.learner_env import random_actions  # noqa: E402
from train.ppo import env_reset, make_env, make_train  # noqa: E402


def raw_rate(env, num_envs: int, num_steps: int) -> tuple[float, float]:
    """(env steps/s, compile s) of random valid actions with masks, vmapped over envs."""

    def run(key):
        obs, state = env_reset(env, key, num_envs)

        def body(state, k):
            k_a, k_s = jax.random.split(k)
            masks = jax.vmap(env.masks)(state)
            act = random_actions(k_a, masks, env.action_head)
            _, state, rew, _, _ = jax.vmap(env.step)(jax.random.split(k_s, num_envs), state, act)
            return state, rew.sum()

        return jax.lax.scan(body, state, jax.random.split(key, num_steps))[1].sum()

    f = jax.jit(run)
    t = time.perf_counter()
    f(jax.random.PRNGKey(0)).block_until_ready()
    compile_s = time.perf_counter() - t
    t = time.perf_counter()
    f(jax.random.PRNGKey(1)).block_until_ready()
    return num_envs * num_steps / (time.perf_counter() - t), compile_s


def compile_train(cfg):
    """-> (`train(rng)` compiled, compile s): `make_train` end to end, one program."""
    key = jax.random.PRNGKey(0)
    t = time.perf_counter()
    compiled = jax.jit(make_train(cfg)).lower(key).compile()
    compile_s = time.perf_counter() - t
    jax.block_until_ready(compiled(key))  # warm-up: the first execution
    return compiled, compile_s


def train_rates(cfgs: dict, reps: int) -> dict:
    """kind -> {"best_s", "median_s", "compile_s"} of one `train(rng)` call per kind, repetitions interleaved."""
    compiled = {kind: compile_train(cfg) for kind, cfg in cfgs.items()}
    times = {kind: [] for kind in cfgs}
    for r in range(reps):
        for kind, (fn, _) in compiled.items():
            t = time.perf_counter()
            jax.block_until_ready(fn(jax.random.PRNGKey(1 + r)))
            times[kind].append(time.perf_counter() - t)
    return {kind: {"best_s": min(v), "median_s": statistics.median(v), "compile_s": compiled[kind][1], "times_s": v}
            for kind, v in times.items()}


@entry_point("python -m bench.train_throughput")
def main(argv=None):
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", type=positive_int, nargs="+", default=[16, 64, 256])
    ap.add_argument("--steps", type=positive_int, default=100, help="rollout length (num_steps)")
    ap.add_argument("--updates", type=positive_int, default=4)
    ap.add_argument("--memory", nargs="+", choices=MEMORY_KINDS, default=list(MEMORY_KINDS),
                    help="policy memories to train with (the ratio column is against the first)")
    ap.add_argument("--reps", type=positive_int, default=3, help="timed repetitions per memory kind (interleaved)")
    ap.add_argument("overrides", nargs="*", help="config key=value (configs/ppo.yaml keys)")
    args = ap.parse_args(argv)
    rows = []
    for n in args.envs:
        cfgs = {kind: load_config(overrides=args.overrides + [
            f"num_envs={n}", f"num_steps={args.steps}", f"total_timesteps={n * args.steps * args.updates}",
            "progress=false", f"memory={kind}"]) for kind in args.memory}
        cfg = cfgs[args.memory[0]]
        raw, raw_c = raw_rate(make_env(cfg), n, args.steps)
        steps = cfg.num_updates * n * args.steps
        rates = train_rates(cfgs, args.reps)
        base = rates[args.memory[0]]
        for kind, r in rates.items():
            trn = steps / r["best_s"]
            rows.append({"num_envs": n, "memory": kind, "raw_env_steps_per_s": raw, "train_env_steps_per_s": trn,
                         "train_env_steps_per_s_median": steps / r["median_s"], "train_over_raw": trn / raw,
                         "cost_ratio_best": r["best_s"] / base["best_s"],
                         "cost_ratio_median": r["median_s"] / base["median_s"], "raw_compile_s": raw_c,
                         "train_compile_s": r["compile_s"], "train_times_s": r["times_s"]})
            print(f"num_envs={n} memory={kind}: raw {raw:,.0f} steps/s, train {trn:,.0f} steps/s (best of "
                  f"{args.reps}), x{rows[-1]['cost_ratio_best']:.2f} the time of memory={args.memory[0]}", flush=True)
    print(f"\n{'num_envs':>9}{'memory':>8}{'raw env steps/s':>18}{'train env steps/s':>20}{'median':>10}"
          f"{'train/raw':>11}{'cost (best)':>13}{'cost (median)':>15}")
    for r in rows:
        print(f"{r['num_envs']:>9}{r['memory']:>8}{r['raw_env_steps_per_s']:>18,.0f}{r['train_env_steps_per_s']:>20,.0f}"
              f"{r['train_env_steps_per_s_median']:>10,.0f}{r['train_over_raw']:>11.2f}{r['cost_ratio_best']:>13.2f}"
              f"{r['cost_ratio_median']:>15.2f}")
    meta = {**machine(), "env_id": cfg.env_id, "action_head": cfg.action_head, "num_steps": args.steps,
            "updates": args.updates, "reps": args.reps, "overrides": args.overrides}
    write_report(Path(__file__).resolve().parent / "results" / "train_throughput.json",
                 {"meta": meta, "rows": rows}, indent=2)


if __name__ == "__main__":
    main()
