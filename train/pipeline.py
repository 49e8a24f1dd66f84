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
import os
import sys
import time
from pathlib import Path

import nexus_jax
from nexus_jax.cli import ArgumentParser, entry_point
from train.config import ConfigError, _numbers, parse_value, read_yaml, validate
from train.runtime import enable_compilation_cache
from train.stats import ci_above as beats, mean_ci

DEFAULT_PIPELINE = Path(__file__).resolve().parent.parent / "configs" / "pipeline.yaml"
_FAST_COMPILE = "--xla_cpu_use_fusion_emitters=false --xla_backend_optimization_level=0"

TOP_KEYS = {"name": str, "run_dir": str, "seed": int, "env_id": str, "env": dict, "hidden_size": int,
            "num_layers": int, "activation": str, "eval_episodes": int, "eval_seed": int, "xla_fast_compile": bool,
            "bc": dict, "grpo": dict, "ppo": dict}
# PPO keys the pipeline sets itself (same env, network and budget as GRPO).
PPO_FIXED = {"env_id", "env", "hidden_size", "num_layers", "activation", "total_timesteps", "action_head", "critic",
             "share_params", "seed", "name", "run_dir", "progress", "num_seeds", "lrs"}


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    name: str
    run_dir: str
    seed: int
    env_id: str
    env: dict
    hidden_size: int
    num_layers: int
    activation: str
    eval_episodes: int
    eval_seed: int
    xla_fast_compile: bool
    bc: object  # BCConfig
    grpo: object  # GRPOConfig
    ppo: object  # PPOConfig


def _set_dotted(values: dict, key: str, value) -> None:
    head, _, rest = key.partition(".")
    if rest:
        sub = values.setdefault(head, {})
        if not isinstance(sub, dict):
            raise ConfigError(f"config key {head!r} is not a section, got {sub!r}")
        sub[rest] = value
    else:
        values[key] = value


