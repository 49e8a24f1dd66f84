"""Who breaks promises to seat 0, under which label, and whether the breaker meant to break.

`python -m experiments.research.attribution_intent [--env nexus-research-v0] [--policy RECIPROCATOR] [--episodes 1024] [field=value ...]`
(the fields override the env's params, e.g. `npc_honour_delay=[0,0,4,4,4,0]`).
A scripted policy (experiments.research.questions.SCRIPTED) plays seat 0; every signal broken to it is counted by
partner, by its ledger label (FORCE_MAJEURE or BROKEN) and by the signaller's intention when it
signalled (the NPC memory's INTENT slot: -1 meant to break, drawn with its `npc_break_rate`). The
force-majeure label says a shock caused the shortfall (the signaller held the promised amount
before it), not that the signaller meant to keep the promise: this shows how often the two differ,
i.e. how much a learner can learn about intent from the label (docs/research.md, result 3).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from nexus_jax import rollout
from nexus_jax.cli import ArgumentParser, entry_point, positive_int
from nexus_jax.envs.nexus import Archetype
from nexus_jax.envs.nexus import MemorySlot as Slot
from train.config import parse_overrides
from train.learner_env import LearnerEnv
from experiments.research.questions import SCRIPTED, scripted_act, scripted_args


def break_counts(base: LearnerEnv, episodes: int):
    """-> jitted `run(params, archetype, hedge, key)` -> (N, 2, 2) counts summed over episodes:
    [signaller, label (0 force majeure, 1 malicious), intention (0 meant to keep, 1 meant to break)]."""
    def run(params, archetype, hedge, key):
        env, hp, act = scripted_act(base, params, archetype, hedge)

        def fold(c, s):
            st = s.info["stats"]
            broken = st["signals_broken"][:, :, 0]  # (E, signaller) to seat 0
            fm = broken & st["broken_force_majeure"][:, :, 0]
            meant = s.state.npc_memory[:, :, 0, Slot.INTENT] < 0
            label = jnp.stack([fm, broken & ~fm], -1)  # (E, N, 2)
            intent = jnp.stack([~meant, meant], -1)
            return c + (label[..., :, None] & intent[..., None, :]).sum(0), None

        n = hp.num_agents
        (_, _, c), _ = rollout.run(env, key, episodes, base.max_steps, act, fold, jnp.zeros((n, 2, 2), jnp.int32), hp)
        return c

    return jax.jit(run)


@entry_point("python -m experiments.research.attribution_intent")
def main(argv=None):
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="nexus-research-v0")
    ap.add_argument("--policy", default="RECIPROCATOR", choices=SCRIPTED)
    ap.add_argument("--episodes", type=positive_int, default=1024)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("overrides", nargs="*", help="env param overrides, field=value")
    args = ap.parse_args(argv)
    base = LearnerEnv.make(args.env, parse_overrides(args.overrides))
    params = base.env.default_params
    c = np.asarray(break_counts(base, args.episodes)(*scripted_args(params, args.policy), jax.random.PRNGKey(args.seed)))
    print(f"{args.env} {' '.join(args.overrides)}, {args.policy} in seat 0, {args.episodes} episodes: signals broken to seat 0")
    print("| partner | force majeure | of which meant to break | malicious | of which meant to break |")
    print("|---|---:|---:|---:|---:|")
    for j in range(1, params.num_agents):
        name = Archetype(int(np.asarray(params.archetypes)[j])).name
        print(f"| {j} {name} | {c[j, 0].sum()} | {c[j, 0, 1]} | {c[j, 1].sum()} | {c[j, 1, 1]} |")
    return 0


if __name__ == "__main__":
    main()
