"""`python -m experiments.crisis.headroom`: how much room EDF leaves, measured with hand-written variants of it.

Not learners: each rule (`nexus_jax.envs.crisis.RULES`) requests one ready task (HOLD unless said) and
otherwise waits, like `nexus_jax.envs.crisis.edf_actions`; they differ only in which task. Every rule plays the
holdout and fixed evaluations of `experiments.crisis.evaluate` on the same episode keys as EDF, and the
table gives mean ± 95% CI and the paired difference to EDF (mean ± 95% CI of the per-episode
difference). On the fixed evaluation (deterministic: the default nine tasks, no crises) it
also plays every static priority order (each seat ranks its three tasks: 6^3 = 216 orders),
which shows whether EDF is optimal there among such rules.
It then says where EDF loses reward (`where_edf_loses`): on the holdout, EDF's late and undone tasks
and every rule's paired difference by the crises an episode has, and which tasks EDF misses; on the
fixed evaluation, each task's finish time under EDF and under the best static order.
`--learners DIR` (a saved `experiments.crisis.seeds` folder) adds each run's argmax policy as a row, so a
learner is compared with the rules on the same keys (paired, also to `edf_fit_now` and `edf_chain`).
Writes `runs/<name>/crisis_headroom.json`.
"""
from __future__ import annotations

import itertools
import sys

import jax
import jax.numpy as jnp
import numpy as np

import nexus_jax
from nexus_jax.cli import ArgumentParser, entry_point, folder_name, positive_int
from nexus_jax.envs import crisis
from nexus_jax.envs.crisis import Crisis
from experiments.crisis.evaluate import (FIXED_ENV, FIXED_SEED, HOLDOUT_ENV, make_rollout, ppo_policy, rule_policy,
                                         write_outputs)
from experiments.crisis.seeds import load_runs
from train.stats import mean_ci

RULES = {name: rule_policy(rule) for name, rule in crisis.RULES.items()}  # every rule of the env, EDF first


def static_order(prio, key, obs, state, masks, params):
    """Each seat requests its ready task of lowest rank in `prio` (E, A, K)."""
    return jax.vmap(crisis.static_order)(state, masks, prio)


def task_outcomes(state) -> dict:
    """Per final state (batched, E): late (done after its deadline) and undone task counts over released tasks,
    the failed (late or undone) ones that are urgent / need a GPU and per seat, the crisis kinds the episode
    has (enabled), and per-task finish hours and deadlines (E, A, K) for the fixed table."""
    t = state.tasks
    counted = t.exists & state.released
    late = counted & state.done & (state.completed_h > t.deadline_h + 1e-6)
    undone = counted & ~state.done
    bad = late | undone
    kinds = {f"has_{k.name.lower()}": jnp.any(state.schedule.enabled & (state.schedule.kind == k), -1)
             for k in (Crisis.GPU_OUTAGE, Crisis.URGENT_TASK, Crisis.RESOURCE_PRESSURE)}
    n = lambda m: jnp.sum(m, (-2, -1))  # noqa: E731
    return {"late": n(late), "undone": n(undone), "bad_urgent": n(bad & t.urgent), "bad_gpu": n(bad & (t.gpu > 0)),
            "bad_seat": jnp.sum(bad, -1), "completed_h": state.completed_h, "deadline_h": t.deadline_h, **kinds}


