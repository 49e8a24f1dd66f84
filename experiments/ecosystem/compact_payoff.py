"""`python -m experiments.ecosystem.compact_payoff`: which compact action pays within reach of a γ = 0.99 learner on nexus-v0?

Plays closed-loop scripted policies in seat 0 of `nexus_jax.make(ENV_ID, action_format="compact")` on
the same episode keys as `experiments.ecosystem.compact_hedge` (whose `play` and `report_one` it reuses) and reports
each one's return, its paired difference from WAIT-only, the same discounted at γ from step 0, and
the reward per step over windows of the episode minus WAIT's. The policies:

- `when_valid{a}`: compact index a whenever the seat's compact mask allows it, else WAIT (a = 1..K-1:
  ACCEPT k, WORK r, VAULT r, UNVAULT r, PROPOSE k r, in `compact.compact_rows`' order);
- `accept_any`: ACCEPT the first seat (i+1, i+2, ...) with a live proposal to me, else WAIT;
- `work_surplus{d}`: WORK the resource I hold more of when my available holdings differ by more than d
  (spend 5 of the surplus, gain 2 of the short one), else WAIT.

`--heuristics` also plays each NPC archetype's policy in seat 0 (the full flat space, its NPC memory
kept by the env as `train.evaluate` does, its own random keys), paired with WAIT on the same env keys:
do the heuristics' trades, which beat WAIT undiscounted, pay within a γ = 0.99 horizon?

The question it answers (experiments/ecosystem/README.md, "What pays within a γ = 0.99 horizon"): is there an entry
of the compact space, or a simple rule over it, whose advantage over WAIT is visible to a learner that
discounts at 0.99 (so the payoff must come within tens of steps)? Writes a JSON report (`--out`).
"""
from __future__ import annotations

import sys
from pathlib import Path

import nexus_jax

import jax.numpy as jnp

from train.runtime import machine, write_report
from experiments.ecosystem.compact_hedge import add_play_args, play, report_one
from nexus_jax.cli import ArgumentParser, UserInputError, entry_point
from nexus_jax.envs.nexus import NPC_ARCHETYPES, Archetype, npc_actions

OUT = Path(__file__).parent / "results" / "compact_payoff.json"
WORK_E, WORK_C = 4, 5  # compact indices (compact.compact_rows' order)


def when_valid(env, a: int):
    """Compact index a when seat 0's mask allows it, else WAIT (0)."""
    agent = env.agents[0]
    return lambda t, state, params: jnp.where(env.get_avail_actions(state)[agent][a], a, 0)


def first_valid(env, indices: list[int]):
    """The first of `indices` seat 0's mask allows, else WAIT."""
    agent = env.agents[0]

    def act(t, state, params):
        mask, out = env.get_avail_actions(state)[agent], jnp.int32(0)
        for a in reversed(indices):
            out = jnp.where(mask[a], a, out)
        return out
    return act


def work_surplus(env, margin: float):
    """WORK the resource seat 0 holds more of (available) when the two differ by more than `margin`, else WAIT."""
    agent = env.agents[0]

    def act(t, state, params):
        mask, (e, c) = env.get_avail_actions(state)[agent], state.available[0]
        return jnp.where((e - c > margin) & mask[WORK_E], WORK_E, jnp.where((c - e > margin) & mask[WORK_C], WORK_C, 0))
    return act


def heuristic_env(env_id: str, archetype: int, **overrides):
    """The flat env whose seat 0 keeps `archetype`'s NPC memory (params.behaviours[0]), for `heuristic`."""
    behaviours = nexus_jax.make(env_id, **overrides).default_params.behaviours.at[0].set(archetype)
    return nexus_jax.make(env_id, behaviours=tuple(int(b) for b in behaviours), **overrides)


def heuristic(env):
    """Seat 0 plays its `params.behaviours[0]` archetype's NPC policy (a keyed act for `play(..., keyed=True)`)."""
    def act(t, state, params, key):
        return env.encode(npc_actions(key, state, params, params.behaviours)[0])
    return act


def report_line(name: str, r: dict, g: str) -> str:
    return (f"{name:15s} return {r['return'][0]:8.2f} ± {r['return'][1]:.2f}  - wait {r['minus_wait'][0]:+6.2f} ± "
            f"{r['minus_wait'][1]:.2f} | {g}: - wait {r['minus_wait_' + g][0]:+6.2f} ± "
            f"{r['minus_wait_' + g][1]:.2f} | not WAIT {r['not_wait']:.2f} | - wait per step {r['reward_per_step_minus_wait']}")


@entry_point("python -m experiments.ecosystem.compact_payoff")
def main(argv=None) -> int:
    ap = ArgumentParser(description=__doc__.split("\n")[0])
    add_play_args(ap)
    ap.add_argument("--margins", type=float, nargs="*", default=[5.0, 10.0], help="work_surplus{d}: the holdings gap d")
    ap.add_argument("--only", nargs="*", default=None, metavar="NAME", help="play only these policies (and wait)")
    ap.add_argument("--heuristics", action="store_true", help="also each NPC archetype's policy in seat 0 (flat space)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    env = nexus_jax.make(args.env_id, action_format="compact")
    k = env.action_space(env.agents[0]).n
    policies = {"wait": lambda t, s, p: jnp.int32(0),
                **{f"when_valid{a}": when_valid(env, a) for a in range(1, k)},
                "accept_any": first_valid(env, list(range(1, env.default_params.num_agents))),  # ACCEPT k = 1..N-1
                **{f"work_surplus{d:g}": work_surplus(env, d) for d in args.margins}}
    unknown = set(args.only or ()) - set(policies)
    if unknown:
        raise UserInputError(f"--only: unknown policies {sorted(unknown)}; known: {sorted(policies)}")
    played = {name: play(env, act, args.episodes, args.seed) for name, act in policies.items()
              if args.only is None or name in {"wait", *args.only}}
    report = {"command": "python -m experiments.ecosystem.compact_payoff " + " ".join(argv if argv is not None else sys.argv[1:]),
              "machine": machine(), "env_id": args.env_id, "episodes": args.episodes, "policies": {}}
    g = f"gamma{args.gamma}"
    for name, (rewards, invalid, picks) in played.items():
        r = {**report_one(rewards, invalid, played["wait"][0], args.gamma), "not_wait": float((picks != 0).mean())}
        report["policies"][name] = r
        print(report_line(name, r, g), flush=True)
    if args.heuristics:  # the flat space; WAIT (flat index 0) replayed there on the same keys, paired
        wait = play(nexus_jax.make(args.env_id), lambda t, s, p: jnp.int32(0), args.episodes, args.seed)[0]
        for arch in NPC_ARCHETYPES:
            env_h = heuristic_env(args.env_id, int(arch))
            rewards, invalid, picks = play(env_h, heuristic(env_h), args.episodes, args.seed, keyed=True)
            r = {**report_one(rewards, invalid, wait, args.gamma), "not_wait": float((picks != 0).mean())}
            report["policies"][f"heuristic_{Archetype(int(arch)).name.lower()}"] = r
            print(report_line(f"heuristic_{Archetype(int(arch)).name.lower()}", r, g), flush=True)
    write_report(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
