"""Scripted comparison of candidate rule sets: every heuristic and the vault hedge in seat 0, no training.

`python -m experiments.research.scenario_scan [--episodes 256] [--only NAME,..]`. Before training in a new rule set,
check cheaply whether it can answer the research question (docs/research.md): a rule set where the
vault hedge (RECIPROCATOR + `npc.hedge`, the autarky baseline) is not the best scripted policy and
the cooperative heuristics beat hoarding, with enough force-majeure breaks to measure attribution.
Per candidate and policy: seat 0's return (mean ± 95% CI), trades per episode, trade completion,
vault use, trust in seat 0, force-majeure / malicious window pair-steps, the raw attribution gap and
the capacity-controlled one (experiments.research.questions.describe). Every candidate has N = 4 seats, so the rules are traced and one
compiled evaluator (experiments.research.questions.make_scripted) serves them all, on the same episode keys.
"""
from __future__ import annotations

import jax

from nexus_jax.cli import ArgumentParser, entry_point, positive_int
from nexus_jax.envs.nexus import KEPT_PROMISES
from train.learner_env import LearnerEnv
from experiments.research.questions import SCRIPTED, describe, make_scripted, scripted_policy

_MILD = {"p_grid_failure": 0.05, "shock_severity": 0.05}
_FEE = (1.0, 0.0, 0.0, 0.0, 0.0, 10.0, 10.0, 0.0)  # VAULT/UNVAULT pay 10x the wait cost
_POOR = ((20.0, 20.0), (90.0, 10.0), (10.0, 90.0), (40.0, 60.0), (50.0, 50.0), (60.0, 40.0))  # learner seat 20/20
_PROGRESSIVE = {"p_grid_failure": 0.05, "trade_collateral_bonus": 2.0, "shock_max_fraction": 0.9}
_COSTLY_CHEATER = {"obs_ledger_events": 32, "npc_signal_rate": (0.1, 0.0, 0.5, 0.1, 0.5, 0.5),
                   "npc_accept_min_ratio": (0.8, 1.0, 0.8, 0.8, 0.8, 2.0), "npc_offer_ratio": (1.0, 0.25, 1.0, 1.0, 1.0, 0.5)}
_HIDDEN_LOWBALL = {"behaviour_shuffle": (0, 1, 1, 1), "npc_accept_min_ratio": (0.8, 1.0, 0.8, 0.8, 0.8, 2.0),
                   "npc_offer_ratio": (1.0, 0.25, 1.0, 1.0, 1.0, 0.5), "trade_collateral_bonus": 8.0}
