"""`python -m experiments.crisis.chain_states`: where `edf_chain` departs from `edf_fit_now`, and why PPO does not learn it.

A PPO learner with the EDF prior and the dependency features stays at `edf_fit_now` (EDF that
skips tasks that do not fit). `edf_chain` differs from that rule only at "chain states": seat-steps where,
no task being tight, it requests the task whose chain unlocks the most tasks of idle seats instead. For each
scenario (the training distribution, the holdout and the fixed evaluation of `experiments.crisis.evaluate`, and any
`--train-env` variant) this measures, on `edf_fit_now`'s own episodes:

- how often chain states occur (episodes with one, per episode);
- what taking `edf_chain`'s action at the FIRST chain state of an episode, and `edf_fit_now` everywhere else,
  changes: the one-step deviation's advantage under the base rule, in total reward and split into the
  deviating seat's own return and the other seats' (what an individual-reward learner is paid for it);
- the fixed evaluation rewired (`REWIRED`): the same tasks, but batch 2's chain is the unblocked one;
- with `--learners DIR` (a `experiments.crisis.seeds` folder), each run's probability of `edf_chain`'s and of
  `edf_fit_now`'s action at those chain states, its policy entropy there, how often its argmax is `edf_chain`'s
  action, and its argmax policy's episode reward minus EDF's (paired, on its own episodes).

Writes `runs/<name>/crisis_chain_states.json` and `.md`.
"""
from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np

import nexus_jax
from nexus_jax import rollout
from nexus_jax.cli import ArgumentParser, entry_point, folder_name, positive_int
from nexus_jax.envs.crisis import edf_chain, edf_fit
from train.config import parse_overrides
from experiments.crisis.evaluate import (FIXED_ENV, FIXED_SEED, HOLDOUT_ENV, TRAIN_ENV, edf, make_rollout, ppo_policy,
                               write_outputs)
from experiments.crisis.seeds import load_runs, load_snapshots
from train.stats import mean_ci

TRAIN_SEED = 7  # training-distribution episode keys (as the rule scan of docs/crisis.md)
# The default set rewired so that batch 2 (not 3) is the loader task whose chain nothing else blocks:
# train_baseline_model needs clean 1 and 3, train_advanced_model clean 2 (flat slots a * 4 + k).
REWIRED = {8: (4, 6), 9: (5,)}


def rewired_fixed(**env) -> object:
    """The fixed evaluation's params with `REWIRED` dependencies: `edf_chain` starts with batch 2 there, so a
    policy that copied "batch 3 first" from the default set and one that reads the features differ."""
    base = nexus_jax.make("crisis-v0", **FIXED_ENV, **env).default_params
    deps = np.array(base.task_deps)
    for t, needs in REWIRED.items():
        deps[t] = False
        deps[t, list(needs)] = True
    return nexus_jax.make("crisis-v0", **FIXED_ENV, **env, task_deps=deps).default_params


def chain_actions(obs, state, masks, params):
    """(fit, chain) flat actions (E, A) of `edf_fit_now` and `edf_chain` on a batch of states."""
    return jax.vmap(lambda s, m: (edf_fit(s, m, params), edf_chain(s, m, params)))(state, masks)


def play(env, params, key, episodes: int, deviate_at=None, policy=None, policy_params=None):
    """`trace_play` on the host: the same dict as numpy arrays."""
    return jax.device_get(trace_play(env, params, key, episodes, deviate_at, policy, policy_params))


