"""`python -m experiments.crisis.evaluate`: the CrisisCompute seed's holdout and fixed tables on crisis-v0.

Trains the tabular Q-learner (`train.qlearning`) and PPO (`train.ppo`,
`configs/crisis_ppo.yaml`) on the TRAINING distribution, then evaluates trained and fresh
agents of both on shared episode keys:

- training distribution: level 4, a random task set per episode and ONE random crisis per
  episode (`max_crises=1`), so two crises are never in force together: no compound crisis is
  ever seen in training;
- holdout: level 4, a random task set and FOUR random crises per episode (`max_crises=4`);
  overlapping crises are compound crises (the share of episodes with one is reported), task
  sets and crises drawn from keys never used in training;
- fixed: the default task set (the seed's nine tasks), no crises, episode keys from seed 42;
- belief accuracy with vs without negotiation (`negotiation_min_level=5` turns the
  negotiation phases off at every level) on the holdout keys.

Fresh agents: the Q-learner with an all-zero table (greedy with random tie-breaks, i.e. a
uniformly random valid action) and PPO with freshly initialised parameters. A "PPO trained, argmax"
column plays the trained PPO policy's most probable valid action. A non-learning
reference column, EDF (request the ready task with the earliest deadline, never yield or
release), shows how far the learners are from a sensible hand-written policy. Trained
Q-learners act greedily (random tie-breaks); PPO samples from its policy. Every metric is a
per-episode value; tables give the mean and a normal-approximation 95% CI.
Writes `runs/<name>/crisis_eval.json` and `crisis_eval.md` and prints the markdown tables.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import nexus_jax
from nexus_jax import rollout
from nexus_jax.cli import ArgumentParser, entry_point, folder_name, positive_int
from nexus_jax.envs.crisis import NUM_LEVELS, Crisis, CrisisEnv, edf_actions
from train import qlearning
from train.checkpoint import load_run
from train.networks import ActorCritic
from train.ppo import make_env, make_train
from train.config import load_config
from train.runtime import enable_compilation_cache
from train.stats import beats, mean_ci

TRAIN_ENV = {"max_crises": 1, "crisis_source": "random", "task_source": "random"}  # level 4 (crisis-v0's default)
HOLDOUT_ENV = {"crisis_source": "random", "task_source": "random"}  # max_crises 4: compound crises
FIXED_ENV = {"crisis_kind": [int(Crisis.NONE)] * 4}  # default task set, no crises
NO_NEGOTIATION = {"negotiation_min_level": NUM_LEVELS}  # the switch: negotiation off at every level
FIXED_SEED = 42  # the seed's fixed evaluation
OBSERVATION_KEYS = ("dependency_features",)  # env options that change the observation's layout
# every crisis study's default PPO config
CRISIS_PPO_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "crisis_ppo.yaml"
METRICS = ("total_reward", "completion_rate", "on_time_rate", "fairness", "belief_accuracy")
LABELS = {"total_reward": "Avg total reward", "completion_rate": "Task completion rate",
          "on_time_rate": "On-time rate", "fairness": "Fairness (Jain)", "belief_accuracy": "Belief accuracy"}
AGENTS = ("q_trained", "q_fresh", "ppo_trained", "ppo_fresh", "ppo_greedy", "edf")
COLUMNS = {"q_trained": "Q trained", "q_fresh": "Q fresh", "ppo_trained": "PPO trained", "ppo_fresh": "PPO fresh",
           "ppo_greedy": "PPO trained, argmax", "edf": "EDF heuristic"}


# ---- statistics -----------------------------------------------------------------------------

def has_compound(schedule) -> jax.Array:
    """() bool: two enabled crises are in force at the same step (an urgent injection counts at its step)."""
    end = jnp.maximum(schedule.end_step, schedule.start_step + 1)
    overlap = ((schedule.start_step[:, None] < end[None, :]) & (schedule.start_step[None, :] < end[:, None])
               & schedule.enabled[:, None] & schedule.enabled[None, :])
    return jnp.any(overlap & ~jnp.eye(overlap.shape[0], dtype=bool))


# ---- policies: (policy_args, key, obs (E, A, D), state (E,), masks (E, A, n), params) -> (E, A) ----

def q_greedy(q, key, obs, state, masks, params):
    """Greedy over the seat's Q row, ties broken uniformly at random (all-zero table: uniform random)."""
    s = jax.vmap(qlearning.discretize, (0, None))(state, params)  # (E, A)
    rows = q[jnp.arange(q.shape[0])[None, :], s]  # (E, A, n)
    best = jnp.max(jnp.where(masks, rows, -jnp.inf), -1, keepdims=True)
    ties = masks & (rows >= best - 1e-6)
    return jax.random.categorical(key, jnp.where(ties, 0.0, -jnp.inf)).astype(jnp.int32)


