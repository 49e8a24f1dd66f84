"""`python -m train.pipeline [--config FILE] [key=value ...]`: random -> BC -> GRPO, and PPO from the same BC start.

The staged pipeline of the seed (hard-coded behaviour -> supervised warm start -> GRPO) on
device. Every stage's policy is UNMASKED (all-true action masks): it is free to emit invalid
actions, which the env counts (`info["invalid"]`) and penalises, the analogue of the seed's
parse errors. Stages:

1. random: the freshly initialised network (near-uniform heads);
2. BC: maximum likelihood on an NPC heuristic's actions in the learner seat (`train.bc`);
3. GRPO from BC, KL to the BC policy (`train.grpo`);
4. PPO from the same BC parameters (actor and BC-fitted critic) with the same env-step budget
   (`train.ppo`'s `init_runner` / `update_step`).

Every stage is evaluated on the same evaluation keys; the table (mean ± 95% CI over
episodes) has average return, invalid-action rate, trade completion, signals honoured /
broken and mean trust in the learner. Writes runs/<name>/{pipeline.md, pipeline.png,
pipeline.json, metrics_*.jsonl}.

Overrides: top-level keys (`seed=1`, `eval_episodes=200`), env params (`env.max_steps=30`),
stage keys (`bc.epochs=10`, `grpo.kl_coef=0.1`, `ppo.lr=1e-3`).
"""
from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax.training.train_state import TrainState

from nexus_jax import sharding
from nexus_jax.cli import ArgumentParser, entry_point
from nexus_jax.distributed import is_main_process
from train import ppo as P
from train.bc import UnmaskedEnv, make_bc_train
from train.config import PipelineConfig, load_pipeline_config, pipeline_values
from train.grpo import make_grpo_train
from train.models import make_learner_env, make_policy
from train.evaluate import baseline_names
from train.pipeline_eval import (METRICS, equal_wall_time, format_markdown, make_scripted_evaluator, make_stage_evaluator,
                                 summarise, verdicts)
from train.loggers import EVALUATION, Logger, NullLogger, open_logger
from train.plots import plot_pipeline_table
from train.runtime import enable_compilation_cache, use_fast_compile
from train.tracking import device_feed, drain, log_epochs, log_history

STAGES = ("random", "BC", "GRPO", "PPO")


def _timed(fn, *args):
    """Compile, then run -> (output, compile seconds, run seconds)."""
    t0 = time.time()
    compiled = jax.jit(fn).lower(*args).compile()
    t1 = time.time()
    out = jax.block_until_ready(compiled(*args))
    return out, t1 - t0, time.time() - t1


def run_bc(cfg: PipelineConfig, env, policy, key, params0, log, mesh=None):
    """BC from the random start -> (params, metrics, timing). `mesh`: env batch and minibatches sharded."""
    (params, m), c, r = _timed(make_bc_train(cfg.bc, env, policy, mesh=mesh), key, params0)
    m = sharding.tree_to_host(m)
    teacher = cfg.bc.archetype + (f" + vault hedge (p={cfg.bc.hedge_prob:g})" if cfg.bc.hedge_prob else "")
    log(f"BC    : {cfg.bc.num_envs * cfg.bc.num_steps:,} {teacher} steps, {cfg.bc.epochs} epochs; "
        f"NLL {m['nll'][0]:.3f} -> {m['nll'][-1]:.3f}; teacher return {float(m['behaviour_episode_return']):.2f}"
        f"; compile {c:.0f} s, run {r:.0f} s")
    if cfg.bc.dagger_rounds:
        log(f"BC    : {cfg.bc.dagger_rounds} DAgger rounds; the policy's own return "
            + " -> ".join(f"{x:.2f}" for x in m["dagger_policy_return"]) + ", invalid rate "
            + " -> ".join(f"{x:.2%}" for x in m["dagger_policy_invalid_rate"]))
    return params, m, {"env_steps": cfg.bc.num_envs * cfg.bc.num_steps, "compile_s": c, "train_s": r}


