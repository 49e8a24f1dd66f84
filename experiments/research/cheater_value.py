"""`python -m experiments.research.cheater_value [--env nexus-research-hidden-v1] [--episodes 1000] [--seed 12345] [field=value ...]`: what telling the cheater apart is worth to seat 0.

Result 3 asks a learner to keep proposing to a partner after its force-majeure break and not after a
malicious one. PPO learns that only if it pays, and this prices it with scripted play, no training:

- BLIND: the history-blind heuristic (train.attribution.history_blind) in seat 0;
- ORACLE: the same heuristic told which seat plays the CHEATER this episode (hidden types deal it anew each
  episode): a proposal, promise or payment ahead on a signal (`signal_prepay`) BLIND would make to that seat
  goes to the partner it would pick with the CHEATER left out; everything else (accepting the CHEATER's
  offers included) is BLIND's.

ORACLE − BLIND, paired over the same keys, is what perfect cheater detection adds to a policy that trades as
BLIND does: the incentive behind result 3. On `nexus-research-hidden-v0` (per-trade bonus 8.0) it is clearly
positive and PPO learned result 3 there; docs/research.md has the numbers for v0 and v1. The field=value
overrides change the env's params (e.g. `reject_penalty=1.0`), to price candidate rules.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from nexus_jax.cli import ArgumentParser, entry_point, positive_int
from nexus_jax.envs.nexus import ActionType, Archetype, npc_actions, with_behaviour
from train.attribution import history_blind
from train.config import parse_overrides
from train.learner_env import LearnerEnv
from train.stats import mean_ci
from train.sweep import play_episodes
from experiments.research.questions import describe

POLICIES = ("BLIND", "ORACLE")


def make_pricer(base: LearnerEnv, episodes: int):
    """-> jitted `run(oracle, key)`: BLIND (`oracle` False) or ORACLE (True) in seat 0 of `base`'s rules;
    train.sweep.play_episodes' dict."""
    params = history_blind(base.env.default_params)
    env = base.with_params(params)
    hp = with_behaviour(params, env.seats, jnp.int32(int(Archetype.LEARNER)))
    # the learner heuristic's own trust gate, reused as the oracle's exclusion (BLIND's threshold is 0)
    gate = hp.replace(npc_min_trust=jnp.asarray(hp.npc_min_trust).at[int(Archetype.LEARNER)].set(0.5))

    def act(oracle, k, obs, state, masks):
        def one(kk, s):
            cheater = hp.behaviours[s.behaviour_seat] == int(Archetype.CHEATER)  # (N,) this episode's deal
            a = npc_actions(kk, s, hp, hp.behaviours)[env.seats]
            told = s.replace(trust=s.trust.at[env.seats].set(jnp.where(cheater, 0.0, 1.0)))
            a_told = npc_actions(kk, told, gate, hp.behaviours)[env.seats]
            # a promise is honoured by a PROPOSE; an ACCEPT with no proposal of the partner's live pays its signal
            # ahead (`signal_prepay`)
            relies = (a[:, 0] == int(ActionType.ACCEPT)) & ~s.proposals.active[a[:, 1], env.seats]
            courts = (a[:, 0] == int(ActionType.PROPOSE)) | (a[:, 0] == int(ActionType.SIGNAL)) | relies
            redirect = oracle & courts & cheater[a[:, 1]]
            return jnp.where(redirect[:, None], a_told, a)
        return jax.vmap(one)(jax.random.split(k, obs.shape[0]), state), None

    def run(oracle, key):
        return play_episodes(env, lambda *a: act(oracle, *a), hp, key, episodes, base.max_steps)

    return jax.jit(run)


@entry_point("python -m experiments.research.cheater_value")
def main(argv=None):
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="nexus-research-hidden-v1")
    ap.add_argument("--episodes", type=positive_int, default=1000)
    ap.add_argument("--seed", type=int, default=12345)
    ap.add_argument("overrides", nargs="*", help="env param overrides, field=value")
    args = ap.parse_args(argv)
    base = LearnerEnv.make(args.env, parse_overrides(args.overrides))
    if not (np.asarray(base.env.default_params.archetypes) == int(Archetype.CHEATER)).any():
        ap.error(f"{args.env} has no CHEATER seat: nothing to tell apart")
    run = make_pricer(base, args.episodes)
    key = jax.random.PRNGKey(args.seed)
    res = {name: jax.device_get(run(jnp.bool_(name == "ORACLE"), key)) for name in POLICIES}
    print(f"{args.env} {' '.join(args.overrides)}: {args.episodes} episodes, same keys (seed {args.seed})")
    for name, r in res.items():
        d = describe(r)
        print(f"{name:<7} return {d['return']:7.2f} ± {d['return_ci95']:.2f}  trades {d['trades']:5.1f}  "
              f"trust {d['trust_in_learner']:.3f}  controlled gap {d['attribution_gap_controlled']:+.3f}")
    m, h = mean_ci(np.asarray(res["ORACLE"]["return"], np.float64) - np.asarray(res["BLIND"]["return"], np.float64))
    print(f"knowing the CHEATER is worth {m:+.3f} ± {h:.3f} return per episode (ORACLE − BLIND, paired)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