def trace_play(env, params, key, episodes: int, deviate_at=None, policy=None, policy_params=None, steps=None):
    """`edf_fit_now`'s episodes (or, with `deviate_at` (E,) steps, `edf_chain`'s action at that step only) ->
    dict of per-seat returns (E, A), the first chain step per episode (E,, T if none), chain seat-steps per
    episode (E,), the seats that depart at the first chain state (E, A); with `policy`: the sums over chain
    states of the policy's probability of `edf_chain`'s and `edf_fit_now`'s action, of its entropy, and their
    count (policy evaluated on the base rule's states, not its own). `steps`: the episode length (default
    `env.default_params.max_steps`; give it under jit, where the default params are traced)."""
    T = int(env.default_params.max_steps) if steps is None else steps

    def act(k, obs, state, masks):
        fit, chain = chain_actions(obs, state, masks, params)
        a = fit if deviate_at is None else jnp.where((state.step == deviate_at)[:, None], chain, fit)
        return a, (fit, chain)

    def acc(c, s):
        fit, chain = s.extra
        diff = fit != chain  # (E, A) chain state per seat
        t = s.state.step
        first = jnp.where((c["first"] == T) & diff.any(-1), t, c["first"])
        seats = jnp.where(((c["first"] == T) & diff.any(-1))[:, None], diff, c["seats"])
        out = {"ret": c["ret"] + s.reward, "first": first, "seats": seats, "count": c["count"] + diff.sum(-1)}
        if policy is not None:
            n = s.masks.shape[-1]
            logp = jax.vmap(lambda a: policy.evaluate(policy_params, s.obs, s.masks, jnp.full(fit.shape, a, jnp.int32))[0])(
                jnp.arange(n))  # (n, E, A)
            logp = jnp.where(jnp.moveaxis(s.masks, -1, 0), logp, -jnp.inf)
            p = jnp.exp(logp)
            pick = lambda a: jnp.take_along_axis(p, a[None], 0)[0]  # noqa: E731
            ent = -jnp.sum(jnp.where(p > 0, p * logp, 0.0), 0)
            w = diff.astype(jnp.float32)
            out.update(p_chain=c["p_chain"] + (w * pick(chain)).sum(), p_fit=c["p_fit"] + (w * pick(fit)).sum(),
                       ent=c["ent"] + (w * ent).sum(), argmax_chain=c["argmax_chain"]
                       + (w * (jnp.argmax(logp, 0) == chain)).sum())
        return out, None

    E, A = episodes, env.num_agents
    acc0 = {"ret": jnp.zeros((E, A)), "first": jnp.full((E,), T, jnp.int32), "seats": jnp.zeros((E, A), bool),
            "count": jnp.zeros((E,), jnp.int32)}
    if policy is not None:
        acc0.update({k: jnp.zeros(()) for k in ("p_chain", "p_fit", "ent", "argmax_chain")})
    (_, _, out), _ = rollout.run(rollout.EpisodeEnv(env, params), key, E, T, act, acc, acc0, params)
    return out


def scenario(env, params, seed: int, episodes: int, learners) -> dict:
    """The measurements of the module docstring on one scenario -> JSON-ready summary."""
    key = jax.random.PRNGKey(seed)
    base = play(env, params, key, episodes)
    T = int(env.default_params.max_steps)
    has = base["first"] < T
    dev = play(env, params, key, episodes, deviate_at=jnp.asarray(base["first"]))
    d = dev["ret"] - base["ret"]  # (E, A)
    seats = base["seats"]
    own, other = (d * seats).sum(-1), (d * ~seats).sum(-1)
    ci = lambda x: [float(v) for v in mean_ci(x)] if len(x) else [float("nan"), float("nan")]  # noqa: E731
    out = {"episodes": episodes, "episodes_with_chain_state": int(has.sum()),
           "chain_seat_steps_per_episode": float(base["count"].mean()),
           "first_chain_step_mean": float(base["first"][has].mean()) if has.any() else None,
           "deviation_total": ci(d.sum(-1)[has]), "deviation_own": ci(own[has]), "deviation_others": ci(other[has]),
           "deviation_total_positive": int((d.sum(-1)[has] > 1e-3).sum()),
           "deviation_total_negative": int((d.sum(-1)[has] < -1e-3).sum()),
           "deviation_own_negative": int((own[has] < -1e-3).sum())}
    if learners is not None:
        policy, stacked, runs = learners
        out["learners"] = []
        edf_reward = make_rollout(env, edf, episodes)(None, params, key)["total_reward"]
        greedy = make_rollout(env, ppo_policy(policy, greedy=True), episodes)
        for i in range(runs):
            pi = jax.tree.map(lambda x: x[i], stacked)
            r = play(env, params, key, episodes, policy=policy, policy_params=pi)
            n = float(base["count"].sum())  # no chain state: nothing to average (None)
            out["learners"].append({k: float(r[v]) / n if n else None for k, v in (
                ("p_chain", "p_chain"), ("p_fit", "p_fit"), ("entropy", "ent"), ("argmax_is_chain", "argmax_chain"))})
            out["learners"][-1]["argmax_minus_edf"] = ci(np.asarray(greedy(pi, params, key)["total_reward"] - edf_reward))
    return out


