"""NPC overhead: env-steps/s with NPC seats (nexus-v0: 1 learner + 3 NPCs) vs all seats driven externally.

`python bench/npc_overhead.py [--envs 1024] [--steps 100] [--agents 4]`. Both runs step the same
N-seat economy with uniformly random flat actions for the external seats, in one jitted
`lax.scan` over a vmapped `step_env`, timed after compilation, in the same process.
"""
from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp

import nexus_jax


def throughput(env, num_envs: int, steps: int, repeats: int = 3) -> float:
    p = env.default_params
    k = len(env.agents)
    n_act = env.action_space(env.agents[0]).n

    @jax.jit
    def rollout(key):
        _, state = jax.vmap(env.reset_env, in_axes=(0, None))(jax.random.split(key, num_envs), p)

        def body(state, kk):
            k_act, k_step = jax.random.split(kk)
            acts = jax.random.randint(k_act, (num_envs, k), 0, n_act)
            out = jax.vmap(env.step_env, in_axes=(0, 0, 0, None))(jax.random.split(k_step, num_envs), state, acts, p)
            return out[1], out[2].sum()

        return jax.lax.scan(body, state, jax.random.split(key, steps))[1].sum()

    rollout(jax.random.PRNGKey(0)).block_until_ready()  # compile
    best = float("inf")
    for r in range(repeats):
        t0 = time.perf_counter()
        rollout(jax.random.PRNGKey(r + 1)).block_until_ready()
        best = min(best, time.perf_counter() - t0)
    return num_envs * steps / best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--agents", type=int, default=4)
    args = ap.parse_args(argv)
    kw = dict(num_agents=args.agents, max_steps=10**6)
    npc = throughput(nexus_jax.make("nexus-v0", **kw), args.envs, args.steps)
    ext = throughput(nexus_jax.make("nexus-selfplay-v0", **kw), args.envs, args.steps)
    print(f"backend={jax.default_backend()} N={args.agents} envs={args.envs} steps={args.steps}")
    print(f"NPC seats (1 learner + {args.agents - 1} NPCs): {npc:,.0f} env-steps/s")
    print(f"all seats external:                {ext:,.0f} env-steps/s")
    print(f"NPC overhead: {ext / npc:.2f}x time per step")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
