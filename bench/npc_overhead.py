"""NPC and env-class overhead: env-steps/s of nexus-v0 (1 learner + 3 NPCs) vs all seats driven externally.

`python bench/npc_overhead.py [--envs 1024] [--steps 100] [--agents 4] [--rounds 3]`. Every row steps
the same N-seat economy with uniformly random flat actions for the external seats, in one jitted
`lax.scan` over vmapped steps; observations and rewards are folded into a checksum, so XLA
cannot drop them. Rows:

- all seats external: `nexus-selfplay-v0`'s `step_env` (the core step, no NPC work);
- NPC seats: `nexus-v0`'s `step_env` (NPC actions and memory inside the step, no reset);
- env.step: `nexus-v0`'s dict API with auto-reset, what training (train/learner_env.py) calls.

All rows are compiled first, then timed interleaved (one call of each per round) in one
process; the best round of each is kept. Prints a table, writes bench/results/npc_overhead.json.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import jax

from train.runtime import machine, write_report
from nexus_jax.cli import ArgumentParser, entry_point, positive_int
import nexus_jax

OUT = Path(__file__).parent / "results" / "npc_overhead.json"


def rollout(env, num_envs: int, steps: int, api: str):
    """A jitted key -> checksum: reset `num_envs` envs, then `steps` vmapped steps through `api`
    ("step_env": the array-level step, no reset; "step": the dict API with auto-reset)."""
    p = env.default_params
    k = len(env.agents)
    n_act = env.action_space(env.agents[0]).n

    def one_step(key, state, acts):
        if api == "step_env":
            obs, state, rew, _, _ = env.step_env(key, state, acts, p)
            return obs.sum() + rew.sum(), state
        obs, state, rew, _, _ = env.step(key, state, {a: acts[i] for i, a in enumerate(env.agents)})
        return sum(o.sum() for o in obs.values()) + sum(r.sum() for r in rew.values()), state

    @jax.jit
    def run(key):
        _, state = jax.vmap(env.reset_env, in_axes=(0, None))(jax.random.split(key, num_envs), p)

        def body(state, kk):
            k_act, k_step = jax.random.split(kk)
            acts = jax.random.randint(k_act, (num_envs, k), 0, n_act)
            total, state = jax.vmap(one_step)(jax.random.split(k_step, num_envs), state, acts)
            return state, total.sum()

        return jax.lax.scan(body, state, jax.random.split(key, steps))[1].sum()

    return run


def interleaved(runs: dict, rounds: int) -> dict:
    """Compile every run, then time one call of each per round; -> name -> best seconds."""
    for run in runs.values():
        run(jax.random.PRNGKey(0)).block_until_ready()
    best = {name: float("inf") for name in runs}
    for r in range(rounds):
        for name, run in runs.items():
            t0 = time.perf_counter()
            run(jax.random.PRNGKey(r + 1)).block_until_ready()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


@entry_point("python -m bench.npc_overhead")
def main(argv=None):
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", type=positive_int, default=1024)
    ap.add_argument("--steps", type=positive_int, default=100)
    ap.add_argument("--agents", type=positive_int, default=4)
    ap.add_argument("--rounds", type=positive_int, default=3)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    kw = dict(num_agents=args.agents, max_steps=10**6)
    npc_env, ext_env = nexus_jax.make("nexus-v0", **kw), nexus_jax.make("nexus-selfplay-v0", **kw)
    runs = {
        "all seats external (step_env)": rollout(ext_env, args.envs, args.steps, "step_env"),
        f"1 learner + {args.agents - 1} NPCs (step_env)": rollout(npc_env, args.envs, args.steps, "step_env"),
        f"1 learner + {args.agents - 1} NPCs (env.step, auto-reset)": rollout(npc_env, args.envs, args.steps, "step"),
    }
    load_before = os.getloadavg()
    best = interleaved(runs, args.rounds)
    rates = {name: args.envs * args.steps / s for name, s in best.items()}
    ext, npc, full = rates.values()
    print(f"backend={jax.default_backend()} N={args.agents} envs={args.envs} steps={args.steps} "
          f"load {load_before[0]:.1f} -> {os.getloadavg()[0]:.1f}")
    for name, rate in rates.items():
        print(f"{name:<42} {rate:>10,.0f} env-steps/s")
    ratios = {"npc_overhead": ext / npc, "env_step_vs_step_env": npc / full, "env_step_vs_all_external": ext / full}
    print(f"NPC overhead: {ratios['npc_overhead']:.2f}x time per step; auto-reset + dict API: "
          f"{ratios['env_step_vs_step_env']:.2f}x more; env.step vs all external: {ratios['env_step_vs_all_external']:.2f}x")
    write_report(args.out, dict(args={k: str(v) for k, v in vars(args).items()}, env_steps_per_s=rates,
                                time_ratios=ratios, load_average_before=load_before, machine=machine()), indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
