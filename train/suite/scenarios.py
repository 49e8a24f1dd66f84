"""The suite's scenarios and cells as data: held-out env variants, and who plays which seat.

A *cell* is one (N,) row of seat kinds and args: kind HEURISTIC (arg = archetype id) is the
jitted NPC policy of that archetype in the seat (the NPC `behaviour` override; the seat keeps
its own archetype's economy); POLICY (arg = index into a bank of trained params); RANDOM (a
uniformly random valid choice per factored head).
"""
from __future__ import annotations

import nexus_jax
import numpy as np
from nexus_jax.envs.nexus import Archetype

HEURISTIC, POLICY, RANDOM = 0, 1, 2

# name -> env id + param overrides (NexusParams fields) + what it tests. Training uses nexus-v0
# with default shocks; everything except "train-like" is held out (never used in training).
SCENARIOS: dict[str, dict] = {
    "train-like": {"env_id": "nexus-v0", "overrides": {},
                   "note": "the training distribution (BULLY, ALTRUIST, TIT_FOR_TAT; default shocks)"},
    "shock-storm": {"env_id": "nexus-v0", "overrides": {"shock_storm_factor": 4.0, "shock_duration": 2},
                    "note": "correlated shock storms: start probability x4 right after a shock, 2-step shocks"},
    "harsh-shocks": {"env_id": "nexus-v0",
                     "overrides": {"shock_severity": 0.4, "shock_max_fraction": 0.8, "p_grid_failure": 0.2},
                     "note": "harsher severity (40% base loss, cap 80%) and twice the grid-failure rate"},
    "reciprocators": {"env_id": "nexus-reciprocator-v0", "overrides": {},
                      "note": "unseen mix: RECIPROCATOR, RECIPROCATOR, TIT_FOR_TAT"},
    "cheater-mix": {"env_id": "nexus-cheater-v0", "overrides": {},
                    "note": "unseen mix: CHEATER, RECIPROCATOR, ALTRUIST"},
    "cheater-storm": {"env_id": "nexus-cheater-v0",
                      "overrides": {"shock_storm_factor": 3.0, "shock_severity": 0.35, "p_solar_flare": 0.1},
                      "note": "CHEATER, RECIPROCATOR, ALTRUIST under storms: both malicious and force-majeure "
                              "breaks happen (the attribution study)"},
    "8-seats": {"env_id": "nexus-8-v0", "overrides": {},
                "note": "8 seats (default mix repeated); a flat-obs policy plays only if trained at N=8 (obs size), "
                        "an entity-network policy at any N"},
    "16-seats": {"env_id": "nexus-16-v0", "overrides": {},
                 "note": "16 seats; a flat-obs policy plays only if trained at N=16 (obs size), an entity-network policy "
                         "at any N"},
}
ATTRIBUTION_SCENARIO = "cheater-storm"


def scenario_params(name: str, scenarios: dict | None = None):
    """-> (NexusParams, learner seats) of a scenario."""
    sc = (scenarios or SCENARIOS)[name]
    env = nexus_jax.make(sc["env_id"], **sc["overrides"])
    return env.default_params, env.learner_seats


def seat0_cells(params, candidates: list[tuple[str, int, int]]) -> list:
    """One cell per candidate (name, kind, arg) in seat 0; every other seat its scenario's NPC behaviour."""
    base = getattr(params, "behaviours", None)
    arch = [int(a) for a in np.asarray(params.archetypes if base is None else base)]
    return [([kind] + [HEURISTIC] * (len(arch) - 1), [arg] + arch[1:]) for _, kind, arg in candidates]


def versus_cells(params, rows: list[tuple[str, int, int]], cols: list[tuple[str, int, int]]) -> list:
    """Cross-play cells: row policy in seat 0, the column policy in every other seat (seats keep their economy)."""
    n = params.num_agents
    return [([rk] + [ck] * (n - 1), [ra] + [ca] * (n - 1)) for _, rk, ra in rows for _, ck, ca in cols]


HEURISTIC_NAMES = ("bully", "altruist", "tit_for_tat", "reciprocator", "cheater")  # archetype ids 1..5
CROSSPLAY_HEURISTICS = ("altruist", "tit_for_tat", "reciprocator", "cheater")


def heuristic_candidates(names=HEURISTIC_NAMES) -> list[tuple[str, int, int]]:
    return [(nm, HEURISTIC, int(Archetype[nm.upper()])) for nm in names]