def where_edf_loses(hold: dict, fixed_edf: dict, fixed_best: dict) -> tuple[list, dict]:
    """Markdown lines and a summary: holdout episodes grouped by their crises (EDF's reward, late and undone
    tasks per episode, every rule's paired difference to EDF and the per-episode best rule's), what EDF's
    failed (late or undone) tasks are, and the fixed table's finish times under EDF and the best order."""
    e = hold["edf"]
    groups = {"all": np.ones_like(e["compound"], bool), "compound crisis": e["compound"],
              "no compound crisis": ~e["compound"], "has GPU outage": e["has_gpu_outage"],
              "has urgent task": e["has_urgent_task"], "has resource pressure": e["has_resource_pressure"],
              "urgent + GPU outage": e["has_urgent_task"] & e["has_gpu_outage"],
              "EDF all on time": (e["late"] + e["undone"]) == 0, "EDF late or undone": (e["late"] + e["undone"]) > 0}
    rules = [r for r in hold if r != "edf"]
    diff = {r: hold[r]["total_reward"] - e["total_reward"] for r in rules}
    best = np.max(np.stack([np.zeros_like(e["total_reward"])] + list(diff.values())), 0)
    lines = ["| Holdout episodes | n | EDF reward | EDF late / ep | EDF undone / ep | "
             + " | ".join(f"{r} - EDF" for r in rules) + " | best rule per episode - EDF |",
             "|---" * (6 + len(rules)) + "|"]
    summary: dict = {"groups": {}}
    for g, m in groups.items():
        if not m.any():
            continue
        cells = [f"{mean_ci(diff[r][m])[0]:+.2f} ± {mean_ci(diff[r][m])[1]:.2f}" for r in rules]
        bm, bc = mean_ci(best[m])
        lines.append(f"| {g} | {int(m.sum())} | {mean_ci(e['total_reward'][m])[0]:.1f} | {e['late'][m].mean():.2f} | "
                     f"{e['undone'][m].mean():.2f} | " + " | ".join(cells) + f" | {bm:+.2f} ± {bc:.2f} |")
        summary["groups"][g] = {"n": int(m.sum()), "edf_reward": float(e["total_reward"][m].mean()),
                                "late": float(e["late"][m].mean()), "undone": float(e["undone"][m].mean()),
                                "paired": {r: list(mean_ci(diff[r][m])) for r in rules}, "best_rule": [bm, bc]}
    nbad = int((e["late"] + e["undone"]).sum())
    seats = e["bad_seat"].sum(0)
    summary["failed_tasks"] = {"count": nbad, "late": int(e["late"].sum()), "undone": int(e["undone"].sum()),
                               "urgent": int(e["bad_urgent"].sum()), "gpu": int(e["bad_gpu"].sum()),
                               "per_seat": seats.tolist(), "episodes": len(e["late"])}
    changed = {r: int((np.abs(diff[r]) > 1e-3).sum()) for r in rules}
    summary["episodes_changed"] = changed
    lines += ["", f"EDF's failed tasks on the holdout ({len(e['late'])} episodes): {nbad} ({int(e['late'].sum())} late, "
                  f"{int(e['undone'].sum())} undone); {int(e['bad_urgent'].sum())} of them urgent tasks, "
                  f"{int(e['bad_gpu'].sum())} need a GPU; per seat {seats.tolist()}. Episodes whose reward a rule "
                  "changes: " + ", ".join(f"{r} {c}" for r, c in changed.items()) + "."]
    fe, fb = (np.asarray(x["completed_h"][0]) for x in (fixed_edf, fixed_best))
    dl = np.asarray(fixed_edf["deadline_h"][0])
    rows = [f"| {a} | {k} | {dl[a, k]:.2f} | {fe[a, k]:.2f} | {fb[a, k]:.2f} |"
            for a in range(dl.shape[0]) for k in range(dl.shape[1]) if dl[a, k] > 0 and fe[a, k] > 0]
    lines += ["", "Fixed evaluation, finish hour of each task (EDF vs the best static order):", "",
              "| Seat | Slot | Deadline h | EDF finish h | Best order finish h |", "|---|---|---|---|---|", *rows]
    summary["fixed_finish"] = {"deadline_h": dl.tolist(), "edf": fe.tolist(), "best_order": fb.tolist()}
    return lines, summary


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


