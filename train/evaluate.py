"""Evaluate policies in the learner seat(s) on shared keys; `python -m train.evaluate RUN_DIR` reloads a run.

Candidates: the trained policy, a random policy (a uniformly random valid choice per
head), and the env's scripted play: with NPC seats (Nexus), every scripted baseline of
`npc.scripted` in the learner seat (the NPC archetypes, the vault hedge, the passive holders
WAIT, HOARD and AUTARKY; the seat's behaviour is overridden, its economy kept); otherwise the
env's heuristics. One compiled evaluator serves every candidate (`lax.switch` on a traced
candidate index) and every candidate sees the same episode keys; the verdict says whether the
trained policy beats all of them beyond the CIs.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from nexus_jax.cli import ArgumentParser, UserInputError, entry_point, positive_int
from nexus_jax.envs.nexus import BASELINES, NPC_ARCHETYPES, Archetype, npc_actions, scripted_actions, scripted_params, with_behaviour
from train.checkpoint import convert_legacy, load_run, load_run_config, param_shapes
from train.learner_env import LearnerEnv, random_actions
from train.networks import ActorCritic
from train.runtime import enable_compilation_cache
from nexus_jax import rollout
from train.plots import plot_eval_episode
from train.snapshots import load_policies
from train.stats import ci_above, mean_ci
from train.suite.cli import run_suite_cli


class EvalResult(NamedTuple):
    returns: jnp.ndarray  # (E,) episode return of the first learner seat
    invalid_rate: jnp.ndarray  # (E,) share of the learner seats' actions the env judged invalid
    trace_trust: jnp.ndarray  # (T, N, N) trust matrix through episode 0 (zeros if the env has none)
    trace_utility: jnp.ndarray  # (T, N) utility of every seat through episode 0


def heuristic_archetypes(env: LearnerEnv) -> dict[str, int]:
    """name -> archetype id of every NPC heuristic that can play the learner seat (empty if the env has none)."""
    if not env.env.spec.npc_seats:
        return {}
    return {Archetype(a).name.lower(): int(a) for a in NPC_ARCHETYPES}


def heuristic_actions(env: LearnerEnv, key, state, archetype) -> jnp.ndarray:
    """(A, 5) actions of the learner seats played by NPC `archetype` (traced), keeping the seats' economy."""
    params = heuristic_params(env, archetype)
    return npc_actions(key, state, params, params.behaviours)[env.seats]


def heuristic_params(env: LearnerEnv, archetype):
    """Env params whose `behaviours` put NPC `archetype` (traced) in the learner seats.

    Stepping with them makes the seats' NPC memory follow that archetype too (a CHEATER's
    signals are meant to be broken at its break rate), as in `nexus_jax.tournament`; the
    seats keep the learner's economy (`archetypes` is unchanged).
    """
    return with_behaviour(env.env.default_params, env.seats, archetype)


def baseline_names(env: LearnerEnv) -> list[str]:
    """The scripted policies every evaluation table shows beside the trained one: an env with NPC seats, every
    scripted baseline of its NPC table (the archetypes, the vault hedge, the passive holders: `npc.scripted`);
    otherwise the env's own heuristics (`env.spec.heuristics`)."""
    if env.env.spec.npc_seats:
        return [b.name for b in BASELINES]
    return list(env.env.spec.heuristics)


def candidate_names(env: LearnerEnv) -> list[str]:
    return ["trained", "random"] + baseline_names(env)


def scripted_step_params(env: LearnerEnv, idx):
    """Env params for candidate `idx` (traced) of an env with NPC seats: a scripted candidate (idx >= 2) also
    drives the learner seats' NPC memory (`npc.scripted.scripted_params`); the others step with the env's."""
    default = env.default_params
    scripted = scripted_params(default, env.seats, jnp.maximum(idx - 2, 0))
    return jax.tree.map(lambda a, b: jnp.where(idx >= 2, a, b), scripted, default)