def _typed(cls, section: str, values: dict):
    """Build a frozen dataclass from a mapping, checking names and types (ints accepted for floats)."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    out = {}
    for k, v in values.items():
        if k not in fields:
            raise ValueError(f"config key '{section}.{k}': unknown (known: {sorted(fields)})")
        typ = type(getattr(cls(), k))
        if typ is float and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        if typ is float and isinstance(v, str):
            try:
                v = float(v)
            except ValueError:
                pass
        if not isinstance(v, typ) or (typ is int and isinstance(v, bool)):
            raise ValueError(f"config key '{section}.{k}': expected {typ.__name__}, got {v!r}")
        out[k] = v
    return cls(**out)


def load_pipeline_config(path=None, overrides: list[str] | None = None) -> PipelineConfig:
    """YAML defaults (configs/pipeline.yaml) + dotted `key=value` overrides, validated before compiling."""
    from train.bc import BCConfig
    from train.grpo import GRPOConfig

    values = read_yaml(path or DEFAULT_PIPELINE)
    for arg in overrides or []:
        if "=" not in arg:
            raise ConfigError(f"override {arg!r}: expected key=value")
        k, raw = arg.split("=", 1)
        _set_dotted(values, k.strip(), _numbers(parse_value(k.strip(), raw)))
    for k, v in values.items():
        if k not in TOP_KEYS:
            raise ConfigError(f"config key {k!r}: unknown (known: {sorted(TOP_KEYS)})")
        if not isinstance(v, TOP_KEYS[k]) or (TOP_KEYS[k] is int and isinstance(v, bool)):
            raise ConfigError(f"config key {k!r}: expected {TOP_KEYS[k].__name__}, got {v!r}")
    try:
        bc = _typed(BCConfig, "bc", values.get("bc", {})).validate()
        grpo = _typed(GRPOConfig, "grpo", values.get("grpo", {})).validate()
    except ValueError as e:
        raise ConfigError(str(e)) from e
    ppo_values = dict(values.get("ppo", {}))
    bad = sorted(set(ppo_values) & PPO_FIXED)
    if bad:
        raise ConfigError(f"config key 'ppo.{bad[0]}': set by the pipeline (same env, network and budget as GRPO)")
    env_kwargs = values.get("env", {})
    # The env's episode length decides GRPO's budget; build the env once (fails early on bad env keys).
    ppo_probe = validate({**ppo_values, "env_id": values.get("env_id", "nexus-v0"), "env": env_kwargs,
                          "total_timesteps": 10 ** 9, "progress": False})
    steps = grpo.episode_steps or int(nexus_jax.make(ppo_probe.env_id, **env_kwargs).default_params.max_steps)
    budget = grpo.num_updates * grpo.num_groups * grpo.group_size * steps
    per_update = ppo_probe.num_envs * ppo_probe.num_steps
    ppo = validate({**ppo_values, "env_id": ppo_probe.env_id, "env": env_kwargs, "progress": False,
                    "total_timesteps": max(per_update, round(budget / per_update) * per_update),
                    "hidden_size": values.get("hidden_size", 128), "num_layers": values.get("num_layers", 2),
                    "activation": values.get("activation", "tanh"), "seed": values.get("seed", 0),
                    "name": values.get("name", "pipeline")})
    top = {k: values[k] for k in TOP_KEYS if k in values and k not in ("bc", "grpo", "ppo")}
    defaults = dict(name="pipeline", run_dir="runs", seed=0, env_id="nexus-v0", env={}, hidden_size=128, num_layers=2,
                    activation="tanh", eval_episodes=500, eval_seed=12345, xla_fast_compile=True)
    return PipelineConfig(**{**defaults, **top}, bc=bc, grpo=grpo, ppo=ppo)


# ---- evaluation ------------------------------------------------------------------------------

METRICS = [  # key, column title, format
    ("return", "avg return", "{:.2f}"),
    ("invalid_rate", "invalid-action rate", "{:.2%}"),
    ("trade_completion", "trade completion", "{:.2%}"),
    ("signals_honoured", "signals honoured / ep", "{:.2f}"),
    ("signals_broken", "signals broken / ep", "{:.2f}"),
    ("trust", "mean trust in learner", "{:.3f}"),
]


def make_stage_evaluator(env, policy, num_episodes: int, num_steps: int | None = None):
    """-> jitted `evaluate(params, key) -> {metric: (E,)}`: the policy (sampling, unmasked under UnmaskedEnv)
    in the learner seat(s); per-episode metrics of the first learner seat. Same key = same episodes."""
    import jax
    import jax.numpy as jnp

    from train.envs import _seat

    num_steps = num_steps or env.max_steps
    s = _seat(env.agents[0], 0)

    def evaluate(params, key):
        k_reset, k_run = jax.random.split(key)
        obs, state = jax.vmap(env.reset)(jax.random.split(k_reset, num_episodes))
        z = jnp.zeros(num_episodes)
        acc0 = {k: z for k in ("return", "invalid", "steps", "trades", "proposals", "honoured", "broken", "trust")}

        def step(carry, k):
            obs, state, alive, acc = carry
            k_act, k_env = jax.random.split(k)
            action = policy.act(params, obs, jax.vmap(env.masks)(state), k_act)[0]
            n = state.trust.shape[-1]
            trust_in_me = (state.trust[:, :, s].sum(-1) - state.trust[:, s, s]) / max(n - 1, 1)
            obs, state, reward, done, info = jax.vmap(env.step)(jax.random.split(k_env, num_episodes), state, action)
            st = info["stats"]
            inv = jax.vmap(lambda i: env.learner_info(i, "invalid"))(info)[:, 0]
            both = lambda m: m[:, s, :].sum(-1) + m[:, :, s].sum(-1)  # noqa: E731
            upd = {"return": reward[:, 0], "invalid": inv.astype(jnp.float32), "steps": jnp.ones(num_episodes),
                   "trades": both(st["trades"]).astype(jnp.float32),
                   "proposals": both(st["proposals"]).astype(jnp.float32),
                   "honoured": st["signals_honoured"][:, s, :].sum(-1).astype(jnp.float32),
                   "broken": st["signals_broken"][:, s, :].sum(-1).astype(jnp.float32), "trust": trust_in_me}
            acc = {k: acc[k] + alive * upd[k] for k in acc}
            return (obs, state, alive * (1.0 - done), acc), None

        (_, _, _, acc), _ = jax.lax.scan(step, (obs, state, jnp.ones(num_episodes), acc0),
                                         jax.random.split(k_run, num_steps))
        steps = jnp.maximum(acc["steps"], 1.0)
        return {"return": acc["return"], "invalid_rate": acc["invalid"] / steps,
                "trade_completion": acc["trades"] / jnp.maximum(acc["proposals"], 1.0),
                "signals_honoured": acc["honoured"], "signals_broken": acc["broken"], "trust": acc["trust"] / steps}

    return jax.jit(evaluate)


def summarise(per_episode: dict) -> dict:
    return {k: dict(zip(("mean", "ci95"), mean_ci(v))) for k, v in per_episode.items()}


def format_markdown(table: dict) -> str:
    head = "| stage | " + " | ".join(t for _, t, _ in METRICS) + " |"
    lines = [head, "|---" * (len(METRICS) + 1) + "|"]
    for stage, row in table.items():
        cells = []
        for k, _, fmt in METRICS:
            m, ci = row[k]["mean"], row[k]["ci95"]
            cells.append(f"{fmt.format(m)} ± {fmt.format(ci).rstrip('%')}{'%' if fmt.endswith('%}') else ''}")
        lines.append(f"| {stage} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_table(table: dict, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stages = list(table)
    fig, axes = plt.subplots(1, len(METRICS), figsize=(3.2 * len(METRICS), 3.6))
    for ax, (k, title, _) in zip(axes, METRICS):
        means = [table[st][k]["mean"] for st in stages]
        cis = [table[st][k]["ci95"] for st in stages]
        ax.bar(range(len(stages)), means, yerr=cis, capsize=4, color=[f"C{i}" for i in range(len(stages))])
        ax.set_xticks(range(len(stages)))
        ax.set_xticklabels(stages, rotation=30, fontsize=8)
        ax.set_title(title, fontsize=9)
    fig.suptitle("random -> BC -> GRPO / PPO (unmasked policy, mean ± 95% CI over evaluation episodes)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def verdicts(table: dict, timing: dict, raw: dict | None = None) -> list[str]:
    out = []
    inv = {k: v["invalid_rate"]["mean"] for k, v in table.items()}
    met = inv["random"] > 0.3 and inv["BC"] < 0.02 and inv["GRPO"] < 0.02
    out.append(f"invalid-action rate: random {inv['random']:.1%} ({'>' if inv['random'] > 0.30 else '<='} 30%), "
               f"BC {inv['BC']:.2%}, GRPO {inv['GRPO']:.2%}, PPO {inv['PPO']:.2%} -> bar (BC and GRPO < 2% from a "
               f"random start > 30%): {'MET' if met else 'NOT met'}")
    r = {k: v["return"] for k, v in table.items()}
    for m in ("GRPO", "PPO"):
        paired = ""
        if raw is not None:  # same evaluation keys: the per-episode difference is a paired comparison
            d, ci = mean_ci(raw[m]["return"] - raw["BC"]["return"])
            paired = f"; paired difference on the same episodes {d:+.2f} ± {ci:.2f}"
        out.append(f"{m} vs BC on return: {r[m]['mean']:.2f} ± {r[m]['ci95']:.2f} vs {r['BC']['mean']:.2f} ± "
                   f"{r['BC']['ci95']:.2f} -> {'beats BC (non-overlapping 95% CIs)' if beats(r[m], r['BC']) else 'does NOT beat BC beyond the CIs'}"
                   f"{paired}")
    if beats(r["GRPO"], r["PPO"]):
        eq = "GRPO better than PPO (non-overlapping CIs)"
    elif beats(r["PPO"], r["GRPO"]):
        eq = "PPO better than GRPO (non-overlapping CIs)"
    else:
        eq = f"no significant difference (GRPO {r['GRPO']['mean']:.2f} vs PPO {r['PPO']['mean']:.2f}, CIs overlap)"
    out.append(f"equal env steps ({timing['GRPO']['env_steps']:,} GRPO vs {timing['PPO']['env_steps']:,} PPO): {eq}")
    out.append(timing["equal_wall"])
    return out


def equal_wall_time(curves: dict, timing: dict) -> str:
    """Training-curve returns of GRPO and PPO at the same training wall time (compile excluded)."""
    import numpy as np

    t_star = min(timing["GRPO"]["train_s"], timing["PPO"]["train_s"])
    vals = {}
    for m in ("GRPO", "PPO"):
        ret = np.asarray(curves[m])
        n = len(ret)
        u = max(1, min(n, int(round(n * t_star / timing[m]["train_s"]))))  # updates done by t_star
        k = max(1, n // 5)
        vals[m] = (float(ret[max(0, u - k):u].mean()), u, n)
    better = "GRPO" if vals["GRPO"][0] > vals["PPO"][0] else "PPO"
    return (f"equal wall time ({t_star:.0f} s of training, compile excluded; training-episode return over the last "
            f"fifth of the updates reached by then): GRPO {vals['GRPO'][0]:.2f} (update {vals['GRPO'][1]}/{vals['GRPO'][2]}),"
            f" PPO {vals['PPO'][0]:.2f} (update {vals['PPO'][1]}/{vals['PPO'][2]}) -> {better} higher "
            f"(single seed; training returns, not the evaluation keys)")


def _timed(fn, *args):
    """Compile, then run -> (output, compile seconds, run seconds)."""
    import jax

    t0 = time.time()
    compiled = jax.jit(fn).lower(*args).compile()
    t1 = time.time()
    out = jax.block_until_ready(compiled(*args))
    return out, t1 - t0, time.time() - t1


def run_pipeline(cfg: PipelineConfig) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax.training.train_state import TrainState

    from train import ppo as P
    from train.bc import UnmaskedEnv, make_bc_train
    from train.envs import LearnerEnv
    from train.grpo import make_grpo_train
    from train.networks import ActorCritic

    out_dir = Path(cfg.run_dir) / cfg.name
    out_dir.mkdir(parents=True, exist_ok=True)
    env = UnmaskedEnv.wrap(LearnerEnv.make(cfg.env_id, cfg.env, "factored"))
    policy = ActorCritic(env.num_learners, env.obs_dim, "factored", env.nvec, hidden=cfg.hidden_size,
                         layers=cfg.num_layers, activation=cfg.activation, critic="ippo", share_params=True)
    k_init, k_bc, k_grpo, k_ppo = jax.random.split(jax.random.PRNGKey(cfg.seed), 4)
    obs, state = jax.vmap(env.reset)(jax.random.split(k_init, 2))
    params0 = policy.init(k_init, obs, jax.vmap(env.masks)(state))
    T = cfg.grpo.steps(env)
    log = lambda msg: print(msg, flush=True)  # noqa: E731
    log(f"env {cfg.env_id} {cfg.env}: learners {env.agents}, obs {env.obs_dim}, heads {env.nvec}, episode {T} steps; "
        f"policy unmasked; {jax.devices()[0].platform}")
    timing, curves, params = {}, {}, {"random": params0}

    # BC
    bc_train = make_bc_train(cfg.bc, env, policy)
    (params["BC"], bc_m), c, r = _timed(bc_train, k_bc, params0)
    bc_m = jax.device_get(bc_m)
    timing["BC"] = {"env_steps": cfg.bc.num_envs * cfg.bc.num_steps, "compile_s": c, "train_s": r}
    teacher = cfg.bc.archetype + (f" + vault hedge (p={cfg.bc.hedge_prob:g})" if cfg.bc.hedge_prob else "")
    log(f"BC    : {cfg.bc.num_envs * cfg.bc.num_steps:,} {teacher} steps, {cfg.bc.epochs} epochs; "
        f"NLL {bc_m['nll'][0]:.3f} -> {bc_m['nll'][-1]:.3f}; teacher return {float(bc_m['behaviour_episode_return']):.2f}"
        f"; compile {c:.0f} s, run {r:.0f} s")
    if cfg.bc.dagger_rounds:
        log(f"BC    : {cfg.bc.dagger_rounds} DAgger rounds; the policy's own return "
            + " -> ".join(f"{x:.2f}" for x in bc_m["dagger_policy_return"]) + ", invalid rate "
            + " -> ".join(f"{x:.2%}" for x in bc_m["dagger_policy_invalid_rate"]))

    # GRPO from BC (KL to BC)
    grpo_train = make_grpo_train(cfg.grpo, env, policy)
    (params["GRPO"], g_m), c, r = _timed(grpo_train, k_grpo, params["BC"])
    g_m = jax.device_get(g_m)
    steps_g = cfg.grpo.num_updates * cfg.grpo.env_steps_per_update(env)
    timing["GRPO"] = {"env_steps": steps_g, "compile_s": c, "train_s": r}
    curves["GRPO"] = g_m["episode_return"]
    log(f"GRPO  : {cfg.grpo.num_updates} updates x {cfg.grpo.num_groups} groups x G={cfg.grpo.group_size} "
        f"= {steps_g:,} env steps; train return {g_m['episode_return'][0]:.2f} -> {g_m['episode_return'][-1]:.2f}; "
        f"KL(ref) {g_m['kl_ref'][-1]:.4f}; compile {c:.0f} s, run {r:.0f} s")

    # PPO from the same BC params, same env-step budget
    pc = cfg.ppo
    policy_ppo = ActorCritic(env.num_learners, env.obs_dim, "factored", env.nvec, hidden=cfg.hidden_size,
                             layers=cfg.num_layers, activation=cfg.activation, critic=pc.critic,
                             share_params=pc.share_params)

    def ppo_train(rng, start):
        runner = P.init_runner(rng, pc.lr, pc, env, policy_ppo)
        runner = runner._replace(train_state=TrainState.create(apply_fn=None, params=start,
                                                               tx=P.make_optimizer(pc, pc.lr)))
        runner, metrics = jax.lax.scan(lambda rn, i: P.update_step(rn, i, env, policy_ppo, pc), runner,
                                       jnp.arange(pc.num_updates))
        return runner.train_state.params, metrics

    (params["PPO"], p_m), c, r = _timed(ppo_train, k_ppo, params["BC"])
    p_m = jax.device_get(p_m)
    steps_p = pc.num_updates * pc.num_envs * pc.num_steps
    timing["PPO"] = {"env_steps": steps_p, "compile_s": c, "train_s": r}
    curves["PPO"] = p_m["episode_return"]
    log(f"PPO   : {pc.num_updates} updates x {pc.num_envs} envs x {pc.num_steps} steps = {steps_p:,} env steps; "
        f"train return {p_m['episode_return'][0]:.2f} -> {p_m['episode_return'][-1]:.2f}; compile {c:.0f} s, run {r:.0f} s")
    timing["equal_wall"] = equal_wall_time(curves, timing)

    # Evaluation: every stage on the same keys
    t0 = time.time()
    evaluator = make_stage_evaluator(env, policy, cfg.eval_episodes, T)
    key = jax.random.PRNGKey(cfg.eval_seed)
    table, raw = {}, {}
    for stage in ("random", "BC", "GRPO", "PPO"):
        raw[stage] = jax.device_get(evaluator(params[stage], key))
        table[stage] = summarise(raw[stage])
    timing["eval_s"] = time.time() - t0
    log(f"eval  : {cfg.eval_episodes} episodes x {T} steps per stage, same keys (seed {cfg.eval_seed}); "
        f"{timing['eval_s']:.0f} s")

    md = format_markdown(table)
    notes = verdicts(table, timing, raw)
    log("\n" + md + "\n\n" + "\n".join(f"- {n}" for n in notes))
    for name, m in (("bc", bc_m), ("grpo", g_m), ("ppo", p_m)):
        with open(out_dir / f"metrics_{name}.jsonl", "w") as f:
            arrs = {k: np.asarray(v) for k, v in m.items() if np.ndim(v) == 1}
            n = max(len(v) for v in arrs.values())  # per update / epoch; BC's per-DAgger-round rows are shorter
            arrs = {k: v for k, v in arrs.items() if len(v) == n}
            for i in range(n):
                f.write(json.dumps({k: round(float(v[i]), 5) for k, v in arrs.items()}) + "\n")
    plot_table(table, out_dir / "pipeline.png")
    timing_rows = "\n".join(f"| {k} | {v['env_steps']:,} | {v['compile_s']:.0f} | {v['train_s']:.0f} |"
                            for k, v in timing.items() if isinstance(v, dict))
    with open(out_dir / "pipeline.md", "w") as f:
        f.write(f"# Pipeline `{cfg.name}`\n\n{md}\n\n" + "\n".join(f"- {n}" for n in notes) +
                f"\n\n| stage | env steps | compile s | train s |\n|---|---|---|---|\n{timing_rows}\n\n"
                f"evaluation: {cfg.eval_episodes} episodes x {T} steps per stage, same keys; {timing['eval_s']:.0f} s\n")
    result = {"table": table, "notes": notes, "timing": timing,
              "bc_dagger": {k: np.asarray(v).tolist() for k, v in bc_m.items() if k.startswith("dagger")},
              "config": {"bc": dataclasses.asdict(cfg.bc), "grpo": dataclasses.asdict(cfg.grpo),
                         "ppo": cfg.ppo.to_dict(), "env": cfg.env, "seed": cfg.seed}}
    with open(out_dir / "pipeline.json", "w") as f:
        json.dump(result, f, indent=2, default=float)
    log(f"\nwrote {out_dir}/pipeline.md, pipeline.png, pipeline.json, metrics_{{bc,grpo,ppo}}.jsonl")
    return result


@entry_point("python -m train.pipeline")
def main(argv=None) -> int:
    ap = ArgumentParser(prog="python -m train.pipeline", description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=None, help="YAML (default: configs/pipeline.yaml)")
    ap.add_argument("overrides", nargs="*", help="key=value, e.g. grpo.kl_coef=0.1 env.max_steps=30 bc.epochs=10")
    args = ap.parse_args(argv)
    fast = read_yaml(args.config or DEFAULT_PIPELINE).get("xla_fast_compile", True)
    fast = {"xla_fast_compile=true": True, "xla_fast_compile=false": False}.get(
        next((o for o in args.overrides if o.startswith("xla_fast_compile=")), ""), fast)
    # XLA reads XLA_FLAGS when its backend starts (the first array: building the env's params starts
    # it), so the flags go in before the config is validated.
    if fast and _FAST_COMPILE not in os.environ.get("XLA_FLAGS", "") and os.environ.get("JAX_PLATFORMS", "cpu") == "cpu":
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _FAST_COMPILE).strip()
    cfg = load_pipeline_config(args.config, args.overrides)  # ConfigError: one line, exit 2, nothing written

    enable_compilation_cache()
    t0 = time.time()
    run_pipeline(cfg)
    print(f"pipeline wall time {time.time() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
