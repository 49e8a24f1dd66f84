"""How much a vault hedge is worth in nexus-v0: RECIPROCATOR in seat 0 with and without it, same keys.

`python bench/hedge_headroom.py [--episodes 1000] [--unvault-at 94]`. The hedge: VAULT 40 E and
40 C at steps 0-1, UNVAULT both at steps `unvault_at` and `unvault_at + 1` (they arrive
`vault_delay` = 3 steps later), the RECIPROCATOR heuristic otherwise. Prints mean ± 95% CI of
seat 0's return for both; the gap is the headroom a learner can find (docs/npcs.md).
"""
from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

from nexus_jax.envs.nexus import actions as A
from nexus_jax.envs.nexus import core
from nexus_jax.envs.nexus.constants import ActionType, Archetype
from nexus_jax.envs.nexus.npc import npc_actions, step_with_npcs
from nexus_jax.envs.nexus.params import NexusParams


def make_episode(params: NexusParams, unvault_at: int, steps: int = 100):
    n, top = params.num_agents, params.num_levels - 1
    behaviour = params.archetypes.at[0].set(int(Archetype.RECIPROCATOR))

    def own(kind, resource):
        return jnp.array([int(kind), 0, top, 0, resource], jnp.int32)

    def episode(key, hedge):
        k_reset, k_run = jax.random.split(key)
        _, state = core.reset(k_reset, params)

        def body(carry, k):
            state, ret = carry
            k_npc, k_step = jax.random.split(k)
            a, s = npc_actions(k_npc, state, params, behaviour)[0], state.step
            for step, kind, res in ((0, ActionType.VAULT, 0), (1, ActionType.VAULT, 1),
                                    (unvault_at, ActionType.UNVAULT, 0), (unvault_at + 1, ActionType.UNVAULT, 1)):
                a = jnp.where(hedge & (s == step), own(kind, res), a)
            seat0 = A.encode(a, n, params.num_levels)[None]
            _, state, reward, _, _ = step_with_npcs(k_step, state, seat0, params, (0,), behaviour)
            return (state, ret + reward[0]), None

        (_, ret), _ = jax.lax.scan(body, (state, 0.0), jax.random.split(k_run, steps))
        return ret

    return jax.jit(jax.vmap(episode, (0, None)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=1000)
    ap.add_argument("--unvault-at", type=int, default=94)
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args(argv)
    params = NexusParams.create()
    run = make_episode(params, args.unvault_at)
    keys = jax.random.split(jax.random.PRNGKey(args.seed), args.episodes)
    for name, hedge in (("RECIPROCATOR", False), ("RECIPROCATOR + vault hedge", True)):
        r = np.asarray(run(keys, jnp.bool_(hedge)))
        print(f"{name:<28} {r.mean():8.2f} ± {1.96 * r.std(ddof=1) / np.sqrt(len(r)):.2f}")


if __name__ == "__main__":
    main()