def make_evaluator(env: LearnerEnv, policy: ActorCritic, num_episodes: int, num_steps: int | None = None):
    """-> jitted `evaluate(candidate_idx, params, key) -> EvalResult` (candidate order: `candidate_names`).

    A recurrent policy's memory is carried for every candidate (the others pass it on untouched), so one
    compiled program still serves them all."""
    num_steps = num_steps or env.max_steps
    flat = env.action_head == "flat"
    npc_seats = env.env.spec.npc_seats
    heuristics = list(env.env.spec.heuristics.values())

    def trained(idx, params, key, obs, state, masks, step_params, memory=None):
        if memory is None:
            return policy.act(params, obs, masks, key)[0]
        action, _, _, memory = policy.act_step(params, obs, masks, key, memory)
        return action, memory

    def rand(idx, params, key, obs, state, masks, step_params):
        return random_actions(key, masks, env.action_head)

    def scripted(idx, params, key, obs, state, masks, step_params):
        """One branch serves every scripted baseline (traced index): the NPC policy is compiled once."""
        a = jax.vmap(lambda k, s: scripted_actions(idx - 2, k, s, step_params, env.seats))(
            jax.random.split(key, num_episodes), state)
        return env.env.encode(a) if flat else a

    def heuristic(h):
        def act(idx, params, key, obs, state, masks, step_params):
            keys = jax.random.split(key, num_episodes)
            return jax.vmap(lambda k, s: h(k, s, env.default_params)[env.seats])(keys, state)
        return act

    def keeping(branch):
        """A candidate without memory in the recurrent branches' signature: the memory goes through untouched."""
        return lambda idx, params, key, obs, state, masks, step_params, memory: (
            branch(idx, params, key, obs, state, masks, step_params), memory)

    branches = [trained, rand] + ([scripted] if npc_seats else [heuristic(h) for h in heuristics])

    def evaluate(idx, params, key):
        step_params = scripted_step_params(env, idx) if npc_seats else None
        branch = jnp.minimum(idx, len(branches) - 1) if npc_seats else idx

        def act(k, obs, state, masks):
            return jax.lax.switch(branch, branches, idx, params, k, obs, state, masks, step_params), None

        def act_recurrent(k, obs, state, masks, memory):
            with_memory = [trained] + [keeping(b) for b in branches[1:]]
            action, memory = jax.lax.switch(branch, with_memory, idx, params, k, obs, state, masks, step_params, memory)
            return action, None, memory

        def trace(s: rollout.Step):
            """Trust and utility through env 0."""
            trust = getattr(s.state, "trust", jnp.zeros((1, 1, 1)))
            return trust[0], (s.info["utility"][0] if "utility" in s.info else jnp.zeros(1))

        acts = act if not policy.memory_size else rollout.Recurrent(act_recurrent, policy.initial_memory)
        ep = rollout.evaluate(env, acts, key, num_episodes, num_steps, step_params, trace=trace)
        trust, util = ep.trace
        return EvalResult(ep.returns[:, 0], ep.invalid_rate.mean(-1), trust, util)

    return jax.jit(evaluate)


def evaluate_all(env: LearnerEnv, policy: ActorCritic, params, num_episodes: int, seed: int) -> dict:
    """Every candidate on the same keys -> {name: {"mean", "ci95", "invalid_rate", "result"}}."""
    evaluator = make_evaluator(env, policy, num_episodes)
    key = jax.random.PRNGKey(seed)
    out = {}
    for i, name in enumerate(candidate_names(env)):
        res = jax.device_get(evaluator(jnp.int32(i), params, key))
        m, ci = mean_ci(res.returns)
        out[name] = {"mean": m, "ci95": ci, "invalid_rate": float(np.mean(res.invalid_rate)), "result": res}
    return out