def run_grpo(cfg: PipelineConfig, env, policy, key, start, log, mesh=None, logger: Logger = NullLogger()):
    """GRPO from `start` with KL to it -> (params, metrics, timing); every update to `logger`'s run "GRPO".
    `mesh`: group rollouts and chunks sharded."""
    run, per_update = np.array("GRPO", dtype=object), cfg.grpo.env_steps_per_update(env)
    feed = device_feed(logger, run, per_update)
    (params, m), c, r = _timed(make_grpo_train(cfg.grpo, env, policy, mesh=mesh, feed=feed), key, start)
    drain(feed)
    m = sharding.tree_to_host(m)
    log_history(logger, feed, run, m, per_update)
    steps = cfg.grpo.num_updates * cfg.grpo.env_steps_per_update(env)
    log(f"GRPO  : {cfg.grpo.num_updates} updates x {cfg.grpo.num_groups} groups x G={cfg.grpo.group_size} "
        f"= {steps:,} env steps; train return {m['episode_return'][0]:.2f} -> {m['episode_return'][-1]:.2f}; "
        f"KL(ref) {m['kl_ref'][-1]:.4f}; compile {c:.0f} s, run {r:.0f} s")
    return params, m, {"env_steps": steps, "compile_s": c, "train_s": r}


def run_ppo(cfg: PipelineConfig, env, policy, key, start, log, mesh=None, logger: Logger = NullLogger()):
    """PPO from `start` (actor and BC-fitted critic) with GRPO's env-step budget -> (params, metrics, timing);
    every update to `logger`'s run "PPO". `mesh`: the env batch and minibatches sharded (as `train.ppo.make_train`)."""
    pc = cfg.ppo
    P.check_minibatches(pc, mesh)
    run = np.array("PPO", dtype=object)
    feed = device_feed(logger, run, pc.num_envs * pc.num_steps)

    def train(rng, params):
        runner = P.init_runner(rng, pc.lr, pc, env, policy)
        runner = runner._replace(train_state=TrainState.create(apply_fn=None, params=params,
                                                               tx=P.make_optimizer(pc, pc.lr)))
        runner, metrics = jax.lax.scan(lambda rn, i: P.update_step(rn, i, env, policy, pc, mesh=mesh, feed=feed),
                                       P.shard_runner(runner, mesh), jnp.arange(pc.num_updates))
        return runner.train_state.params, metrics

    (params, m), c, r = _timed(train, key, start)
    drain(feed)
    m = sharding.tree_to_host(m)
    log_history(logger, feed, run, m, pc.num_envs * pc.num_steps)
    steps = pc.num_updates * pc.num_envs * pc.num_steps
    log(f"PPO   : {pc.num_updates} updates x {pc.num_envs} envs x {pc.num_steps} steps = {steps:,} env steps; "
        f"train return {m['episode_return'][0]:.2f} -> {m['episode_return'][-1]:.2f}; compile {c:.0f} s, run {r:.0f} s")
    return params, m, {"env_steps": steps, "compile_s": c, "train_s": r}


def pipeline_runs(cfg: PipelineConfig) -> dict:
    """The pipeline's runs for experiment tracking, each with its stage's config: BC, GRPO, PPO, evaluation."""
    shared = {"env_id": cfg.env_id, "env": cfg.env, "seed": cfg.seed, "hidden_size": cfg.hidden_size,
              "num_layers": cfg.num_layers, "activation": cfg.activation, "network": cfg.network, "memory": cfg.memory,
              "memory_size": cfg.memory_size}
    return {"BC": {**shared, **dataclasses.asdict(cfg.bc)}, "GRPO": {**shared, **dataclasses.asdict(cfg.grpo)},
            "PPO": cfg.ppo.to_dict(), EVALUATION: {**shared, "eval_episodes": cfg.eval_episodes,
                                                   "eval_seed": cfg.eval_seed}}


