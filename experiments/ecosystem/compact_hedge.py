"""`python -m experiments.ecosystem.compact_hedge`: why a discounted, unmasked learner stops at WAIT on nexus-v0.

Plays scripted, open-loop policies in seat 0 of `nexus_jax.make(ENV_ID, action_format=...)` on
the same episode keys and reports, for each: the return (mean ± 95% CI), its paired difference
from WAIT-only, the same two at a discount γ (default upstream's 0.99, from step 0), the invalid
rate, and the mean reward per step over a few windows of the episode (how the return is spread
in time). The policies:

- `wait`: WAIT (compact index 0) on every step;
- `hedge{k}`: the vault hedge through compact actions: VAULT 10 Energy on steps 0..k-1, VAULT 10
  Compute on steps k..2k-1, WAIT, then UNVAULT 10 Energy and Compute k times each on the last
  steps whose withdrawals still arrive before the end (as `npc.hedge.default_unvault_step`);
- `flat_hedge`: `npc.hedge.hedge_actions` over WAIT in the full flat space (VAULT the largest level
  held, 40, of each resource at steps 0 and 1; UNVAULT both at steps 94 and 95).

`--vault-shaping W` makes the env with that opt-in reward timing (reward.py), to measure how it moves
the reward in time (each episode's return must not change). Writes a JSON report (`--out`).
"""
from __future__ import annotations

import sys
from pathlib import Path

import nexus_jax

import jax
import jax.numpy as jnp
import numpy as np

from train.runtime import machine, write_report
from nexus_jax import rollout
from nexus_jax.cli import ArgumentParser, entry_point, positive_int
from nexus_jax.envs.nexus import default_unvault_step, encode, hedge_actions
from train.learner_env import LearnerEnv
from train.stats import mean_ci

OUT = Path(__file__).parent / "results" / "compact_hedge.json"
WINDOWS = ((0, 1), (1, 10), (10, 50), (50, 90), (90, 100))  # [start, end) steps of the reward profile
WAIT, VAULT_E, VAULT_C, UNVAULT_E, UNVAULT_C = 0, 6, 7, 8, 9  # compact indices (compact.compact_rows' order)


def compact_hedge(k: int, last_unvault: int):
    """Seat 0's compact index at step t: k VAULT 10 of each resource first, 2k UNVAULT 10 ending at `last_unvault`."""
    first_unvault = last_unvault - 2 * k + 1

    def act(t, state, params):
        out = jnp.where(t < k, VAULT_E, jnp.where(t < 2 * k, VAULT_C, WAIT))
        u = t - first_unvault
        return jnp.where((u >= 0) & (u < k), UNVAULT_E, jnp.where((u >= k) & (u < 2 * k), UNVAULT_C, out))
    return act


def flat_hedge(unvault_at: int):
    """Seat 0's flat index at step t: `hedge_actions` laid over WAIT."""
    def act(t, state, params):
        wait = jnp.zeros((1, 5), jnp.int32)
        row = hedge_actions(wait, state, params, (0,), jnp.ones(1, bool), unvault_at)
        return encode(row, params.num_agents, params.num_levels)[0]
    return act


def play(env, act, episodes: int, seed: int, keyed: bool = False):
    """Seat 0 plays `act(t, state, params) -> index` -> rewards (T, E), invalid flags (T, E) and its picks (T, E).

    `keyed`: a random policy, `act(t, state, params, key)` with one key per episode, drawn from
    `fold_in(step key, 1)` so the env's keys (and every unkeyed policy's episodes) stay the same."""
    steps, params = int(env.default_params.max_steps), env.default_params
    seat = LearnerEnv(env, "flat")  # agent_0's view in the rollout's protocol

    def pick(k, obs, state, masks):  # state.step: the step index t of each env's (first) episode
        if keyed:
            keys = jax.random.split(jax.random.fold_in(k, 1), episodes)
            return jax.vmap(lambda kk, s: act(s.step, s, params, kk))(keys, state)[:, None], None
        return jax.vmap(lambda s: act(s.step, s, params))(state)[:, None], None

    def split_key(k):  # the env keys are split from the step key itself, the policy's from fold_in(k, 1)
        return k, jax.random.split(k, episodes)

    @jax.jit
    def run(key):
        obs, state = jax.vmap(seat.reset)(jax.random.split(key, episodes))
        ep = rollout.evaluate_from(seat, pick, obs, state, jax.random.split(jax.random.fold_in(key, 1), steps),
                                   split_key, trace=lambda s: (s.reward[:, 0], s.invalid[:, 0], s.action[:, 0]))
        return ep.trace

    return jax.device_get(run(jax.random.PRNGKey(seed)))