CURVE_KEYS = (("p_chain", "p_chain"), ("p_fit", "p_fit"), ("entropy", "ent"), ("argmax_is_chain", "argmax_chain"))


def curve(env, params, seed: int, episodes: int, policy, snaps, updates) -> dict:
    """The learners' measurements at the chain states of one scenario, for every saved snapshot (`crisis_seeds
    --snapshot-every`): {"updates", "chain_states" (seat-steps counted), "runs": [[{p_chain, p_fit, entropy,
    argmax_is_chain} per snapshot] per run]} (None where the scenario has no chain state). The states are the
    base rule's, as in `scenario`, so every snapshot is read on the same states."""
    key = jax.random.PRNGKey(seed)
    n = float(play(env, params, key, episodes)["count"].sum())
    T = int(env.default_params.max_steps)
    one = jax.jit(lambda pp: trace_play(env, params, key, episodes, policy=policy, policy_params=pp, steps=T))
    runs = []
    for i in range(jax.tree.leaves(snaps)[0].shape[0]):
        rows = []
        for j in range(len(updates)):
            r = jax.device_get(one(jax.tree.map(lambda x: x[i, j], snaps)))
            rows.append({k: float(r[v]) / n if n else None for k, v in CURVE_KEYS})
        runs.append(rows)
    return {"updates": list(updates), "chain_states": n, "runs": runs}


def curve_lines(curves: dict) -> list:
    """Markdown: one row per snapshot, P(edf_chain's action) (argmax share) per run, per scenario."""
    lines = []
    for s, c in curves.items():
        runs = range(len(c["runs"]))
        lines += ["", f"Chain states over training, {s} ({c['chain_states']:.0f} seat-steps): P(edf_chain's action) "
                  "(share of chain states where the argmax is it)",
                  "| Update | " + " | ".join(f"run {i}" for i in runs) + " |", "|---|" + "---|" * len(c["runs"])]
        for j, u in enumerate(c["updates"]):
            cells = ["n/a" if c["runs"][i][j]["p_chain"] is None else
                     f"{c['runs'][i][j]['p_chain']:.3f} ({c['runs'][i][j]['argmax_is_chain']:.2f})" for i in runs]
            lines.append(f"| {u} | " + " | ".join(cells) + " |")
    return lines


