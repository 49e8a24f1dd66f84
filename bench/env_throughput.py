"""Environment throughput: nexus-v0 under jit + vmap + lax.scan vs the pure-Python reference and JaxMARL's MPE.

    python -m bench.env_throughput            # default cross of the grid (~10 minutes on a shared 2-core CPU)
    python -m bench.env_throughput --full     # every (N, B) pair
    python -m bench.env_throughput --quick    # a small subset
    python -m bench.env_throughput --agents 4 --batches 1 64 1024 4096 --no-compare  # nexus-v0 N=4 and crisis-v0

crisis-v0 rows (3 seats, its env class with auto-reset, uniformly random valid actions) are
measured at every batch size of the run unless `--no-crisis`.

Every JAX timing is one compiled call that resets B environments and runs a `lax.scan` of
`--steps` (100) steps over them, vmapped; compile time is reported separately, and the run
time is the best of `--reps` calls. Actions are drawn inside the scan by
`bench.common.plausible_actions` (mostly valid structured actions, O(N^2) per step; the flat
mask would be 12,703 actions per agent at N=64). Observations and rewards are folded into a
checksum so XLA cannot skip computing them. The reference steps one episode in plain
Python, with the same action distribution drawn on the host. Everything is measured in one
run; the table is printed and written to bench/results/env_throughput.json.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import nexus_jax
from nexus_jax.cli import ArgumentParser, entry_point, positive_int
from bench.common import compile_timed, host_plausible_actions, plausible_actions, timed
from train.runtime import machine, write_report
from nexus_jax.envs.nexus import core
from nexus_jax.envs.nexus.params import NexusParams
from nexus_jax.envs.nexus.reference import ReferenceNexus

BATCHES = (1, 64, 1024, 4096, 16384)
AGENTS = (4, 8, 16, 32, 64)
# Every (N, B) pair is its own XLA compilation (~15-50 s each for the vmapped scan on a
# shared 2-core CPU), so the default run measures a cross of the grid: every B at N=4, and
# every N at B=64 and B=1024. `--full` runs every pair within the cap.
CROSS_AGENTS = (4,)
CROSS_BATCHES = (64, 1024)
QUICK_BATCHES = (1, 1024, 4096)
QUICK_AGENTS = (4, 16)
COMPARE_BATCH = 4096  # MPE and the env class are timed here (the target's batch size)
# Largest B * N^2 run (work and memory grow with the ~12 (N, N) tables per env): N=32 up to
# B=1024, N=64 up to B=256. B=16384 at N=64 alone would be >10 GB and many minutes per call.
MAX_PAIRS = 1024 * 32 * 32
OUT = Path(__file__).parent / "results" / "env_throughput.json"


def nexus_core_run(params, steps: int, core=core):
    """keys (B, 2) -> checksum (B,): reset, then `steps` steps of the functional core with every seat acting.

    `core` is the module whose `reset`/`step` run (bench/ab.py passes another version's)."""

    def episode(key):
        k_reset, k_run = jax.random.split(key)
        obs, state = core.reset(k_reset, params)

        def body(carry, key):
            state, acc = carry
            k_act, k_step = jax.random.split(key)
            actions = plausible_actions(k_act, state, params)
            obs, state, reward, done, info = core.step(k_step, state, actions, params)
            return (state, acc + obs.sum() + reward.sum()), None

        (_, acc), _ = jax.lax.scan(body, (state, obs.sum()), jax.random.split(k_run, steps))
        return acc

    return jax.vmap(episode)


def multiagent_env_run(env, steps: int, actions_fn):
    """The same harness for a JaxMARL-style env object (dict API, auto-reset inside `step`)."""

    def episode(key):
        k_reset, k_run = jax.random.split(key)
        obs, state = env.reset(k_reset)

        def body(carry, key):
            state, acc = carry
            k_act, k_step = jax.random.split(key)
            obs, state, reward, done, info = env.step(k_step, state, actions_fn(k_act, state))
            acc = acc + sum(o.sum() for o in jax.tree.leaves(obs)) + sum(r.sum() for r in jax.tree.leaves(reward))
            return (state, acc), None

        (_, acc), _ = jax.lax.scan(body, (state, jnp.float32(0.0)), jax.random.split(k_run, steps))
        return acc

    return jax.vmap(episode)


def measure(name, run, batch, steps, agents, reps):
    keys = jax.random.split(jax.random.PRNGKey(batch), batch)
    compiled, compile_s = compile_timed(run, keys)
    run_s = timed(compiled, keys, reps=reps)
    env_steps = batch * steps / run_s
    row = dict(impl=name, agents=agents, batch=batch, steps=steps, compile_s=round(compile_s, 2),
               run_s=round(run_s, 4), env_steps_per_s=env_steps, agent_steps_per_s=env_steps * agents,
               us_per_agent_step=1e6 / (env_steps * agents))
    print(fmt(row), flush=True)
    return row


def reference_rate(n: int, steps: int, real, seconds: float = 3.0) -> dict:
    """Steps/s of the pure-Python reference on one episode of N agents (restarted every 100 steps)."""
    params = NexusParams.create(num_agents=n)
    rng = np.random.default_rng(0)
    ref = ReferenceNexus(real=real)
    done_steps, elapsed = 0, 0.0
    while done_steps < steps and elapsed < seconds:
        if done_steps % 100 == 0:
            ref.reset(params, rng.uniform(-1, 1, (n, 2)))
        actions = host_plausible_actions(ref, rng)
        noise = (rng.uniform(), rng.uniform())
        t0 = time.perf_counter()
        ref.step(actions, noise)
        elapsed += time.perf_counter() - t0
        done_steps += 1
    rate = done_steps / elapsed
    name = "reference (Python float)" if real is float else "reference (np.float32)"
    row = dict(impl=name, agents=n, batch=1, steps=done_steps, compile_s=0.0, run_s=round(elapsed, 4),
               env_steps_per_s=rate, agent_steps_per_s=rate * n, us_per_agent_step=1e6 / (rate * n))
    print(fmt(row), flush=True)
    return row


def fmt(row) -> str:
    return (f"{row['impl']:<28} N={row['agents']:>3} B={row['batch']:>6} compile {row['compile_s']:>6.1f}s "
            f"run {row['run_s']:>8.3f}s  {row['env_steps_per_s']:>12,.0f} env-steps/s  "
            f"{row['agent_steps_per_s']:>13,.0f} agent-steps/s  {row['us_per_agent_step']:>9.3f} us/agent-step")


def find(rows, impl_prefix, agents, batch):
    for r in rows:
        if r["impl"].startswith(impl_prefix) and r["agents"] == agents and r["batch"] == batch:
            return r
    return None


def try_mpe(steps, batches, reps, rows, notes):
    try:
        import jaxmarl  # noqa: F401
    except Exception as e:  # optional dependency
        notes.append(f"jaxmarl not importable ({type(e).__name__}: {e}); MPE not timed")
        return
    try:
        env = jaxmarl.make("MPE_simple_spread_v3")
        n_act = env.action_space(env.agents[0]).n

        def mpe_actions(key, state):
            ks = jax.random.split(key, env.num_agents)
            return {a: jax.random.randint(k, (), 0, n_act) for a, k in zip(env.agents, ks)}

        for b in batches:
            rows.append(measure("MPE_simple_spread_v3", multiagent_env_run(env, steps, mpe_actions),
                                b, steps, env.num_agents, reps))
        notes.append(f"jaxmarl {getattr(jaxmarl, '__version__', '?')}: MPE_simple_spread_v3 (3 agents, "
                     "uniform random discrete actions, JaxMARL's env.step with auto-reset)")
    except Exception as e:
        notes.append(f"MPE_simple_spread_v3 failed: {type(e).__name__}: {e}")


def try_nexus_env(steps, batches, reps, rows, notes):
    """nexus-v0 through the JaxMARL-style class (dict API, auto-reset, NPC seats), for the MPE comparison."""
    try:
        env = nexus_jax.make("nexus-v0")
        params = env.default_params

        def actions(key, state):
            act = plausible_actions(key, state, params)
            flat = env.encode(act)
            return {a: flat[i] for i, a in enumerate(env.agents)}

        for b in batches:
            rows.append(measure("nexus-v0 env (dict, reset)", multiagent_env_run(env, steps, actions),
                                b, steps, params.num_agents, reps))
        notes.append(f"'nexus-v0 env' = nexus_jax.make('nexus-v0').step: dicts, auto-reset, "
                     f"{len(env.agents)} learner seat(s), the other seats played by the env")
    except Exception as e:
        notes.append(f"nexus-v0 env class not timed: {type(e).__name__}: {e}")


def crisis_rows(steps, batches, reps, rows, notes):
    """crisis-v0 (3 seats) through its env class in the same harness: uniformly random valid flat actions, auto-reset."""
    try:
        env = nexus_jax.make("crisis-v0")
        params = env.default_params

        def actions(key, state):
            mask = env.avail_actions_array(state, params)
            return jax.random.categorical(key, jnp.where(mask, 0.0, -jnp.inf)).astype(jnp.int32)

        for b in batches:
            rows.append(measure("crisis-v0 env (dict, reset)", multiagent_env_run(env, steps, actions),
                                b, steps, env.num_agents, reps))
        notes.append("'crisis-v0 env' = nexus_jax.make('crisis-v0').step: 3 seats, uniformly random valid actions, "
                     "48-step episodes with auto-reset")
    except Exception as e:
        notes.append(f"crisis-v0 not timed: {type(e).__name__}: {e}")


@entry_point("python -m bench.env_throughput")
def main(argv=None):
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="N in (4, 16), B in (1, 1024, 4096)")
    ap.add_argument("--full", action="store_true", help="every (N, B) pair, not the default cross")
    ap.add_argument("--batches", type=positive_int, nargs="*", default=None)
    ap.add_argument("--agents", type=positive_int, nargs="*", default=None)
    ap.add_argument("--steps", type=positive_int, default=100, help="scan length")
    ap.add_argument("--reps", type=positive_int, default=3, help="timed calls per config (best is kept)")
    ap.add_argument("--max-pairs", type=positive_int, default=MAX_PAIRS, help="skip configs with B * N^2 above this")
    ap.add_argument("--no-compare", action="store_true", help="skip MPE and the env-class rows")
    ap.add_argument("--no-crisis", action="store_true", help="skip the crisis-v0 rows (one per batch size)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    batches = args.batches or (QUICK_BATCHES if args.quick else BATCHES)
    agents = args.agents or (QUICK_AGENTS if args.quick else AGENTS)

    started = time.time()
    info = {"command": "python -m bench.env_throughput " + " ".join(argv if argv is not None else os.sys.argv[1:]),
            "machine_before": machine()}
    print(f"jax {jax.__version__} on {jax.devices()}; load average {info['machine_before']['load_average_1_5_15']}")
    rows, notes, skipped = [], [], []

    cross = not (args.full or args.quick or args.batches or args.agents)
    for n in agents:
        params = NexusParams.create(num_agents=n)
        for b in batches:
            if cross and n not in CROSS_AGENTS and b not in CROSS_BATCHES:
                continue
            if b * n * n > args.max_pairs:
                skipped.append(dict(agents=n, batch=b))
                continue
            rows.append(measure("nexus-v0 core", nexus_core_run(params, args.steps), b, args.steps, n, args.reps))
    if skipped:
        notes.append(f"skipped (B*N^2 > {args.max_pairs}): " + ", ".join(f"N={s['agents']} B={s['batch']}" for s in skipped))

    ref_rows = [reference_rate(n, 300 if n <= 8 else 60, float) for n in agents]
    ref_rows.append(reference_rate(4, 300, np.float32))
    rows += ref_rows

    if not args.no_compare:
        cmp_batches = [COMPARE_BATCH] if COMPARE_BATCH in batches else batches[-1:]
        try_mpe(args.steps, cmp_batches, args.reps, rows, notes)
        try_nexus_env(args.steps, cmp_batches, args.reps, rows, notes)

    if not args.no_crisis:
        crisis_rows(args.steps, batches, args.reps, rows, notes)

    ratios = {}
    ref4 = find(rows, "reference (Python float)", 4, 1)
    for b in batches:
        core4 = find(rows, "nexus-v0 core", 4, b)
        if core4 and ref4:
            ratios[f"core_vs_reference_N4_B{b}"] = core4["env_steps_per_s"] / ref4["env_steps_per_s"]
        mpe = find(rows, "MPE", 3, b)
        if core4 and mpe:
            ratios[f"core_vs_mpe_env_steps_B{b}"] = core4["env_steps_per_s"] / mpe["env_steps_per_s"]
        envrow = find(rows, "nexus-v0 env", 4, b)
        if envrow and mpe:
            ratios[f"env_class_vs_mpe_env_steps_B{b}"] = envrow["env_steps_per_s"] / mpe["env_steps_per_s"]
    scaling = {}
    for b in batches:
        per = {n: find(rows, "nexus-v0 core", n, b) for n in agents}
        per = {n: r for n, r in per.items() if r}
        if len(per) > 1:
            scaling[f"B{b}"] = {n: round(r["us_per_agent_step"], 4) for n, r in per.items()}

    print("\nratios (same run):")
    for k, v in ratios.items():
        print(f"  {k:<36} {v:>12,.1f}x")
    print("time per agent-step (us) by N, at fixed B:")
    for k, v in scaling.items():
        print(f"  {k:<8} " + "  ".join(f"N={n}: {us:.3f}" for n, us in v.items()))
    for note in notes:
        print("note:", note)

    info.update(rows=rows, ratios=ratios, us_per_agent_step_by_n=scaling, notes=notes,
                machine_after=machine(), total_s=round(time.time() - started, 1))
    write_report(args.out, info, indent=2)


if __name__ == "__main__":
    main()
