"""The speed table of docs/performance.md in one process: nexus core, the env class, MPE and training, interleaved.

    python -m bench.speed                       # B=4096 env rows, PPO at 64 envs (~5 min on 2 cores)
    python -m bench.speed --batch 1024 --train-envs 64 256 --reps 3

Rows (each one jitted program, compiled first, then timed one call of each per round, best
round kept, so every ratio compares programs run under the same machine load):

- `nexus core`: `core.step` with every seat acting (`bench.common.plausible_actions`);
- `nexus-v0 env.step`: the JaxMARL-style class (dict API, auto-reset, 3 NPC seats inside),
  uniformly random flat actions for the learner, as `bench/npc_overhead.py`;
- `nexus-v0 env.step + masks`: the same, with the learner's factored masks computed each
  step (what our PPO's rollout does);
- `MPE_simple_spread_v3` (when jaxmarl is installed): JaxMARL's env in the same harness;
- `PPO train (E envs)`: `train.ppo`'s update loop as `make_train` runs it (rollout, GAE, epochs x
  minibatches; the one-off init apart) with configs/ppo.yaml at E envs, in env steps per second, next to the env
  class's raw rate at the same batch (`env.step + masks`, E envs); then its two halves apart, each in the env
  steps per second of training it would allow alone: `PPO rollout only` (policy + env) and `PPO update only`
  (GAE + epochs x minibatches on one fixed rollout).

Per row it also reports compile seconds, XLA's cost analysis (flops and bytes per env-step),
the memory-bound time per env-step (bytes / the copy bandwidth measured in this process) and
the kernel count of the optimized program. Writes bench/results/speed.json.
"""
from __future__ import annotations

import re
from pathlib import Path

import jax
import jax.numpy as jnp

import nexus_jax
from nexus_jax.cli import ArgumentParser, entry_point, positive_int
from bench.common import compile_timed, timed
from train.runtime import machine, write_report
from bench.env_throughput import multiagent_env_run, nexus_core_run
from nexus_jax.envs.nexus.params import NexusParams
from train.config import load_config
from train.networks import ActorCritic
from train.ppo import compute_gae, init_runner, make_env, rollout, update, update_step

OUT = Path(__file__).parent / "results" / "speed.json"


def learner_rollout(env, batch: int, steps: int, with_masks: bool):
    """key -> checksum: `batch` envs of a one-learner env stepped `steps` times with random flat actions."""
    agent = env.agents[0]
    n_act = env.action_space(agent).n

    def run(key):
        _, state = jax.vmap(env.reset)(jax.random.split(key, batch))

        def body(state, k):
            k_act, k_step = jax.random.split(k)
            extra = 0.0
            if with_masks:
                extra = sum(m.sum() for m in jax.tree.leaves(jax.vmap(env.factored_action_masks)(state)))
            acts = jax.random.randint(k_act, (batch,), 0, n_act)
            obs, state, rew, _, _ = jax.vmap(env.step)(jax.random.split(k_step, batch), state, {agent: acts})
            return state, obs[agent].sum() + rew[agent].sum() + extra

        return jax.lax.scan(body, state, jax.random.split(key, steps))[1].sum()

    return run


def ppo_updates(cfg):
    """-> (runner, {part: fn(runner)}): `train.ppo`'s update loop over `cfg.num_updates` updates from an
    initialised runner (`make_train` without its one-off init), and its two halves apart:

    - "train": rollout, GAE, epochs x minibatches, as `make_train` runs them;
    - "rollout": only the rollouts (the policy acting, env.step with masks, the transitions kept);
    - "update": only the learning (GAE + epochs x minibatches) on one fixed rollout, as many times.
    """
    env = make_env(cfg)
    policy = ActorCritic.from_config(cfg, env)
    runner = jax.jit(lambda k: init_runner(k, cfg.lr, cfg, env, policy))(jax.random.PRNGKey(0))
    _, traj = jax.jit(lambda r: rollout(r, env, policy, cfg.num_steps))(runner)
    steps = jnp.arange(cfg.num_updates)

    def train(runner):  # the final params are returned too: else XLA drops the last update (all of it at 1 update)
        final, metrics = jax.lax.scan(lambda r, i: update_step(r, i, env, policy, cfg), runner, steps)
        return metrics["episode_return"].sum(), jax.tree.leaves(final.train_state.params)[0].sum()

    def rollouts(runner):
        return jax.lax.scan(lambda r, i: (rollout(r, env, policy, cfg.num_steps)[0], None), runner, steps)[0].ep_return.sum()

    def updates(runner):
        def one(ts, i):
            adv, targets = compute_gae(traj.reward * cfg.reward_scale, traj.value, traj.done, traj.value[-1], cfg.gamma,
                                       cfg.gae_lambda)
            ts, aux = update(ts, traj, adv, targets, jax.random.fold_in(runner.rng, i), policy, cfg)
            return ts, aux["entropy"]
        return jax.lax.scan(one, runner.train_state, steps)[1].sum()

    return runner, {"train": train, "rollout": rollouts, "update": updates}


