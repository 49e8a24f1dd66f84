"""Training throughput: env steps/s of PPO (rollout + learning) next to the raw env rate, same process.

For each number of envs: the raw rate is a jitted scan of vmapped env steps with random
valid actions (masks computed, as the trainer does); the training rate is `make_train`
end to end (rollout, GAE, epochs x minibatches). Both are timed on a second call, after
compilation. Prints a table and writes bench/results/train_throughput.json.

    python bench/train_throughput.py [--envs 16 64 256] [--steps 100] [--updates 4] [key=value ...]
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import jax

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from train.runtime import machine, write_report  # noqa: E402
from nexus_jax.cli import ArgumentParser, entry_point, positive_int
from train.config import load_config  # noqa: E402
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


def train_rate(cfg) -> tuple[float, float]:
    """(env steps/s including learning, compile s) of one `train(rng)` call."""
    f = jax.jit(make_train(cfg))
    t = time.perf_counter()
    jax.block_until_ready(f(jax.random.PRNGKey(0)))
    compile_s = time.perf_counter() - t
    t = time.perf_counter()
    jax.block_until_ready(f(jax.random.PRNGKey(1)))
    run_s = time.perf_counter() - t
    steps = cfg.num_updates * cfg.num_envs * cfg.num_steps
    return steps / run_s, compile_s - run_s  # the first call = compile + one run


@entry_point("python -m bench.train_throughput")
def main(argv=None):
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", type=positive_int, nargs="+", default=[16, 64, 256])
    ap.add_argument("--steps", type=positive_int, default=100, help="rollout length (num_steps)")
    ap.add_argument("--updates", type=positive_int, default=4)
    ap.add_argument("overrides", nargs="*", help="config key=value (configs/ppo.yaml keys)")
    args = ap.parse_args(argv)
    rows = []
    for n in args.envs:
        cfg = load_config(overrides=args.overrides + [f"num_envs={n}", f"num_steps={args.steps}",
                                                      f"total_timesteps={n * args.steps * args.updates}",
                                                      "progress=false"])
        env = make_env(cfg)
        raw, raw_c = raw_rate(env, n, args.steps)
        trn, trn_c = train_rate(cfg)
        rows.append({"num_envs": n, "raw_env_steps_per_s": raw, "train_env_steps_per_s": trn,
                     "train_over_raw": trn / raw, "raw_compile_s": raw_c, "train_compile_s": trn_c})
        print(f"num_envs={n}: raw {raw:,.0f} steps/s, train {trn:,.0f} steps/s", flush=True)
    print(f"\n{'num_envs':>9}{'raw env steps/s':>18}{'train env steps/s':>20}{'train/raw':>11}")
    for r in rows:
        print(f"{r['num_envs']:>9}{r['raw_env_steps_per_s']:>18,.0f}{r['train_env_steps_per_s']:>20,.0f}"
              f"{r['train_over_raw']:>11.2f}")
    meta = {**machine(), "env_id": cfg.env_id, "action_head": cfg.action_head, "num_steps": args.steps,
            "updates": args.updates, "overrides": args.overrides}
    write_report(Path(__file__).resolve().parent / "results" / "train_throughput.json",
                 {"meta": meta, "rows": rows}, indent=2)


if __name__ == "__main__":
    main()
