"""`python -m experiments.crisis.curriculum`: what the curriculum buys. PPO on crisis-v0 trained under a level
schedule (adaptive, hardest level only, or uniform levels) at equal env steps, evaluated on the holdout.

Schedules (levels are `curriculum_level` 0..4; a chunk is `--chunk` PPO updates):
- adaptive: the seed's rule. Every run starts at level 0; after each chunk its policy plays
  `--probe-episodes` episodes at its level (sampled actions, training distribution otherwise),
  and `nexus_jax.envs.crisis.advance_level` raises the level by one when mean completion,
  fairness and belief accuracy meet `--thresholds` (default the env's 0.7, 0.8, 0.5);
- hardest: level 4 throughout (what `experiments.crisis.seeds` trains);
- uniform: every env draws its level uniformly from 0..4 at every chunk.
Every schedule trains the same config (`configs/crisis_ppo.yaml` + overrides) for the same
env steps. The rollout length must be a multiple of the episode length, so episodes end at
update boundaries: at each chunk boundary every env is reset at its level for the chunk, and
`LevelEnv` makes the auto-reset start the next episode at the level of the one that ended.
Probe episodes train nothing and are not counted as env steps (their number is reported).
Evaluation is `experiments.crisis.seeds.evaluate` (holdout and fixed, EDF on the same keys, paired
differences); writes `runs/<name>/crisis_curriculum.json` and `.md`.
"""
from __future__ import annotations

import dataclasses
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from nexus_jax.cli import ArgumentParser, entry_point, folder_name, positive_int
from nexus_jax.envs.crisis import NUM_LEVELS, CurriculumThresholds, advance_level
from train.config import load_config
from experiments.crisis.evaluate import CRISIS_PPO_CONFIG, make_rollout, ppo_policy, write_outputs
from experiments.crisis.seeds import METRICS, evaluate, table
from train.learner_env import LearnerEnv
from train.models import make_policy
from train.ppo import make_chunks
from train.runtime import enable_compilation_cache
from train.stats import t_ci

SCHEDULES = ("adaptive", "hardest", "uniform")


@dataclasses.dataclass(frozen=True, eq=False)
class LevelEnv(LearnerEnv):
    """crisis-v0 whose auto-reset starts the next episode at the level of the episode that ended
    (`state.level`) instead of the params' level, so each env of a batch can train at its own level."""

    def step(self, key, state, actions, params=None):
        p = (self.env.default_params if params is None else params).replace(curriculum_level=state.level)
        return super().step(key, state, actions, p)

    def reset_at(self, key, level):
        """-> (obs (A, D), state) of a fresh episode at `level` (traced)."""
        obs, state = self.env.reset(key, self.env.default_params.replace(curriculum_level=level))
        return self.stack(obs), state


def chunk_levels(schedule: str, key, levels, num_envs: int):
    """(S, E) levels for the next chunk: each run's adaptive level, 4, or uniform draws."""
    S = levels.shape[0]
    if schedule == "uniform":
        return jax.random.randint(key, (S, num_envs), 0, NUM_LEVELS)
    lv = levels if schedule == "adaptive" else jnp.full((S,), NUM_LEVELS - 1)
    return jnp.broadcast_to(lv[:, None], (S, num_envs)).astype(jnp.int32)