def ppo_share(envs: int, raw: float, train: float, rollout: float, update: float) -> str:
    """The PPO target's line: training's env-steps/s as a share of the env class's raw rate (env.step + masks)
    at the same batch, and what its two halves alone would allow."""
    return (f"PPO at {envs} envs: {train / raw:.2f} of the env class's raw rate (env.step + masks) at the same batch; "
            f"rollout alone {rollout / raw:.2f}, update alone {update / raw:.2f} (an update costs {rollout / update:.2f} "
            f"rollouts: with a free env, training could reach at most {update / raw:.2f} of raw)")


def mpe_rollout(batch: int, steps: int):
    import jaxmarl  # optional extra

    env = jaxmarl.make("MPE_simple_spread_v3")

    def actions(key, state):
        keys = jax.random.split(key, env.num_agents)
        return {a: env.action_space(a).sample(k) for a, k in zip(env.agents, keys)}

    return multiagent_env_run(env, steps, actions)


def copy_bandwidth() -> float:
    """Bytes/s of fused elementwise passes over a cache-sized array (read + write), this process, this load:
    the peak the env's small tables can hope for."""
    x = jnp.ones((2**20,), jnp.float32)  # 4 MiB
    passes = 200
    f = jax.jit(lambda v: jax.lax.fori_loop(0, passes, lambda i, u: u * 1.000001 + 1e-7, v))
    f(x).block_until_ready()
    return 2 * x.nbytes * passes / timed(f, x, reps=5)


def kernel_count(hlo: str) -> int:
    """Ops of the largest while body (the scan over steps) in an optimized HLO module: its fusions and
    unfused ops, each a kernel launch per step (a nested loop, such as a threefry draw, counts once)."""
    skip = {"parameter", "get-tuple-element", "tuple", "bitcast", "constant"}
    comps = dict(re.findall(r"\n(?:ENTRY )?%?([\w.\-]+) [^\n]*\{\n(.*?)\n\}", hlo, re.S))
    bodies = re.findall(r"body=%?([\w.\-]+)", hlo)
    if not bodies:
        return 0
    body = max((comps.get(name, "") for name in bodies), key=len)
    ops = re.findall(r"= \S+ ([\w\-]+)\(", body)
    return sum(op not in skip for op in ops)


def row(name, fn, args, env_steps: int, agents: int, bandwidth: float, batch: int | None = None):
    """Compile `fn(*args)` and describe it; the timing is added by `interleave`.

    XLA's cost analysis counts a loop body once, so the cost of one step of the scan is divided
    by its `batch` to give the cost per env-step (None: not a plain scan of env steps; no bound)."""
    compiled, compile_s = compile_timed(fn, *args)
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    flops, nbytes = float(cost.get("flops", 0.0)), float(cost.get("bytes accessed", 0.0))
    per = float(batch) if batch else float("nan")
    return {"name": name, "fn": compiled, "args": args, "env_steps": env_steps, "agents": agents,
            "compile_s": compile_s, "flops_per_env_step": flops / per, "bytes_per_env_step": nbytes / per,
            "bound_us_per_env_step": 1e6 * nbytes / per / bandwidth, "kernels": kernel_count(compiled.as_text())}


def interleave(rows, rounds: int, clock: str = "wall"):
    for r in rows:
        jax.block_until_ready(r["fn"](*r["args"]))
        r["best_s"] = float("inf")
    for _ in range(rounds):
        for r in rows:
            r["best_s"] = min(r["best_s"], timed(r["fn"], *r["args"], reps=1, clock=clock))
    for r in rows:
        r["env_steps_per_s"] = r["env_steps"] / r["best_s"]
        r["us_per_env_step"] = 1e6 / r["env_steps_per_s"]