def write_outputs(out_dir: Path, cfg: PipelineConfig, md: str, notes: list, table: dict, timing: dict, metrics: dict,
                  episode_steps: int) -> dict:
    """pipeline.md, pipeline.png, pipeline.json and metrics_{bc,grpo,ppo}.jsonl -> the JSON result."""
    for name, m in metrics.items():
        with open(out_dir / f"metrics_{name}.jsonl", "w") as f:
            arrs = {k: np.asarray(v) for k, v in m.items() if np.ndim(v) == 1}
            n = max(len(v) for v in arrs.values())  # per update / epoch; BC's per-DAgger-round rows are shorter
            arrs = {k: v for k, v in arrs.items() if len(v) == n}
            for i in range(n):
                f.write(json.dumps({k: round(float(v[i]), 5) for k, v in arrs.items()}) + "\n")
    scripted = [k for k in table if k not in STAGES]
    best = max(scripted, key=lambda k: table[k]["return"]["mean"]) if scripted else None
    plot_pipeline_table({k: table[k] for k in (*STAGES, best) if k}, out_dir / "pipeline.png", METRICS)
    timing_rows = "\n".join(f"| {k} | {v['env_steps']:,} | {v['compile_s']:.0f} | {v['train_s']:.0f} |"
                            for k, v in timing.items() if isinstance(v, dict))
    with open(out_dir / "pipeline.md", "w") as f:
        f.write(f"# Pipeline `{cfg.name}`\n\n{md}\n\n" + "\n".join(f"- {n}" for n in notes) +
                f"\n\n| stage | env steps | compile s | train s |\n|---|---|---|---|\n{timing_rows}\n\n"
                f"evaluation: {cfg.eval_episodes} episodes x {episode_steps} steps per stage, same keys; "
                f"{timing['eval_s']:.0f} s\n")
    result = {"table": table, "notes": notes, "timing": timing,
              "bc_dagger": {k: np.asarray(v).tolist() for k, v in metrics["bc"].items() if k.startswith("dagger")},
              "config": {"bc": dataclasses.asdict(cfg.bc), "grpo": dataclasses.asdict(cfg.grpo),
                         "ppo": cfg.ppo.to_dict(), "env": cfg.env, "network": cfg.network, "seed": cfg.seed}}
    with open(out_dir / "pipeline.json", "w") as f:
        json.dump(result, f, indent=2, default=float)
    return result


