"""`python -m train.crisis_headroom`: how much room EDF leaves, measured with hand-written variants of it.

Not learners: each rule below requests one ready task (HOLD unless said) and otherwise waits,
like `nexus_jax.envs.crisis.edf_actions`; they differ only in which task. Every rule plays the
holdout and fixed evaluations of `train.crisis_eval` on the same episode keys as EDF, and the
table gives mean ± 95% CI and the paired difference to EDF (mean ± 95% CI of the per-episode
difference). On the fixed evaluation (deterministic: the default nine tasks, no crises) it
also plays every static priority order (each seat ranks its three tasks: 6^3 = 216 orders),
which shows whether EDF is optimal there among such rules.
Writes `runs/<name>/crisis_headroom.json`.
"""
from __future__ import annotations

import itertools
import sys

import jax
import jax.numpy as jnp
import numpy as np

import nexus_jax
from nexus_jax.cli import ArgumentParser, entry_point, positive_int
from nexus_jax.envs.crisis import Base, Nego, encode, now_hours, used
from train.crisis_eval import FIXED_ENV, FIXED_SEED, HOLDOUT_ENV, edf, make_rollout, write_outputs
from train.stats import mean_ci

FIRST = encode(Base.REQUEST, Nego.HOLD, 0)  # REQUEST slot k with HOLD is FIRST + 2 k


def request_min(masks, score, nego: int = Nego.HOLD):
    """(E, A) flat actions: REQUEST the valid slot with the smallest `score` (E, A, K), else WAIT."""
    K = score.shape[-1]
    req = masks[..., FIRST:FIRST + 2 * K:2]
    pick = jnp.argmin(jnp.where(req, score, jnp.inf), -1)
    return jnp.where(req.any(-1), FIRST + 2 * pick + nego, encode(Base.WAIT, Nego.HOLD)).astype(jnp.int32)


def hours_left(state):
    return jnp.maximum(state.tasks.duration_min - state.progress_min, 0.0) / 60.0


def slack(state, params):
    now = jax.vmap(now_hours, (0, None))(state.step, params)[:, None, None]
    return state.tasks.deadline_h - now - hours_left(state)


def edf_fit(_, key, obs, state, masks, params):
    """EDF among the tasks that fit the free capacity now (others are denied this step), else EDF."""
    free = state.capacity - jax.vmap(used)(state)
    fits = jnp.all(state.tasks.demand() <= free[:, None, None, :] + 1e-6, -1)
    return request_min(masks, state.tasks.deadline_h + jnp.where(fits, 0.0, 1e3))


def least_slack(_, key, obs, state, masks, params):
    return request_min(masks, slack(state, params))


def edf_short_ties(_, key, obs, state, masks, params):
    """EDF, deadline ties to the shortest task."""
    return request_min(masks, state.tasks.deadline_h + 0.01 * hours_left(state))


def shortest_unless_tight(_, key, obs, state, masks, params):
    """Shortest task first (more early-completion bonus) unless some task has under 1 h of slack."""
    s = slack(state, params)
    return request_min(masks, jnp.where(s < 1.0, s - 100.0, hours_left(state)))


def edf_yield(_, key, obs, state, masks, params):
    """EDF that always YIELDs (steps back under contention)."""
    return request_min(masks, state.tasks.deadline_h, Nego.YIELD)


def static_order(prio, key, obs, state, masks, params):
    """Each seat requests its ready task of lowest rank in `prio` (E, A, K)."""
    return request_min(masks, prio)


RULES = {"edf": edf, "edf_fit_now": edf_fit, "least_slack": least_slack, "edf_short_ties": edf_short_ties,
         "shortest_unless_tight": shortest_unless_tight, "edf_always_yield": edf_yield}


def all_orders(num_agents: int, max_tasks: int, ranked: int = 3) -> tuple[np.ndarray, list]:
    """(orders, labels): every combination of per-seat permutations of slots 0..ranked-1 as (n, A, K)
    ranks (unranked slots last)."""
    perms = list(itertools.permutations(range(ranked)))
    combos = list(itertools.product(perms, repeat=num_agents))
    prio = np.full((len(combos), num_agents, max_tasks), 99.0, np.float32)
    for e, combo in enumerate(combos):
        for a, order in enumerate(combo):
            prio[e, a, list(order)] = np.arange(ranked)
    return prio, combos


@entry_point("python -m train.crisis_headroom")
def main(argv=None) -> int:
    ap = ArgumentParser(prog="python -m train.crisis_headroom", description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=positive_int, default=1000, help="episodes per rule and scenario")
    ap.add_argument("--holdout-seed", type=int, default=2024)
    ap.add_argument("--name", default="crisis-headroom", help="run folder: runs/<name>/")
    args = ap.parse_args(argv)
    env = nexus_jax.make("crisis-v0", info_mode="full", **HOLDOUT_ENV)
    fixed = nexus_jax.make("crisis-v0", **FIXED_ENV).default_params
    scen = {"holdout": (env.default_params, args.holdout_seed), "fixed": (fixed, FIXED_SEED)}
    lines = ["| Rule | Holdout reward | Holdout paired - EDF | Fixed reward | Fixed paired - EDF |", "|---|---|---|---|---|"]
    res = {s: {n: np.asarray(make_rollout(env, f, args.episodes)(None, p, jax.random.PRNGKey(seed))["total_reward"])
               for n, f in RULES.items()} for s, (p, seed) in scen.items()}
    report: dict = {"command": "python -m train.crisis_headroom " + " ".join(argv if argv is not None else sys.argv[1:]),
                    "rules": {}}
    for n in RULES:
        cells, report["rules"][n] = [], {}
        for s in scen:
            m, c = mean_ci(res[s][n])
            dm, dc = mean_ci(res[s][n] - res[s]["edf"])
            cells += [f"{m:.1f} ± {c:.1f}", f"{dm:+.2f} ± {dc:.2f}"]
            report["rules"][n][s] = {"mean": m, "ci95": c, "paired_mean": dm, "paired_ci95": dc}
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    prio, combos = all_orders(env.num_agents, int(env.default_params.max_tasks))
    r = np.asarray(make_rollout(env, static_order, len(combos))(jnp.asarray(prio), fixed,
                                                                  jax.random.PRNGKey(FIXED_SEED))["total_reward"])
    e = float(res["fixed"]["edf"][0])
    best = int(r.argmax())
    report["fixed_orders"] = {"count": len(combos), "best": float(r[best]), "best_order": combos[best],
                              "beat_edf": int((r > e + 1e-3).sum()), "worst": float(r.min()), "edf": e}
    lines += ["", f"Fixed evaluation, every static per-seat priority order ({len(combos)}): best {r[best]:.2f} "
                  f"(order per seat {combos[best]}), {report['fixed_orders']['beat_edf']} beat EDF's {e:.2f}, "
                  f"worst {r.min():.2f}."]
    text = "\n".join(lines)
    print(text)
    write_outputs(args.name, "crisis_headroom", report, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