# name -> (env id, param overrides): the candidates of docs/research.md's search, in the order tried.
CANDIDATES = {
    "nexus-v0": ("nexus-v0", {}),
    "nexus-cheater-v0": ("nexus-cheater-v0", {}),
    "mild": ("nexus-cheater-v0", _MILD),
    "mild+fee": ("nexus-cheater-v0", {**_MILD, "wait_cost_types": _FEE}),
    "mild+bonus": ("nexus-cheater-v0", {**_MILD, "trade_collateral_bonus": 2.0}),
    "fee+bonus": ("nexus-cheater-v0", {"wait_cost_types": _FEE, "trade_collateral_bonus": 2.0}),
    "poor+bonus": ("nexus-cheater-v0", {"endowment": _POOR, "trade_collateral_bonus": 2.0}),
    "poor+bonus+severe": ("nexus-cheater-v0", {"endowment": _POOR, "trade_collateral_bonus": 2.0, "shock_severity": 0.3,
                                               "shock_max_fraction": 0.9, "shock_progressive": 1.0}),
    "progressive-0.1x8": ("nexus-cheater-v0", {**_PROGRESSIVE, "shock_severity": 0.1, "shock_progressive": 8.0}),
    "progressive-0.05x15": ("nexus-research-v0", {"reward_mode": 0, "trade_collateral_bonus": 2.0}),  # 1st trained
    "progressive-0.05x15-own": ("nexus-research-v0", {"trade_collateral_bonus": 2.0}),
    "nexus-research-v0": ("nexus-research-v0", {}),  # progressive 0.05 x 15, own reward, bonus 4.0 (registered)
    "mild+bonus-own": ("nexus-cheater-v0", {**_MILD, "trade_collateral_bonus": 2.0, "reward_mode": 1}),
    # result 3: the break labels visible for the whole attribution window (32 ledger events), and a
    # CHEATER that is costly to trade with (accepts only 2:1 offers, proposes 1:2) while the reliable partners
    # promise as often as it does
    "research+ledger32": ("nexus-research-v0", {"obs_ledger_events": 32}),
    "research+costly-cheater": ("nexus-research-v0", _COSTLY_CHEATER),
    # result 3: NPC promises that stay open across shocks (npc_honour_delay)
    "research+kept-promises": ("nexus-research-v0", {**KEPT_PROMISES, "shock_max_fraction": 0.5}),
    "nexus-research-promises-v0": ("nexus-research-promises-v0", {}),  # the same with uniform shocks (registered)
    # all four results: hidden types (behaviours dealt among seats 1-3 per episode), a costly
    # CHEATER, and a larger trade bonus, one at a time and together (= nexus-research-hidden-v0)
    "promises+bonus8": ("nexus-research-promises-v0", {"trade_collateral_bonus": 8.0}),
    "promises+hidden": ("nexus-research-promises-v0", {"behaviour_shuffle": (0, 1, 1, 1)}),
    "promises+hidden+costly": ("nexus-research-promises-v0", {"behaviour_shuffle": (0, 1, 1, 1),
                                                              "npc_accept_min_ratio": (0.8, 1.0, 0.8, 0.8, 0.8, 2.0),
                                                              "npc_offer_ratio": (1.0, 0.25, 1.0, 1.0, 1.0, 0.5)}),
    # the three together, with the CHEATER also proposing 1:2 (as in nexus-research-attribution-v0): the vault
    # hedge is then the best scripted policy; a larger bonus or milder shocks were the other ways out
    "hidden+costly+lowball": ("nexus-research-promises-v0", _HIDDEN_LOWBALL),
    "hidden+lowball+bonus12": ("nexus-research-promises-v0", {**_HIDDEN_LOWBALL, "trade_collateral_bonus": 12.0}),
    "hidden+lowball+severity0.25": ("nexus-research-promises-v0", {**_HIDDEN_LOWBALL, "shock_severity": 0.25}),
    # the first registered form (runs/research-hidden-ratio2-ent01): the CHEATER accepts only 2:1, proposes fairly
    "hidden+ratio2": ("nexus-research-promises-v0", {"behaviour_shuffle": (0, 1, 1, 1), "trade_collateral_bonus": 8.0,
                                                     "npc_accept_min_ratio": (0.8, 1.0, 0.8, 0.8, 0.8, 2.0)}),
    "nexus-research-hidden-v0": ("nexus-research-hidden-v0", {}),  # the CHEATER accepts nothing (registered)
}


@entry_point("python -m experiments.research.scenario_scan")
def main(argv=None):
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=positive_int, default=256)
    ap.add_argument("--only", default=None, help="comma-separated candidate names (default: all)")
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args(argv)
    names = args.only.split(",") if args.only else list(CANDIDATES)
    envs = {n: LearnerEnv.make(CANDIDATES[n][0], CANDIDATES[n][1], "factored") for n in names}
    run = make_scripted(envs[names[0]], args.episodes)
    key = jax.random.PRNGKey(args.seed)
    print(f"{args.episodes} episodes per policy, seat 0, same keys; return mean ± 95% CI")
    for name in names:
        print(f"== {name}: {CANDIDATES[name]}")
        rows = {}
        for pol in SCRIPTED:
            rows[pol] = s = describe(scripted_policy(run, envs[name].env.default_params, pol, key))
            g, c = s["attribution_gap_ci95"], s["attribution_gap_controlled_ci95"]
            print(f"  {pol:<13} {s['return']:8.2f} ± {s['return_ci95']:.2f}  trades {s['trades']:5.1f}  completion "
                  f"{s['trade_completion']:.2f}  vault {s['vault_use']:5.1f}  trust {s['trust_in_learner']:.3f}  FM/mal "
                  f"windows {s['attribution_windows'][0]:.0f}/{s['attribution_windows'][1]:.0f}  gap "
                  f"{s['attribution_gap']:+.3f} [{g[0]:+.3f}, {g[1]:+.3f}]  controlled "
                  f"{s['attribution_gap_controlled']:+.3f} [{c[0]:+.3f}, {c[1]:+.3f}]", flush=True)
        best = max(rows, key=lambda p: rows[p]["return"])
        print(f"  best: {best}; hedge - RECIPROCATOR {rows['HEDGE']['return'] - rows['RECIPROCATOR']['return']:+.2f}")


if __name__ == "__main__":
    main()