def paired_runs(run_a, run_b, num_episodes: int, seed: int) -> dict:
    """Seed i of run A against seed i of run B in the learner seat, every seed on the same episode keys.

    The A/B test of two training configs on one env (`memory=gru` against the feedforward default, say): each
    seed's mean return, the paired difference A − B with its 95% CI (the keys' shocks and deals cancel), and the
    differences pooled over the seeds. Both runs must be on the same env id and env overrides and hold as many
    seeds; otherwise UserInputError names what differs."""
    runs = []
    for run in (run_a, run_b):
        cfg, env, policy, _ = load_run(run)
        runs.append((cfg, env, policy, load_policies(run, param_shapes(cfg, env, policy))["seeds"]))
    (cfg_a, _, _, seeds_a), (cfg_b, _, _, seeds_b) = runs
    if (cfg_a.env_id, cfg_a.env) != (cfg_b.env_id, cfg_b.env):
        raise UserInputError(f"--against: {str(run_b)!r} is on {cfg_b.env_id} {cfg_b.env}, {str(run_a)!r} on "
                             f"{cfg_a.env_id} {cfg_a.env}; a paired comparison needs the same env and rules")
    if len(seeds_a) != len(seeds_b) or not seeds_a:
        raise UserInputError(f"--against: {str(run_a)!r} holds {len(seeds_a)} seed(s), {str(run_b)!r} "
                             f"{len(seeds_b)}; seed i is paired with seed i, so both need the same number (> 0)")
    key = jax.random.PRNGKey(seed)
    returns = []
    for _, env, policy, seeds in runs:
        evaluator = make_evaluator(env, policy, num_episodes)
        returns.append([np.asarray(jax.device_get(evaluator(jnp.int32(0), p, key)).returns, np.float64)
                        for p in seeds])
    rows = [{"seed": i, "a": mean_ci(a), "b": mean_ci(b), "a_minus_b": mean_ci(a - b)}
            for i, (a, b) in enumerate(zip(*returns))]
    pooled = mean_ci(np.concatenate([a - b for a, b in zip(*returns)]))
    return {"a": str(run_a), "b": str(run_b), "env_id": cfg_a.env_id, "episodes": num_episodes, "eval_seed": seed,
            "seeds": rows, "pooled_a_minus_b": pooled}


def format_paired(res: dict) -> str:
    """`paired_runs`' result as a plain-text table: one row a seed, then the pooled difference."""
    lines = [f"{'seed':<6}{'A: ' + res['a']:>30}{'B: ' + res['b']:>30}{'A − B (paired)':>20}", "-" * 86]
    for r in res["seeds"]:
        a, b, d = r["a"], r["b"], r["a_minus_b"]
        lines.append(f"{r['seed']:<6}{f'{a[0]:.2f} ± {a[1]:.2f}':>30}{f'{b[0]:.2f} ± {b[1]:.2f}':>30}"
                     f"{f'{d[0]:+.2f} ± {d[1]:.2f}':>20}")
    d = res["pooled_a_minus_b"]
    lines.append(f"{'pooled':<66}{f'{d[0]:+.2f} ± {d[1]:.2f}':>20}")
    return "\n".join(lines)


def format_table(results: dict, note: str = "") -> str:
    """A plain-text table of mean return ± 95% CI per candidate."""
    lines = [f"{'policy in learner seat':<24}{'mean return':>14}{'± 95% CI':>11}{'invalid rate':>14}", "-" * 63]
    for name, r in results.items():
        lines.append(f"{name:<24}{r['mean']:>14.2f}{r['ci95']:>11.2f}{r['invalid_rate']:>14.3f}")
    if note:
        lines.append(note)
    return "\n".join(lines)


def verdict(results: dict) -> str:
    """Does the trained policy beat every scripted policy (and random) by more than the CIs (trained.lo > other.hi)?"""
    t = results["trained"]
    others = {k: v for k, v in results.items() if k != "trained"}
    beaten = [k for k, v in others.items() if ci_above(t, v)]
    missed = sorted(set(others) - set(beaten))
    what = "every scripted policy" if len(others) > 1 else "random (the env has no scripted policies)"
    return (f"trained beats {what} beyond the 95% CIs" if not missed
            else f"trained does NOT beat beyond the CIs: {', '.join(missed)}")