@entry_point("python -m bench.speed")
def main(argv=None):
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=positive_int, default=4096, help="envs per call of the env rows (the target's B)")
    ap.add_argument("--steps", type=positive_int, default=100)
    ap.add_argument("--agents", type=positive_int, default=4)
    ap.add_argument("--train-envs", type=positive_int, nargs="*", default=[64], help="num_envs of the PPO rows ([] = none)")
    ap.add_argument("--train-updates", type=positive_int, default=4)
    ap.add_argument("--reps", type=positive_int, default=3, help="interleaved rounds; the best of each row is kept")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="cpu: CPU seconds of this process (steadier than wall time when other jobs share the cores)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    bw = copy_bandwidth()
    b, steps, n = args.batch, args.steps, args.agents
    key = jax.random.PRNGKey(0)
    env = nexus_jax.make("nexus-v0", num_agents=n)
    rows = [
        row(f"nexus core (all {n} seats act)", nexus_core_run(NexusParams.create(num_agents=n), steps),
            (jax.random.split(key, b),), b * steps, n, bw, b),
        row("nexus-v0 env.step", learner_rollout(env, b, steps, False), (key,), b * steps, n, bw, b),
        row("nexus-v0 env.step + masks", learner_rollout(env, b, steps, True), (key,), b * steps, n, bw, b),
    ]
    notes = []
    try:
        rows.append(row("MPE_simple_spread_v3", mpe_rollout(b, steps), (jax.random.split(key, b),), b * steps, 3, bw, b))
    except ImportError as e:
        notes.append(f"MPE not timed: {e}")
    for e in args.train_envs:
        cfg = load_config(overrides=[f"num_envs={e}", f"num_steps={steps}", "progress=false",
                                     f"total_timesteps={e * steps * args.train_updates}"])
        rows.append(row(f"nexus-v0 env.step + masks ({e} envs)", learner_rollout(env, e, steps, True), (key,),
                        e * steps, n, bw, e))
        runner, parts = ppo_updates(cfg)
        for part, label in (("train", "PPO train"), ("rollout", "PPO rollout only"), ("update", "PPO update only")):
            rows.append(row(f"{label} ({e} envs)", parts[part], (runner,), e * steps * args.train_updates, n, bw))
    interleave(rows, args.reps, args.clock)

    def rate(prefix):
        return next((r["env_steps_per_s"] for r in rows if r["name"].startswith(prefix)), None)

    mpe = rate("MPE")
    print(f"backend={jax.default_backend()} B={b} steps={steps} N={n} {args.clock} clock; copy bandwidth {bw / 1e9:.1f} GB/s; "
          f"load {machine()['load_average_1_5_15']}")
    print(f"{'row':<38}{'compile s':>10}{'env-steps/s':>13}{'÷ MPE':>7}{'µs/step':>9}{'bound µs':>9}"
          f"{'× bound':>8}{'kernels':>8}")  # bound: bytes XLA says a step moves / the copy bandwidth
    for r in rows:
        ratio = f"{r['env_steps_per_s'] / mpe:.2f}" if mpe else "-"
        print(f"{r['name']:<38}{r['compile_s']:>10.1f}{r['env_steps_per_s']:>13,.0f}{ratio:>7}"
              f"{r['us_per_env_step']:>9.2f}{r['bound_us_per_env_step']:>9.2f}"
              f"{r['us_per_env_step'] / max(r['bound_us_per_env_step'], 1e-9):>8.1f}{r['kernels']:>8}")
    for e in args.train_envs:
        print(ppo_share(e, rate(f"nexus-v0 env.step + masks ({e} envs)"), rate(f"PPO train ({e} envs)"),
                        rate(f"PPO rollout only ({e} envs)"), rate(f"PPO update only ({e} envs)")))
    for note in notes:
        print(note)
    keep = [{k: v for k, v in r.items() if k not in ("fn", "args")} for r in rows]
    write_report(args.out, {"args": {k: str(v) for k, v in vars(args).items()}, "copy_bandwidth_bytes_per_s": bw,
                            "rows": keep, "notes": notes, "machine": machine()}, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