@entry_point("python -m experiments.crisis.headroom")
def main(argv=None) -> int:
    ap = ArgumentParser(prog="python -m experiments.crisis.headroom", description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=positive_int, default=1000, help="episodes per rule and scenario")
    ap.add_argument("--holdout-seed", type=int, default=2024)
    ap.add_argument("--name", type=folder_name, default="crisis-headroom", help="run folder: runs/<name>/")
    ap.add_argument("--learners", default=None, help="a saved experiments.crisis.seeds folder: its runs' argmax policies as rows")
    args = ap.parse_args(argv)
    # the learners' observation options (the rules read the state, so they play the same either way)
    policy, params, runs, obs_env = load_runs(args.learners) if args.learners else (None, None, 0, {})
    env = nexus_jax.make("crisis-v0", info_mode="full", **HOLDOUT_ENV, **obs_env)
    fixed = nexus_jax.make("crisis-v0", **FIXED_ENV, **obs_env).default_params
    scen = {"holdout": (env.default_params, args.holdout_seed), "fixed": (fixed, FIXED_SEED)}
    lines = ["| Rule | Holdout reward | Holdout paired - EDF | Fixed reward | Fixed paired - EDF |", "|---|---|---|---|---|"]
    agents = {n: (f, None) for n, f in RULES.items()}
    if args.learners:
        agents.update({f"learner_run{i}": (ppo_policy(policy, greedy=True), jax.tree.map(lambda x: x[i], params))
                       for i in range(runs)})
    full = {s: {n: jax.device_get(make_rollout(env, f, args.episodes, task_outcomes)(pa, p, jax.random.PRNGKey(seed)))
                for n, (f, pa) in agents.items()} for s, (p, seed) in scen.items()}
    res = {s: {n: np.asarray(r["total_reward"]) for n, r in rs.items()} for s, rs in full.items()}
    report: dict = {"command": "python -m experiments.crisis.headroom " + " ".join(argv if argv is not None else sys.argv[1:]),
                    "rules": {}}
    for n in agents:
        cells, report["rules"][n] = [], {}
        for s in scen:
            m, c = mean_ci(res[s][n])
            dm, dc = mean_ci(res[s][n] - res[s]["edf"])
            cells += [f"{m:.1f} ± {c:.1f}", f"{dm:+.2f} ± {dc:.2f}"]
            report["rules"][n][s] = {"mean": m, "ci95": c, "paired_mean": dm, "paired_ci95": dc}
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    learners = [a for a in agents if a.startswith("learner")]
    lines += [""] if learners else []
    for n, rule in itertools.product(learners, ("edf_fit_now", "edf_chain")):  # which rule the learner plays
        dm, dc = mean_ci(res["holdout"][n] - res["holdout"][rule])
        same = int((np.abs(res["holdout"][n] - res["holdout"][rule]) < 1e-3).sum())
        lines.append(f"{n} - {rule} on the holdout: {dm:+.2f} ± {dc:.2f} paired; same reward in {same} of "
                     f"{args.episodes} episodes.")
        report["rules"][n][f"holdout_minus_{rule}"] = {"paired_mean": dm, "paired_ci95": dc, "same": same}
    prio, combos = all_orders(env.num_agents, int(env.default_params.max_tasks))
    orders = jax.device_get(make_rollout(env, static_order, len(combos), task_outcomes)(
        jnp.asarray(prio), fixed, jax.random.PRNGKey(FIXED_SEED)))
    r = np.asarray(orders["total_reward"])
    e = float(res["fixed"]["edf"][0])
    best = int(r.argmax())
    report["fixed_orders"] = {"count": len(combos), "best": float(r[best]), "best_order": combos[best],
                              "beat_edf": int((r > e + 1e-3).sum()), "worst": float(r.min()), "edf": e}
    lines += ["", f"Fixed evaluation, every static per-seat priority order ({len(combos)}): best {r[best]:.2f} "
                  f"(order per seat {combos[best]}), {report['fixed_orders']['beat_edf']} beat EDF's {e:.2f}, "
                  f"worst {r.min():.2f}."]
    where, report["where_edf_loses"] = where_edf_loses(
        full["holdout"], full["fixed"]["edf"], {k: v[best:best + 1] for k, v in orders.items()})
    lines += ["", "## Where EDF loses reward", "", *where]
    text = "\n".join(lines)
    print(text)
    write_outputs(args.name, "crisis_headroom", report, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
