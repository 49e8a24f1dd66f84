"""`python -m experiments.ecosystem.ecosystem`: does JaxMARL's IPPO-FF, unmasked and with its default hyperparameters, learn nexus?

Trains `experiments.ecosystem.ippo_ff` (upstream's data path, our code) through JaxMARL's own `LogWrapper` on
`nexus_jax.make(ENV_ID, **ENV_KWARGS)` (default: nexus-v0 with `action_format="compact"`),
NUM_ENVS 64, 2M env steps, for `--num-seeds` seeds (vmapped); then evaluates >= 1000 episodes of
each trained policy (sampled, as it acts in training, and greedy: its most probable action) against
the random valid policy (uniform over the valid actions of the full flat space, and of the compact
space) on the same episode keys, with 95% CIs, the invalid-action rate and which actions it picks.
`--train-env KEY=VALUE ...` sets NexusParams fields of the env it trains on only (e.g. `vault_shaping=1`,
an opt-in reward timing that leaves every episode's return unchanged); the evaluations always play
`make(ENV_ID, action_format=...)` without them, so every return below is in SPEC's units.
Optionally times the same trainer on JaxMARL's MPE_simple_spread_v3 (`--mpe-steps`). Writes
experiments/ecosystem/results/ecosystem.json and the trained params beside it (.msgpack, a leading seed axis).
Needs the `jaxmarl` extra.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

# first: nexus_jax's XLA:CPU flag (xla_flags.py; without it the vmapped seeds hang) must precede jaxmarl's
# import, which starts the backend
import nexus_jax
from nexus_jax import rollout

import flax.serialization
import jax
import jax.numpy as jnp
import jaxmarl
import numpy as np
from jaxmarl.wrappers.baselines import LogWrapper

from experiments.ecosystem.common import add_learning_run_args, as_summary, overrides
from train.runtime import machine
from experiments.ecosystem.compact_hedge import WINDOWS
from nexus_jax.cli import ArgumentParser, UserInputError, entry_point
from experiments.ecosystem.ippo_ff import DEFAULT_CONFIG, ActorCritic, make_train
from train.learner_env import LearnerEnv
from train.stats import ci_above, mean_ci

OUT = Path(__file__).parent / "results" / "ecosystem.json"
BY_STEPS_MAX_ACTIONS = 64  # action shares by episode window only for spaces this small (a flat space's 823 per window are noise)


def evaluate(env, act_fn, episodes: int, seed: int) -> dict:
    """Episodes of `act_fn(key, obs (E, D), mask (E, n)) -> (E,)` on seat agent_0 -> return, invalid rate and
    the share of steps each action index was picked (what a policy does, e.g. whether greedy is WAIT-only),
    overall and over windows of the episode (`compact_hedge.WINDOWS`: e.g. VAULT early, UNVAULT late)."""
    agent = env.agents[0]
    steps, n = int(env.default_params.max_steps), env.action_space(agent).n

    seat = LearnerEnv(env, "flat")  # agent_0's view in the rollout's protocol

    def act(k, obs, state, masks):
        return act_fn(k, obs[:, 0], masks[:, 0])[:, None], None

    @jax.jit
    def run(key):
        obs, state = jax.vmap(seat.reset)(jax.random.split(key, episodes))
        ep = rollout.evaluate_from(seat, act, obs, state, jax.random.split(jax.random.fold_in(key, 1), steps),
                                   rollout.batch_split(episodes), trace=lambda s: jax.nn.one_hot(s.action[:, 0], n).mean(0))
        return ep.returns[:, 0], ep.invalid_rate[:, 0], ep.trace

    ret, inv, share = jax.device_get(run(jax.random.PRNGKey(seed)))  # share: (steps, n)
    m, h = mean_ci(ret)
    shares = lambda x: [round(float(v), 4) for v in x.mean(0)]  # noqa: E731
    out = {"return_mean": m, "return_ci95": h, "invalid_rate": float(inv.mean()), "episodes": episodes,
           "action_share": shares(share)}
    if n <= BY_STEPS_MAX_ACTIONS:
        out["action_share_by_steps"] = {f"{a}-{b - 1}": shares(share[a:b]) for a, b in WINDOWS if b <= steps}
    return out


def numbers(items: list[str]) -> dict:
    """KEY=VALUE strings -> {KEY: float}; `make` checks the keys and values (NexusParams.create)."""
    out = {}
    for item in items:
        key, _, value = item.partition("=")
        try:
            out[key] = float(value)
        except ValueError:
            raise UserInputError(f"--train-env {item!r}: expected KEY=NUMBER") from None
    return out


def random_valid(key, obs, mask):
    return jax.random.categorical(key, jnp.where(mask, 0.0, -1e9))


def trained_policy(params, num_actions: int, activation: str, greedy: bool = False):
    """The trained actor, unmasked: sampled (as it acts in training) or greedy (its most probable action)."""
    net = ActorCritic(num_actions, activation=activation)
    if greedy:
        return lambda key, obs, mask: net.apply(params, obs)[0].mode()
    return lambda key, obs, mask: net.apply(params, obs)[0].sample(seed=key)


def train_run(env_id: str, env_kwargs: dict, config: dict, seeds: list[int]) -> tuple[dict, dict, Any]:
    """Trains one policy per seed, vmapped in one compiled program (as upstream's `jax.vmap(train_jit)(rngs)`)."""
    make = nexus_jax.make if env_id in nexus_jax.registered_envs() else jaxmarl.make  # MPE: the comparison
    env = LogWrapper(make(env_id, **env_kwargs))
    keys = jnp.stack([jax.random.PRNGKey(s) for s in seeds])
    train = jax.jit(jax.vmap(make_train(config, env)))
    t0 = time.time()
    compiled = train.lower(keys).compile()
    compile_s = time.time() - t0
    t0 = time.time()
    out = jax.block_until_ready(compiled(keys))
    return out, {"compile_s": round(compile_s, 1), "train_s": round(time.time() - t0, 1)}, env


def load_params(path: Path, env, num_seeds: int):
    """A run's saved params (leading seed axis) for `env`'s actor-critic; a wrong file fails in flax's restore."""
    obs, _ = env.reset(jax.random.PRNGKey(0))
    template = ActorCritic(env.action_space(env.agents[0]).n).init(jax.random.PRNGKey(0), obs[env.agents[0]])
    template = jax.tree.map(lambda x: jnp.stack([x] * num_seeds), template)
    return flax.serialization.from_bytes(template, path.read_bytes())


def curve(metrics: dict, i: int) -> dict:
    """Seed i's training curve: first and last 10% of the updates."""
    m = jax.tree.map(lambda x: np.asarray(x)[i], jax.device_get(metrics))
    k = max(len(m["episode_return"]) // 10, 1)
    out = {"return_first_10pct": float(np.mean(m["episode_return"][:k])),
           "return_last_10pct": float(np.mean(m["episode_return"][-k:])),
           "entropy_first": float(m["entropy"][0]), "entropy_last": float(m["entropy"][-1])}
    if "invalid" in m:
        out.update(invalid_first_10pct=float(np.mean(m["invalid"][:k])), invalid_last_10pct=float(np.mean(m["invalid"][-k:])))
    return out


def show(prefix: str, evals: dict) -> None:
    for k, v in evals.items():
        top = sorted(range(len(v["action_share"])), key=lambda i: -v["action_share"][i])[:4]
        print(f"{prefix}{k:36s} return {v['return_mean']:8.2f} ± {v['return_ci95']:.2f}   "
              f"invalid {v['invalid_rate']:.3f}"
              "   most picked " + ", ".join(f"{i}: {v['action_share'][i]:.2f}" for i in top), flush=True)


@entry_point("python -m experiments.ecosystem.ecosystem")
def main(argv=None) -> int:
    ap = ArgumentParser(description=__doc__.split("\n")[0])
    add_learning_run_args(ap, seed=30, eval_seed=12345)  # the upstream yaml's SEED
    ap.add_argument("--action-format", default="compact")
    ap.add_argument("--mpe-steps", type=float, default=0, 
                    help="also time IPPO-FF on MPE_simple_spread_v3, one seed (0: skip; compare at --num-seeds 1)")
    ap.add_argument("--train-env", nargs="*", default=[], metavar="KEY=VALUE",
                    help="NexusParams overrides (numbers) of the training env only, e.g. vault_shaping=1")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                    help="override upstream hyperparameters (e.g. GAMMA=1 GAE_LAMBDA=1); the run is then not 'defaults'")
    ap.add_argument("--params", type=Path, default=None,
                    help="evaluate these trained params (a run's .msgpack, --num-seeds of them) instead of training")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)

    config = {"NUM_ENVS": args.num_envs, "TOTAL_TIMESTEPS": args.total_timesteps, **overrides(args.set, DEFAULT_CONFIG)}
    env_kwargs = {"action_format": args.action_format}
    env_kwargs.update(numbers(args.train_env))
    seeds = [args.seed + i for i in range(args.num_seeds)]
    report = {"command": "python -m experiments.ecosystem.ecosystem " + " ".join(argv if argv is not None else sys.argv[1:]),
              "machine": machine(), "env_id": args.env_id, "env_kwargs": env_kwargs, "config": config}
    if args.params:
        env, out = nexus_jax.make(args.env_id, **env_kwargs), None
        params = load_params(args.params, env, len(seeds))
        report["train"] = {"params": str(args.params), "seeds": seeds}
    else:
        out, timing, env = train_run(args.env_id, env_kwargs, config, seeds)
        params = out["runner_state"][0].params
        steps = int(args.total_timesteps // (128 * args.num_envs)) * 128 * args.num_envs
        report["train"] = {**timing, "env_steps_per_seed": steps, "seeds": seeds,
                           "env_steps_per_s": round(steps * len(seeds) / timing["train_s"])}
    print(json.dumps(report["train"]), flush=True)

    n_act = env.action_space(env.agents[0]).n
    flat, plain = nexus_jax.make(args.env_id), nexus_jax.make(args.env_id, action_format=args.action_format)
    report["baselines"] = {
        "random valid, full flat space": evaluate(flat, random_valid, args.episodes, args.eval_seed),
        f"random valid, {args.action_format} space": evaluate(plain, random_valid, args.episodes, args.eval_seed),
    }
    show("", report["baselines"])
    report["per_seed"] = {}
    for i, seed in enumerate(seeds):
        p = jax.tree.map(lambda x: x[i], params)
        ev = {f"trained ({how})": evaluate(plain, trained_policy(p, n_act, "tanh", how == "greedy"), args.episodes,
                                          args.eval_seed) for how in ("sampled", "greedy")}
        beats = {f"{a} > {b}": ci_above(as_summary(ev[a]), as_summary(report["baselines"][b]))
                 for a in ev for b in report["baselines"]}
        report["per_seed"][seed] = {"eval": ev, "beats_beyond_ci": beats}
        if out is not None:
            report["per_seed"][seed]["train"] = curve(out["metrics"], i)
        show(f"seed {seed} ", ev)
    if args.mpe_steps:
        mpe_cfg = {"NUM_ENVS": args.num_envs, "TOTAL_TIMESTEPS": args.mpe_steps}
        _, t_mpe, _ = train_run("MPE_simple_spread_v3", {}, mpe_cfg, [args.seed])
        n = int(args.mpe_steps // (128 * args.num_envs)) * 128 * args.num_envs
        report["mpe_simple_spread_v3"] = {**t_mpe, "env_steps": n, "env_steps_per_s": round(n / t_mpe["train_s"])}
        print("MPE:", report["mpe_simple_spread_v3"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    if out is not None:
        args.out.with_suffix(".msgpack").write_bytes(flax.serialization.to_bytes(params))
    print(f"wrote {args.out}" + ("" if out is None else f" and the trained params ({args.out.with_suffix('.msgpack').name})"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
