"""How much a vault hedge is worth in nexus-v0: RECIPROCATOR in seat 0 with and without it, same keys.

`python -m experiments.research.hedge_headroom [--episodes 1000] [--steps 100] [--unvault-at 94]`. The hedge
(`nexus_jax.envs.nexus.npc.hedge`): VAULT the most it holds of energy and compute at steps 0-1,
UNVAULT both at steps `unvault_at` and `unvault_at + 1` (they arrive `vault_delay` = 3 steps
later; default: the last steps that arrive 3 steps before the end), the RECIPROCATOR heuristic
otherwise. Prints mean ± 95% CI of seat 0's return for both; the gap is the headroom a learner
can find (docs/npcs.md).
"""
from __future__ import annotations


import jax
import jax.numpy as jnp

from nexus_jax.cli import ArgumentParser, entry_point, positive_int
from nexus_jax.envs.nexus import (Archetype, NexusParams, default_unvault_step, encode, hedge_actions, npc_actions, reset,
                                  step_with_npcs)
from train.stats import mean_ci


def make_episode(params: NexusParams, unvault_at: int):
    n, steps = params.num_agents, int(params.max_steps)
    behaviour = params.archetypes.at[0].set(int(Archetype.RECIPROCATOR))

    def episode(key, hedge):
        k_reset, k_run = jax.random.split(key)
        _, state = reset(k_reset, params)

        def body(carry, k):
            state, ret = carry
            k_npc, k_step = jax.random.split(k)
            a = npc_actions(k_npc, state, params, behaviour)[:1]
            a = jnp.where(hedge, hedge_actions(a, state, params, (0,), jnp.ones(1, bool), unvault_at), a)
            seat0 = encode(a, n, params.num_levels)
            _, state, reward, _, _ = step_with_npcs(k_step, state, seat0, params, (0,), behaviour)
            return (state, ret + reward[0]), None

        (_, ret), _ = jax.lax.scan(body, (state, 0.0), jax.random.split(k_run, steps))
        return ret

    return jax.jit(jax.vmap(episode, (0, None)))


@entry_point("python -m experiments.research.hedge_headroom")
def main(argv=None):
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=positive_int, default=1000)
    ap.add_argument("--steps", type=positive_int, default=100, help="episode length (max_steps)")
    ap.add_argument("--unvault-at", type=int, default=None, help="default: max_steps - vault_delay - 3")
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args(argv)
    params = NexusParams.create(max_steps=args.steps)
    unvault_at = default_unvault_step(params) if args.unvault_at is None else args.unvault_at
    run = make_episode(params, unvault_at)
    print(f"{args.episodes} episodes of {args.steps} steps, seat 0; the hedge unvaults at steps {unvault_at}, {unvault_at + 1}")
    keys = jax.random.split(jax.random.PRNGKey(args.seed), args.episodes)
    for name, hedge in (("RECIPROCATOR", False), ("RECIPROCATOR + vault hedge", True)):
        m, h = mean_ci(run(keys, jnp.bool_(hedge)))
        print(f"{name:<28} {m:8.2f} ± {h:.2f}")


if __name__ == "__main__":
    main()