@entry_point("python -m experiments.crisis.chain_states")
def main(argv=None) -> int:
    ap = ArgumentParser(prog="python -m experiments.crisis.chain_states", description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=positive_int, default=1000)
    ap.add_argument("--holdout-seed", type=int, default=2024)
    ap.add_argument("--name", type=folder_name, default="crisis-chain-states", help="run folder: runs/<name>/")
    ap.add_argument("--learners", default=None, help="a saved experiments.crisis.seeds folder (needs dependency_features)")
    ap.add_argument("--curve", default=None, metavar="DIR",
                    help="a `experiments.crisis.seeds --snapshot-every` folder: its runs' probabilities at the chain states of "
                         "the training scenarios (the training distribution and every --train-env) at each snapshot")
    ap.add_argument("--curve-episodes", type=positive_int, default=200, help="episodes per scenario for --curve")
    ap.add_argument("--train-env", nargs="+", action="append", default=[], metavar="KEY=VALUE",
                    help="also measure the training distribution with these env overrides (a candidate training set); "
                         "repeat for several")
    args = ap.parse_args(argv)
    learners = None
    if args.learners:
        policy, stacked, runs, obs_env = load_runs(args.learners)
        if not obs_env.get("dependency_features"):
            ap.error("--learners: the runs must be trained with env.dependency_features=true (the rules read them)")
        learners = (policy, stacked, runs)
    dep = {"dependency_features": True}
    env = nexus_jax.make("crisis-v0", info_mode="full", **HOLDOUT_ENV, **dep)
    scen = {"training distribution": (nexus_jax.make("crisis-v0", **TRAIN_ENV, **dep).default_params, TRAIN_SEED),
            "holdout": (env.default_params, args.holdout_seed),
            "fixed": (nexus_jax.make("crisis-v0", **FIXED_ENV, **dep).default_params, FIXED_SEED),
            "fixed, rewired (batch 2 feeds the advanced model)": (rewired_fixed(**dep), FIXED_SEED)}
    for pairs in args.train_env:
        variant = {**TRAIN_ENV, **parse_overrides(pairs), **dep}
        scen["training, " + " ".join(pairs)] = (nexus_jax.make("crisis-v0", **variant).default_params, TRAIN_SEED)
    report = {"command": "python -m experiments.crisis.chain_states " + " ".join(argv if argv is not None else sys.argv[1:]),
              "scenarios": {s: scenario(env, p, seed, args.episodes, learners) for s, (p, seed) in scen.items()}}
    if args.curve:
        policy, snaps, updates, obs_env = load_snapshots(args.curve)
        if not obs_env.get("dependency_features"):
            ap.error("--curve: the runs must be trained with env.dependency_features=true (the rules read them)")
        report["curve"] = {s: curve(env, p, seed, args.curve_episodes, policy, snaps, updates)
                           for s, (p, seed) in scen.items() if s.startswith("training")}
    f = lambda x: f"{x[0]:+.2f} ± {x[1]:.2f}"  # noqa: E731
    lines = ["| Scenario | Episodes with a chain state | Chain seat-steps / ep | First chain step | Deviation at the "
             "first: total | own seat | other seats | episodes +/- | own < 0 |", "|---|---|---|---|---|---|---|---|---|"]
    for s, r in report["scenarios"].items():
        first = "" if r["first_chain_step_mean"] is None else f"{r['first_chain_step_mean']:.1f}"
        lines.append(f"| {s} | {r['episodes_with_chain_state']} of {r['episodes']} | "
                     f"{r['chain_seat_steps_per_episode']:.2f} | {first} | {f(r['deviation_total'])} | "
                     f"{f(r['deviation_own'])} | {f(r['deviation_others'])} | {r['deviation_total_positive']} / "
                     f"{r['deviation_total_negative']} | {r['deviation_own_negative']} |")
    if learners is not None:
        lines += ["", "| Scenario | Run | P(edf_chain's action) | P(edf_fit_now's action) | Entropy | argmax = "
                  "edf_chain | argmax episode reward - EDF (paired) |", "|---|---|---|---|---|---|---|"]
        for s, r in report["scenarios"].items():
            for i, x in enumerate(r["learners"]):
                cells = ["n/a" if x[k] is None else f"{x[k]:.3f}" for k in ("p_chain", "p_fit", "entropy", "argmax_is_chain")]
                lines.append(f"| {s} | {i} | " + " | ".join(cells) + f" | {f(x['argmax_minus_edf'])} |")
    if args.curve:
        lines += curve_lines(report["curve"])
    text = "\n".join(lines)
    print(text)
    write_outputs(args.name, "crisis_chain_states", report, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