def results_json(results: dict) -> dict:
    return {k: {kk: vv for kk, vv in v.items() if kk != "result"} for k, v in results.items()}


@entry_point("python -m train.evaluate")
def main(argv=None):
    ap = ArgumentParser(prog="python -m train.evaluate", description=__doc__.splitlines()[0],
                                 epilog="With any of --scenarios/--crossplay/--snapshots/--attribution/--suite only "
                                        "those suite parts run (train/suite/, docs/evaluation.md) and their "
                                        "results go to RUN_DIR/suite.json; without them, the learner-seat table.")
    ap.add_argument("run_dir")
    ap.add_argument("--episodes", type=positive_int, default=None, help="default: the run's eval_episodes (suite: 32)")
    ap.add_argument("--seed", type=int, default=None, help="default: the run's eval_seed (suite: 0)")
    ap.add_argument("--scenarios", nargs="*", default=None, metavar="NAME",
                    help="held-out scenarios (train/suite/scenarios.py SCENARIOS; no names: all)")
    ap.add_argument("--crossplay", action="store_true", help="cross-play matrix and Elo (seeds, snapshot, heuristics)")
    ap.add_argument("--snapshots", action="store_true", help="each snapshot against its past snapshots")
    ap.add_argument("--attribution", action="store_true", help="trade rate after force-majeure vs malicious breaks")
    ap.add_argument("--suite", action="store_true", help="all four suite parts")
    ap.add_argument("--against", default=None, metavar="OTHER_RUN_DIR",
                    help="seed i of RUN_DIR against seed i of OTHER_RUN_DIR on the same keys (same env): paired "
                         "differences per seed and pooled, to RUN_DIR/paired.json")
    ap.add_argument("--runs", nargs="*", default=[], metavar="RUN_DIR",
                    help="more run folders whose seeds join the cross-play (same network shape)")
    ap.add_argument("--convert-legacy", action="store_true",
                    help="first turn RUN_DIR's checkpoint.msgpack (written before checkpoints carried digests, so "
                         "unverifiable) into a verified checkpoint/, trusting its bytes; the old file is kept")
    args = ap.parse_args(argv)
    if args.convert_legacy:
        print(f"wrote {convert_legacy(args.run_dir)} from checkpoint.msgpack (verified from now on; the old file kept)")

    enable_compilation_cache()
    suite = args.suite or args.scenarios is not None or args.crossplay or args.snapshots or args.attribution
    if suite and args.against is not None:
        raise UserInputError("--against compares two runs' seeds in the learner seat; run the suite parts separately")
    if suite:
        return run_suite_cli(args)
    if args.against is not None:
        cfg = load_run_config(args.run_dir)
        res = paired_runs(args.run_dir, args.against, args.episodes or cfg.eval_episodes,
                          cfg.eval_seed if args.seed is None else args.seed)
        print(f"{res['env_id']}, {res['episodes']} episodes per seed, keys from seed {res['eval_seed']}")
        print(format_paired(res))
        (Path(args.run_dir) / "paired.json").write_text(json.dumps(res, indent=1))
        return 0
    cfg, env, policy, params = load_run(args.run_dir)  # UserInputError/CheckpointError: one line, exit 2
    results = evaluate_all(env, policy, params, args.episodes or cfg.eval_episodes,
                           cfg.eval_seed if args.seed is None else args.seed)
    print(format_table(results, verdict(results)))
    run = Path(args.run_dir)
    with open(run / "eval_reloaded.json", "w") as f:
        json.dump(results_json(results), f, indent=2)
    plot_eval_episode(results["trained"]["result"], run / "eval_episode.png")


if __name__ == "__main__":
    raise SystemExit(main())