def report_one(rewards: np.ndarray, invalid: np.ndarray, wait_rewards: np.ndarray, gamma: float) -> dict:
    disc = gamma ** np.arange(rewards.shape[0])[:, None]
    ret, ret_g = rewards.sum(0), (disc * rewards).sum(0)
    out = {"return": mean_ci(ret), "minus_wait": mean_ci(ret - wait_rewards.sum(0)),
           f"return_gamma{gamma}": mean_ci(ret_g), f"minus_wait_gamma{gamma}": mean_ci(ret_g - (disc * wait_rewards).sum(0)),
           "invalid_rate": float(invalid.mean())}
    out["reward_per_step"] = {f"{a}-{b - 1}": round(float(rewards[a:b].mean()), 3) for a, b in WINDOWS}
    out["reward_per_step_minus_wait"] = {f"{a}-{b - 1}": round(float((rewards[a:b] - wait_rewards[a:b]).mean()), 3)
                                         for a, b in WINDOWS}
    return out


def add_play_args(ap) -> None:
    """The arguments of a compact-space payoff run: env id, episodes, episode keys, the learner's discount."""
    ap.add_argument("--env-id", default="nexus-v0")
    ap.add_argument("--episodes", type=positive_int, default=1024)
    ap.add_argument("--seed", type=int, default=12345, help="episode keys (experiments.ecosystem.ecosystem's evaluation keys)")
    ap.add_argument("--gamma", type=float, default=0.99)


@entry_point("python -m experiments.ecosystem.compact_hedge")
def main(argv=None) -> int:
    ap = ArgumentParser(description=__doc__.split("\n")[0])
    add_play_args(ap)
    ap.add_argument("--vault-shaping", type=float, default=0.0, help="NexusParams.vault_shaping (0: SPEC's reward)")
    ap.add_argument("--levels", type=int, nargs="*", default=[1, 2, 3, 4], help="hedge{k}: k VAULT 10 per resource")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    kwargs = {"vault_shaping": args.vault_shaping} if args.vault_shaping else {}
    compact = nexus_jax.make(args.env_id, action_format="compact", **kwargs)
    flat = nexus_jax.make(args.env_id, **kwargs)
    last = default_unvault_step(compact.default_params) + 1  # the flat hedge's last UNVAULT step (95)
    policies = {"wait": (compact, lambda t, s, p: jnp.int32(WAIT)),
                **{f"hedge{k}": (compact, compact_hedge(k, last)) for k in args.levels},
                "flat_hedge": (flat, flat_hedge(last - 1))}
    played = {name: play(env, act, args.episodes, args.seed) for name, (env, act) in policies.items()}
    report = {"command": "python -m experiments.ecosystem.compact_hedge " + " ".join(argv if argv is not None else sys.argv[1:]),
              "machine": machine(), "env_id": args.env_id, "env_kwargs": kwargs, "episodes": args.episodes,
              "policies": {name: report_one(r, inv, played["wait"][0], args.gamma) for name, (r, inv, _) in played.items()}}
    g = f"gamma{args.gamma}"
    for name, r in report["policies"].items():
        print(f"{name:11s} return {r['return'][0]:8.2f} ± {r['return'][1]:.2f}  - wait {r['minus_wait'][0]:+7.2f} ± "
              f"{r['minus_wait'][1]:.2f} | γ={args.gamma}: {r['return_' + g][0]:8.2f}, - wait "
              f"{r['minus_wait_' + g][0]:+7.2f} ± {r['minus_wait_' + g][1]:.2f} | invalid {r['invalid_rate']:.3f}")
        print(f"{'':11s} reward/step - wait by steps: {r['reward_per_step_minus_wait']}  (wait: "
              f"{report['policies']['wait']['reward_per_step']})", flush=True)
    write_report(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