def rule_policy(rule):
    """A hand-written rule of `nexus_jax.envs.crisis` (`RULES`: one env, `(state, masks, params) -> (A,)`) as a
    policy over the rollout's batch of envs."""

    def act(_, key, obs, state, masks, params):
        return jax.vmap(rule, (0, 0, None))(state, masks, params)

    return act


edf = rule_policy(edf_actions)  # the reference heuristic (not a learner): earliest deadline first


def ppo_policy(policy, greedy: bool = False):
    """Sample from the PPO policy, or (greedy) take its most probable valid action (flat head)."""

    def act(params, key, obs, state, masks, env_params):
        if not greedy:
            return policy.act(params, obs, masks, key)[0]
        n = masks.shape[-1]
        logp = jax.vmap(lambda a: policy.evaluate(params, obs, masks, jnp.full(obs.shape[:-1], a, jnp.int32))[0])(
            jnp.arange(n))  # (n, E, A)
        return jnp.argmax(jnp.where(jnp.moveaxis(masks, -1, 0), logp, -jnp.inf), 0).astype(jnp.int32)

    return act


def observation_env(cfg) -> dict:
    """The trained config's env options that change the observation (`OBSERVATION_KEYS`): every evaluation
    env of a policy must have them, or the policy reads a differently laid-out observation."""
    return {k: cfg.env[k] for k in OBSERVATION_KEYS if k in cfg.env}


def make_rollout(env: CrisisEnv, policy_fn, num_episodes: int, extra=None):
    """-> jitted `run(policy_args, params, key) -> {metric: (E,)}` through the one evaluator
    (`nexus_jax.rollout.evaluate`, one episode per env without auto-reset); env params are traced (one compile
    serves every scenario with the same static shapes). `extra(state) -> {name: (E, ...)}` adds arrays read from
    the final states (e.g. per-task completion times for an analysis)."""
    T = int(env.default_params.max_steps)
    E = num_episodes

    def run(policy_args, params, key):
        def act(k, obs, state, masks):
            return policy_fn(policy_args, k, obs, state, masks, params), None

        ep = rollout.evaluate(rollout.EpisodeEnv(env, params), act, key, E, T, params, metrics=True)
        m, state = ep.metrics, ep.state
        compound = jax.vmap(has_compound)(state.schedule)  # the schedule is fixed at reset
        return {"total_reward": ep.returns.sum(-1), "completion_rate": m["completion_rate"],
                "on_time_rate": m["on_time_rate"], "fairness": m["fairness"],
                "belief_accuracy": m["belief_accuracy_mean"], "contracts_made": m["contracts_made"],
                "invalid": m["invalid_total"], "compound": compound, **(extra(state) if extra else {})}

    return jax.jit(run)


# ---- training -------------------------------------------------------------------------------

def train_q(episodes: int, seed: int):
    env = nexus_jax.make("crisis-v0", info_mode="full", **TRAIN_ENV)
    train = jax.jit(qlearning.make_train(env, episodes))
    q, m = jax.block_until_ready(train(jax.random.PRNGKey(seed), env.default_params))
    return q, jax.device_get(m), episodes * int(env.default_params.max_steps)


def train_ppo(cfg):
    env = make_env(cfg)
    out = jax.block_until_ready(jax.jit(make_train(cfg, None, env))(jax.random.PRNGKey(cfg.seed)))
    return cfg, ActorCritic.from_config(cfg, env), env, out["params"], jax.device_get(out["metrics"])


def load_ppo(run_dir: str):
    cfg, env, policy, params = load_run(run_dir)
    return cfg, policy, env, params


# ---- tables ---------------------------------------------------------------------------------