def run_pipeline(cfg: PipelineConfig) -> dict | None:
    """random -> BC -> GRPO, and PPO from the BC start; every stage evaluated on the same keys; outputs written.

    `cfg.num_devices` != 1: every stage trains on the data mesh (over every process's devices in
    a multi-process run, where every process calls this); process 0 alone then evaluates, writes
    and returns the result, the others return None.
    """
    out_dir = Path(cfg.run_dir) / cfg.name
    mesh = sharding.mesh_for(cfg.num_devices)
    writer = is_main_process()
    if writer:
        out_dir.mkdir(parents=True, exist_ok=True)
    # The PPO stage's config carries the pipeline's env and network (train/config/pipeline.py): every stage's
    # env view and policy are the ones `python -m train` builds from it, the view unmasked.
    env = UnmaskedEnv.wrap(make_learner_env(cfg.ppo))
    policy = make_policy(cfg.ppo, env)
    k_init, k_bc, k_grpo, k_ppo = jax.random.split(jax.random.PRNGKey(cfg.seed), 4)
    obs, state = jax.vmap(env.reset)(jax.random.split(k_init, 2))
    params = {"random": policy.init(k_init, obs, jax.vmap(env.masks)(state))}
    T = cfg.grpo.steps(env)
    log = lambda msg: writer and print(msg, flush=True)  # noqa: E731
    obs_size = "entities" if cfg.network == "entity" else env.obs_dim  # an entity view has no single size
    log(f"env {cfg.env_id} {cfg.env}: learners {env.agents}, obs {obs_size}, network {cfg.network}, heads {env.nvec}, "
        f"episode {T} steps; policy unmasked; {jax.devices()[0].platform}"
        + (f", {mesh.size} devices" if mesh is not None else ""))
    timing, metrics = {}, {}
    logger = open_logger(cfg, out_dir, pipeline_runs(cfg), writer)
    params["BC"], metrics["bc"], timing["BC"] = run_bc(cfg, env, policy, k_bc, params["random"], log, mesh)
    log_epochs(logger, "BC", metrics["bc"], cfg.bc.epochs)
    params["GRPO"], metrics["grpo"], timing["GRPO"] = run_grpo(cfg, env, policy, k_grpo, params["BC"], log, mesh,
                                                               logger)
    params["PPO"], metrics["ppo"], timing["PPO"] = run_ppo(cfg, env, policy, k_ppo, params["BC"], log, mesh, logger)
    params = sharding.tree_to_host(params)  # every process (a gather); then process 0 evaluates on its own
    if not writer:
        return None
    timing["equal_wall"] = equal_wall_time({"GRPO": metrics["grpo"]["episode_return"],
                                            "PPO": metrics["ppo"]["episode_return"]}, timing)

    t0 = time.time()
    evaluator = make_stage_evaluator(env, policy, cfg.eval_episodes, T)
    key = jax.random.PRNGKey(cfg.eval_seed)
    raw = {stage: jax.device_get(evaluator(params[stage], key)) for stage in STAGES}
    if env.env.spec.npc_seats:  # the scripted baselines on the same keys (train.evaluate's candidates)
        scripted = make_scripted_evaluator(env, cfg.eval_episodes, T)
        raw.update({f"scripted: {name}": jax.device_get(scripted(jnp.int32(i), key))
                    for i, name in enumerate(baseline_names(env))})
    table = {row: summarise(raw[row]) for row in raw}
    timing["eval_s"] = time.time() - t0
    log(f"eval  : {cfg.eval_episodes} episodes x {T} steps per stage, same keys (seed {cfg.eval_seed}); "
        f"{timing['eval_s']:.0f} s")

    md = format_markdown(table)
    notes = verdicts(table, timing, raw)
    log("\n" + md + "\n\n" + "\n".join(f"- {n}" for n in notes))
    result = write_outputs(out_dir, cfg, md, notes, table, timing, metrics, T)
    logger.log_table(EVALUATION, "pipeline", [{"stage": st, **{f"{k}{part}": float(v[stat]) for k, v in table[st].items()
                                                               for part, stat in (("", "mean"), ("_ci95", "ci95"))}}
                                              for st in STAGES])
    for name in ("pipeline.png", "pipeline.md", "pipeline.json"):
        logger.log_artifact(EVALUATION, out_dir / name)
    logger.close()
    log(f"\nwrote {out_dir}/pipeline.md, pipeline.png, pipeline.json, metrics_{{bc,grpo,ppo}}.jsonl")
    return result


@entry_point("python -m train.pipeline")
def main(argv=None) -> int:
    ap = ArgumentParser(prog="python -m train.pipeline", description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=None, help="YAML (default: configs/pipeline.yaml)")
    ap.add_argument("overrides", nargs="*", help="key=value, e.g. grpo.kl_coef=0.1 env.max_steps=30 bc.epochs=10")
    args = ap.parse_args(argv)
    # XLA reads XLA_FLAGS when its backend starts (the first array: building the env's params starts
    # it), so the flags go in before the config is validated.
    if pipeline_values(args.config, args.overrides).get("xla_fast_compile", PipelineConfig.xla_fast_compile) is True:
        use_fast_compile()
    cfg = load_pipeline_config(args.config, args.overrides)  # ConfigError: one line, exit 2, nothing written

    enable_compilation_cache()
    t0 = time.time()
    if run_pipeline(cfg) is not None:  # None: not process 0 of a multi-process run
        print(f"pipeline wall time {time.time() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
