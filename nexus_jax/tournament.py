"""Tournament: each archetype's policy, and random policies, in seat 0 against the default NPC mix.

`python -m nexus_jax.tournament [--episodes 4096] [--steps 100]`. Seat 0 keeps the LEARNER
economy (endowment, income); only its policy changes, through the NPC `behaviour` override,
so every row faces the same opponents (BULLY, ALTRUIST, TIT_FOR_TAT) and the same economy.
All policies share one compiled program: the policy id is a traced argument.
"""
from __future__ import annotations

import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from nexus_jax import rollout
from nexus_jax.cli import ArgumentParser, entry_point, params_error, positive_int
from nexus_jax.envs.nexus import (Archetype, NexusEnv, NexusParams, encode, npc_actions, num_flat_actions, reset,
                                  seat_masks, step_with_npcs)

RANDOM, MASKED_RANDOM = -1, -2  # policy ids besides the archetypes
POLICIES = [(a.name, int(a)) for a in Archetype if a != Archetype.LEARNER] + [("RANDOM", RANDOM),
                                                                               ("MASKED_RANDOM", MASKED_RANDOM)]


class SeatZeroEnv(NamedTuple):
    """The functional core with seat 0 acting and NPCs in every other seat (`behaviour` per seat), in the
    rollout's protocol (`nexus_jax.rollout`): one env key per step is the (NPC, step) pair."""

    params: NexusParams
    behaviour: jnp.ndarray
    episode_metrics = NexusEnv.episode_metrics

    @property
    def default_params(self):
        return self.params

    def masks(self, state):
        return seat_masks(state, self.params, jnp.array([0]))[0]

    def step(self, key, state, action, params):
        return step_with_npcs(key, state, action[None], self.params, (0,), self.behaviour)

    def invalid(self, info):
        return info["invalid"][:, :1]


def make_episodes(params: NexusParams, steps: int):
    """episodes(keys (E,), policy_id) -> metrics of E episodes with `policy_id` in seat 0 (pure); episode e is
    played from keys[e] alone (reset, then `steps` per-step keys, each split into act, NPC and step keys)."""
    n = params.num_agents
    num_actions = num_flat_actions(n, params.num_levels)

    def episodes(keys, policy_id):
        behaviour = params.archetypes.at[0].set(jnp.maximum(policy_id, 0))
        env = SeatZeroEnv(params, behaviour)
        k_reset, k_run = jnp.moveaxis(jax.vmap(jax.random.split)(keys), 1, 0)
        obs, state = jax.vmap(lambda k: reset(k, params))(k_reset)

        def split_key(k):  # (E,) per-episode step keys -> ((act, NPC) keys, step keys), each (E,)
            k3 = jax.vmap(lambda kk: jax.random.split(kk, 3))(k)
            return (k3[:, 0], k3[:, 1]), k3[:, 2]

        def act(key, obs, state, mask):
            def one(k_act, k_npc, s, m):
                uniform = jax.random.randint(k_act, (), 0, num_actions)
                masked = jax.random.categorical(k_act, jnp.where(m, 0.0, -jnp.inf))
                scripted = encode(npc_actions(k_npc, s, params, behaviour)[0], n, params.num_levels)
                return jnp.where(policy_id == RANDOM, uniform, jnp.where(policy_id == MASKED_RANDOM, masked, scripted))
            return jax.vmap(one)(*key, state, mask), None

        step_keys = jnp.moveaxis(jax.vmap(lambda k: jax.random.split(k, steps))(k_run), 1, 0)  # (T, E)
        return rollout.evaluate_from(env, act, obs, state, step_keys, split_key, params, metrics=True).metrics

    return episodes


def run(episodes: int = 4096, steps: int = 100, seed: int = 0, params: NexusParams | None = None):
    """{policy name: metrics dict of (episodes, ...) arrays}."""
    params = NexusParams.create(max_steps=steps) if params is None else params
    fn = jax.jit(make_episodes(params, steps))
    keys = jax.random.split(jax.random.PRNGKey(seed), episodes)
    return {name: jax.tree.map(np.asarray, fn(keys, jnp.int32(pid))) for name, pid in POLICIES}


def table(results) -> str:
    cols = [("return", lambda m: m["returns"][:, 0]),
            ("trades", lambda m: m["trades"][:, 0]),
            ("invalid %", lambda m: 100 * m["invalid_action_rate"][:, 0]),
            ("final U", lambda m: m["final_utility"][:, 0]),
            ("accept %", lambda m: 100 * m["proposal_acceptance_rate"][:, 0]),
            ("sys U end", lambda m: m["system_utility_end"]),
            ("broken", lambda m: m["signals_broken"][:, 0])]
    head = "| seat-0 policy | " + " | ".join(c for c, _ in cols) + " |"
    lines = [head, "|" + "---|" * (len(cols) + 1)]
    for name, m in results.items():
        cells = [f"{f(m).mean():.2f} ± {f(m).std():.2f}" for _, f in cols]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


@entry_point("python -m nexus_jax.tournament")
def main(argv=None):
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=positive_int, default=4096)
    ap.add_argument("--steps", type=positive_int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        params = NexusParams.create(max_steps=args.steps)
    except (ValueError, TypeError) as e:
        raise params_error("--steps", e) from None
    t0 = time.perf_counter()
    res = run(args.episodes, args.steps, args.seed, params)
    print(f"{args.episodes} episodes x {args.steps} steps per policy, seat 0 vs BULLY, ALTRUIST, TIT_FOR_TAT "
          f"(mean ± std over episodes; {time.perf_counter() - t0:.0f} s)")
    print(table(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