def fmt(x, metric: str) -> str:
    m, c = mean_ci(x)
    return f"{m:.1f} ± {c:.1f}" if metric == "total_reward" else f"{m:.3f} ± {c:.3f}"


def scenario_table(res: dict, metrics=METRICS[:4]) -> str:
    lines = ["| Metric | " + " | ".join(COLUMNS[a] for a in AGENTS) + " |", "|---" * (len(AGENTS) + 1) + "|"]
    for k in metrics:
        lines.append(f"| {LABELS[k]} | " + " | ".join(fmt(res[a][k], k) for a in AGENTS) + " |")
    return "\n".join(lines)


def verdicts(res: dict, metrics=METRICS[:4]) -> dict:
    """Per learner and metric: 'beats' (trained CI above fresh), 'loses' or 'overlap'; also trained vs EDF."""
    cmp = lambda t, f, k: "beats" if beats(t[k], f[k]) else "loses" if beats(f[k], t[k]) else "overlap"  # noqa: E731
    out = {}
    for learner in ("q", "ppo"):
        t = res[f"{learner}_trained"]
        out[learner] = {k: cmp(t, res[f"{learner}_fresh"], k) for k in metrics}
        out[f"{learner}_vs_edf"] = {k: cmp(t, res["edf"], k) for k in metrics}
    out["ppo_greedy_vs_edf"] = {k: cmp(res["ppo_greedy"], res["edf"], k) for k in metrics}
    return out


def belief_table(with_n: dict, without_n: dict) -> str:
    lines = ["| Agent | With negotiation | Without negotiation | Paired delta |", "|---|---|---|---|"]
    for a in AGENTS:
        x, y = with_n[a]["belief_accuracy"], without_n[a]["belief_accuracy"]
        lines.append(f"| {COLUMNS[a]} | {fmt(x, 'b')} | {fmt(y, 'b')} | {fmt(np.asarray(x) - np.asarray(y), 'b')} |")
    return "\n".join(lines)


def write_outputs(name: str, stem: str, report: dict, text: str) -> Path:
    """runs/<name>/<stem>.json (the report) and <stem>.md (the tables): what every crisis study writes."""
    run_dir = Path("runs") / name
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / f"{stem}.json", "w") as f:
        json.dump(report, f, indent=2, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o))
    (run_dir / f"{stem}.md").write_text(text + "\n")
    return run_dir


def summarise(res: dict) -> dict:
    return {a: {k: dict(zip(("mean", "ci95"), mean_ci(v))) for k, v in r.items()} for a, r in res.items()}


# ---- main -----------------------------------------------------------------------------------

def parse_args(argv):
    ap = ArgumentParser(prog="python -m experiments.crisis.evaluate", description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=positive_int, default=1000, help="evaluation episodes per agent and scenario")
    ap.add_argument("--q-episodes", type=positive_int, default=2000, help="Q-learner training episodes (48 env steps each)")
    ap.add_argument("--seed", type=int, default=0, help="training seed (Q-learner; PPO uses its config's seed)")
    ap.add_argument("--holdout-seed", type=int, default=2024, help="holdout episode keys (never used in training)")
    ap.add_argument("--ppo-config", default=str(CRISIS_PPO_CONFIG))
    ap.add_argument("--ppo-run", default=None, help="evaluate this saved PPO run folder instead of training")
    ap.add_argument("--name", type=folder_name, default="crisis-eval", help="run folder: runs/<name>/")
    ap.add_argument("--train-dist", action="store_true",
                    help="also evaluate PPO (argmax) and EDF on the training distribution (generalisation gap)")
    ap.add_argument("ppo_overrides", nargs="*", help="key=value overrides of the PPO config (e.g. total_timesteps=...)")
    args = ap.parse_args(argv)
    return args