def make_trainer(cfg, seeds: int, chunk: int, probe_episodes: int, thresholds: CurriculumThresholds):
    """-> (policy, train(schedule, seed) -> (params (S, ...), mean level per chunk and run (chunks, S)), env steps)."""
    env = LevelEnv.make(cfg.env_id, cfg.env, cfg.action_head)
    if cfg.num_steps % env.max_steps:
        raise ValueError(f"num_steps ({cfg.num_steps}) must be a multiple of the episode length ({env.max_steps}): "
                         f"levels change at update boundaries")
    if cfg.num_updates % chunk:
        raise ValueError(f"--chunk ({chunk}) must divide the number of updates ({cfg.num_updates})")
    init, run = make_chunks(cfg, env=env)
    policy = make_policy(cfg, env)
    probe = make_rollout(env.env, ppo_policy(policy), probe_episodes)
    reset = jax.jit(jax.vmap(jax.vmap(env.reset_at)))
    base = env.env.default_params

    def train(schedule: str, seed: int):
        key = jax.random.PRNGKey(seed)
        carry = init(jax.random.split(jax.random.PRNGKey(cfg.seed), seeds), jnp.asarray([cfg.lr]))
        levels = jnp.full((seeds,), 0 if schedule == "adaptive" else NUM_LEVELS - 1, jnp.int32)
        trace = []
        for c in range(cfg.num_updates // chunk):
            key, k_lv, k_reset, k_probe = jax.random.split(key, 4)
            lv = chunk_levels(schedule, k_lv, levels, cfg.num_envs)
            obs, state = reset(jax.random.split(k_reset, seeds * cfg.num_envs).reshape(seeds, cfg.num_envs, -1), lv)
            carry = {**carry, "obs": obs[None], "env_state": jax.tree.map(lambda x: x[None], state),
                     "ep_return": jnp.zeros_like(carry["ep_return"])}
            carry, _ = run(carry, jnp.asarray([cfg.lr]), jnp.int32(c * chunk), chunk)
            trace.append(np.asarray(lv.mean(-1)))
            if schedule == "adaptive":
                new = []
                for s in range(seeds):
                    m = probe(jax.tree.map(lambda x: x[0, s], carry["params"]),
                              base.replace(curriculum_level=levels[s]), jax.random.fold_in(k_probe, s))
                    new.append(advance_level(levels[s], m["completion_rate"].mean(), m["fairness"].mean(),
                                             m["belief_accuracy"].mean(), thresholds))
                levels = jnp.stack(new)
        return jax.tree.map(lambda x: x[0], carry["params"]), np.stack(trace)

    return policy, train, cfg.num_updates * cfg.num_envs * cfg.num_steps


@entry_point("python -m experiments.crisis.curriculum")
def main(argv=None) -> int:
    ap = ArgumentParser(prog="python -m experiments.crisis.curriculum", description=__doc__.splitlines()[0])
    ap.add_argument("--schedules", nargs="+", choices=SCHEDULES, default=list(SCHEDULES))
    ap.add_argument("--seeds", type=positive_int, default=3, help="training runs per schedule (default 3)")
    ap.add_argument("--chunk", type=positive_int, default=10, help="PPO updates between level changes (default 10)")
    ap.add_argument("--probe-episodes", type=positive_int, default=64, help="adaptive: episodes per level check")
    ap.add_argument("--thresholds", type=float, nargs=3, metavar=("COMPLETION", "FAIRNESS", "BELIEF"),
                    default=[0.7, 0.8, 0.5], help="adaptive: advance when every mean meets its threshold")
    ap.add_argument("--episodes", type=positive_int, default=1000, help="evaluation episodes per agent and scenario")
    ap.add_argument("--holdout-seed", type=int, default=2024)
    ap.add_argument("--ppo-config", default=str(CRISIS_PPO_CONFIG))
    ap.add_argument("--name", type=folder_name, default="crisis-curriculum", help="run folder: runs/<name>/")
    ap.add_argument("ppo_overrides", nargs="*", help="key=value overrides of the PPO config")
    args = ap.parse_args(argv)
    cfg = load_config(args.ppo_config, args.ppo_overrides)
    enable_compilation_cache()
    policy, train, env_steps = make_trainer(cfg, args.seeds, args.chunk, args.probe_episodes,
                                            CurriculumThresholds(*args.thresholds))
    lines = [f"PPO {env_steps:,} env steps per run x {args.seeds} runs per schedule; levels change every "
             f"{args.chunk} updates; {args.episodes} evaluation episodes per agent and scenario", ""]
    report: dict = {"command": "python -m experiments.crisis.curriculum " + " ".join(argv if argv is not None else sys.argv[1:]),
                    "env_steps_per_run": env_steps, "config": cfg.to_dict(), "schedules": {}}
    summary_rows = ["| Schedule | Holdout reward, argmax (mean of runs ± t CI) | Runs | Last chunk's mean level |",
                    "|---|---|---|---|"]
    for sched in args.schedules:
        t0 = time.time()
        params, trace = train(sched, cfg.seed + 1)
        train_s = time.time() - t0
        res = evaluate(policy, params, args.seeds, args.episodes, args.holdout_seed)
        rows, summary = table(res)
        means = [float(np.mean(res["holdout"][f"run{i}_argmax"]["total_reward"])) for i in range(args.seeds)]
        m, c = t_ci(means)
        probes = trace.shape[0] * args.probe_episodes * args.seeds if sched == "adaptive" else 0
        lines += [f"### {sched} ({train_s:.0f} s; mean level per chunk, run 0: {[round(float(x), 1) for x in trace[:, 0]]}; "
                  f"probe episodes {probes})", ""] + rows + [""]
        summary_rows.append(f"| {sched} | {m:.1f} ± {c:.1f} | {', '.join(f'{x:.1f}' for x in means)} | "
                            f"{[round(float(x), 1) for x in trace[-1]]} |")
        report["schedules"][sched] = {"train_wall_s": round(train_s, 1), "level_trace": trace.tolist(),
                                      "probe_episodes": probes, "results": summary,
                                      "run_means": {s: {k: [float(np.mean(res[s][f"run{i}_argmax"][k]))
                                                            for i in range(args.seeds)] for k in METRICS}
                                                    for s in res}}
        print("\n".join(lines[-len(rows) - 3:]), flush=True)
    text = "\n".join(summary_rows + [""] + lines)
    print(text)
    write_outputs(args.name, "crisis_curriculum", report, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