def train_learners(args, saved, ppo_cfg, report: dict):
    """Train the Q-learner and PPO (or load PPO's saved run); their training summaries go into `report`.
    -> (q table, PPO (policy, env, trained params, fresh params), env steps of each)."""
    t0 = time.time()
    q, qm, q_steps = train_q(args.q_episodes, args.seed)
    tail = max(1, args.q_episodes // 10)
    report["q"] = {"episodes": args.q_episodes, "env_steps": q_steps, "train_wall_s": round(time.time() - t0, 1),
                   "first_10pct_return": float(np.mean(qm["total_reward"][:tail])),
                   "last_10pct_return": float(np.mean(qm["total_reward"][-tail:]))}
    print(f"Q-learner: {args.q_episodes} episodes = {q_steps:,} env steps in {report['q']['train_wall_s']} s "
          f"(training return {report['q']['first_10pct_return']:.1f} -> {report['q']['last_10pct_return']:.1f}, "
          f"first vs last 10% of episodes)", flush=True)

    t1 = time.time()
    if saved:
        cfg, policy, lenv, ppo_params = saved
        ppo_info = {"run": args.ppo_run}
    else:
        cfg, policy, lenv, ppo_params, pm = train_ppo(ppo_cfg)
        er = np.asarray(pm["episode_return_learners"])
        k = max(1, len(er) // 10)
        ppo_info = {"first_10pct_return_per_seat": float(er[:k].mean()), "last_10pct_return_per_seat": float(er[-k:].mean())}
    ppo_steps = cfg.num_updates * cfg.num_envs * cfg.num_steps
    ppo_info.update(env=cfg.env, env_steps=ppo_steps, train_wall_s=round(time.time() - t1, 1), config=cfg.to_dict())
    report["ppo"] = ppo_info
    if cfg.env != TRAIN_ENV:
        print(f"note: PPO was trained on env {cfg.env}, not the holdout training distribution {TRAIN_ENV}", flush=True)
    print(f"PPO: {ppo_steps:,} env steps in {ppo_info['train_wall_s']} s (compile included)", flush=True)
    obs, st = jax.vmap(lenv.reset)(jax.random.split(jax.random.PRNGKey(0), 1))
    fresh_ppo = policy.init(jax.random.PRNGKey(args.seed + 1), obs, jax.vmap(lenv.masks)(st))
    return q, (policy, ppo_params, fresh_ppo), (q_steps, ppo_steps)


def evaluate_agents(args, q, ppo, obs_env: dict) -> dict:
    """Every agent on the holdout, the fixed evaluation and the holdout without negotiation:
    {scenario: {agent: {metric: (episodes,)}}}. One compiled rollout per policy kind; scenarios are traced params.
    `obs_env`: PPO's observation options (`observation_env`; the Q-learner and EDF read the state)."""
    policy, ppo_params, fresh_ppo = ppo
    env = nexus_jax.make("crisis-v0", info_mode="full", **HOLDOUT_ENV, **obs_env)
    scen = {"holdout": (env.default_params, args.holdout_seed),
            "fixed": (nexus_jax.make("crisis-v0", **FIXED_ENV, **obs_env).default_params, FIXED_SEED),
            "holdout_no_negotiation": (nexus_jax.make("crisis-v0", **HOLDOUT_ENV, **NO_NEGOTIATION,
                                                      **obs_env).default_params, args.holdout_seed)}
    run_q = make_rollout(env, q_greedy, args.episodes)
    run_ppo = make_rollout(env, ppo_policy(policy), args.episodes)
    agents = {"q_trained": (run_q, q), "q_fresh": (run_q, jnp.zeros_like(q)),
              "ppo_trained": (run_ppo, ppo_params), "ppo_fresh": (run_ppo, fresh_ppo),
              "ppo_greedy": (make_rollout(env, ppo_policy(policy, greedy=True), args.episodes), ppo_params),
              "edf": (make_rollout(env, edf, args.episodes), None)}
    return {s: {a: jax.device_get(fn(pa, p, jax.random.PRNGKey(seed))) for a, (fn, pa) in agents.items()}
            for s, (p, seed) in scen.items()}


def train_distribution_gap(args, res: dict, ppo, report: dict, obs_env: dict) -> list:
    """PPO (argmax) and EDF on the training distribution with the holdout's episode keys -> markdown lines."""
    policy, ppo_params, _ = ppo
    tenv = nexus_jax.make("crisis-v0", info_mode="full", **TRAIN_ENV, **obs_env)
    gap = {a: jax.device_get(make_rollout(tenv, fn, args.episodes)(pa, tenv.default_params,
                                                                   jax.random.PRNGKey(args.holdout_seed)))
           for a, fn, pa in (("ppo_greedy", ppo_policy(policy, greedy=True), ppo_params), ("edf", edf, None))}
    report["results"]["train_distribution"] = summarise(gap)
    md = ["## Training distribution vs holdout (same keys)", "",
          "| Agent | Reward, training dist. | Reward, holdout | On time, training dist. | On time, holdout |",
          "|---|---|---|---|---|"]
    md += [f"| {COLUMNS[a]} | {fmt(gap[a]['total_reward'], 'total_reward')} | "
           f"{fmt(res['holdout'][a]['total_reward'], 'total_reward')} | {fmt(gap[a]['on_time_rate'], 'x')} | "
           f"{fmt(res['holdout'][a]['on_time_rate'], 'x')} |" for a in gap]
    return md + [""]


def markdown(args, res: dict, report: dict, steps: tuple, eval_s: float, gap_md: list) -> str:
    q_steps, ppo_steps = steps
    md = [f"## Holdout: compound crises never seen in training ({args.episodes} episodes per agent, "
          f"{100 * report['holdout_compound_share']:.0f}% with a compound crisis, keys from seed {args.holdout_seed})",
          "", scenario_table(res["holdout"]), "",
          f"## Fixed: default task set, no crises ({args.episodes} episodes per agent, keys from seed {FIXED_SEED})",
          "", scenario_table(res["fixed"]), "",
          "## Belief accuracy with vs without negotiation (holdout keys)", "",
          belief_table(res["holdout"], res["holdout_no_negotiation"]), "", *gap_md,
          f"Training: Q-learner {q_steps:,} env steps ({args.q_episodes} episodes), PPO {ppo_steps:,} env steps; "
          f"both on {TRAIN_ENV}. Eval wall time {eval_s:.0f} s.", "",
          "Trained vs fresh and vs EDF (beats = 95% CIs apart, trained above): "
          + "; ".join(f"{s} {who}: " + ", ".join(f"{k} {v}" for k, v in d.items())
                      for s, v_s in report["verdicts"].items() for who, d in v_s.items()), "",
          f"Holdout bar (trained beats fresh on reward, completion and on-time, CIs apart, both learners): "
          f"{'MET' if report['holdout_bar_met'] else 'NOT met'}"]
    return "\n".join(md)


@entry_point("python -m experiments.crisis.evaluate")
def main(argv=None) -> int:
    args = parse_args(argv)
    # Every input is checked before anything is written: the saved run, or the PPO config to train.
    saved = load_ppo(args.ppo_run) if args.ppo_run else None
    ppo_cfg = None if saved else load_config(args.ppo_config, args.ppo_overrides)

    enable_compilation_cache()
    report: dict = {"command": "python -m experiments.crisis.evaluate " + " ".join(argv if argv is not None else sys.argv[1:]),
                    "episodes": args.episodes, "train_env": TRAIN_ENV, "holdout_env": HOLDOUT_ENV,
                    "fixed_env": FIXED_ENV, "no_negotiation": NO_NEGOTIATION}
    t0 = time.time()
    q, ppo, steps = train_learners(args, saved, ppo_cfg, report)

    t2 = time.time()
    obs_env = observation_env(saved[0] if saved else ppo_cfg)
    res = evaluate_agents(args, q, ppo, obs_env)
    eval_s = time.time() - t2
    report["eval_wall_s"] = round(eval_s, 1)
    report["holdout_compound_share"] = float(np.mean(res["holdout"]["q_fresh"]["compound"]))
    report["results"] = {s: summarise(r) for s, r in res.items()}
    report["verdicts"] = {s: verdicts(res[s]) for s in ("holdout", "fixed")}
    report["holdout_bar_met"] = all(
        v == "beats" for learner in ("q", "ppo") for k, v in report["verdicts"]["holdout"][learner].items()
        if k in ("total_reward", "completion_rate", "on_time_rate"))
    gap_md = train_distribution_gap(args, res, ppo, report, obs_env) if args.train_dist else []

    text = markdown(args, res, report, steps, eval_s, gap_md)
    print("\n" + text)
    run_dir = write_outputs(args.name, "crisis_eval", report, text)
    print(f"\nwrote {run_dir}/crisis_eval.json and crisis_eval.md ({time.time() - t0:.0f} s in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
