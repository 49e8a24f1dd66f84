"""PureJaxRL's `purejaxrl/ppo.py` on nexus through the single-agent gymnax view, re-implemented (our code, its data path).

What is reproduced, because it is what an env must survive: `env, env_params = make_gymnax(...)` in
`gymnax.make`'s shape (`gymnax_v1=False`: the gymnax 0.0.x 5-tuple step PureJaxRL's wrappers unpack);
PureJaxRL's `FlattenObservationWrapper` + `LogWrapper` (`PureJaxRLWrappers`: the Box `isinstance` assert,
obs reshaped to (-1,), `returned_episode*` in info); `jax.vmap(env.step, in_axes=(0, 0, 0, None))` with
the params passed through; an unmasked FF actor-critic sampling a scalar action per env; GAE; clipped PPO
over minibatches of (NUM_STEPS x NUM_ENVS); the linear LR anneal. The network, GAE and update are
experiments/ecosystem/ippo_ff.py's (the same as ppo.py's); `DEFAULT_CONFIG` is ppo.py's `__main__` config.
`python -m experiments.ecosystem.purejaxrl_ppo` trains it on nexus-v0 (compact actions by default; `--num-seeds`, vmapped)
and evaluates each seed sampled and greedy against the random valid policy (experiments/ecosystem/ecosystem.py's
`evaluate`, same episode keys, 95% CIs). Needs the `jaxmarl` extra (gymnax, for the Box class).
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Callable, NamedTuple

# first: nexus_jax's XLA:CPU flag must precede the jaxmarl import (ecosystem.py) that starts the backend
import nexus_jax

import flax.serialization
import jax
import jax.numpy as jnp
import optax
from flax.training.train_state import TrainState

from experiments.ecosystem.common import add_learning_run_args, as_summary, overrides
from train.runtime import machine
from experiments.ecosystem.ecosystem import curve, evaluate, random_valid, show, trained_policy
from experiments.ecosystem.ippo_ff import ActorCritic, Transition, gae, sizes, update_epoch_fn
from nexus_jax.cli import ArgumentParser, entry_point
from train.stats import ci_above

# luchris429/purejaxrl purejaxrl/ppo.py, `config` under `__main__` (ENV_NAME and DEBUG dropped)
DEFAULT_CONFIG = {
    "LR": 2.5e-4, "NUM_ENVS": 4, "NUM_STEPS": 128, "TOTAL_TIMESTEPS": 5e5, "UPDATE_EPOCHS": 4,
    "NUM_MINIBATCHES": 4, "GAMMA": 0.99, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2, "ENT_COEF": 0.01,
    "VF_COEF": 0.5, "MAX_GRAD_NORM": 0.5, "ACTIVATION": "tanh", "ANNEAL_LR": True,
}
OUT = Path(__file__).parent / "results" / "purejaxrl_ppo.json"


class _LogState(NamedTuple):
    env_state: object
    episode_returns: jnp.ndarray
    returned_episode_returns: jnp.ndarray


class PureJaxRLWrappers:
    """The data path of PureJaxRL's `wrappers.py` (FlattenObservationWrapper + LogWrapper, written for
    gymnax 0.0.x; the repo imports brax and navix, so it is not importable here): assert the obs space
    `isinstance` gymnax's `spaces.Box`, reshape obs to (-1,), unpack a 5-tuple step, add returned_* to info."""

    def __init__(self, env, box_class):
        assert isinstance(env.observation_space(env.default_params), box_class), "Only Box spaces are supported"
        self._env = env

    def __getattr__(self, name):
        return getattr(self._env, name)

    def reset(self, key, params=None):
        obs, state = self._env.reset(key, params)
        return jnp.reshape(obs, (-1,)), _LogState(state, jnp.float32(0), jnp.float32(0))

    def step(self, key, state, action, params=None):
        obs, env_state, reward, done, info = self._env.step(key, state.env_state, action, params)
        ret = state.episode_returns + reward
        state = _LogState(env_state, ret * (1 - done), state.returned_episode_returns * (1 - done) + ret * done)
        info["returned_episode_returns"] = state.returned_episode_returns
        info["returned_episode"] = done
        return jnp.reshape(obs, (-1,)), state, reward, done, info


def make_train(config: dict, env, env_params, seat: int = 0) -> Callable:
    """`env` wrapped as PureJaxRL wraps it -> pure `train(rng)`. The rollout keeps the info leaves a curve
    needs (the learner seat's `invalid`, `returned_episode*`); ppo.py keeps the whole info."""
    c = {**DEFAULT_CONFIG, **config}
    c.update(sizes(c, 1))

    def linear_schedule(count):
        return c["LR"] * (1.0 - (count // (c["NUM_MINIBATCHES"] * c["UPDATE_EPOCHS"])) / c["NUM_UPDATES"])

    network = ActorCritic(env.action_space(env_params).n, activation=c["ACTIVATION"])
    update_epoch = update_epoch_fn(network, c)

    def env_step(runner, unused):
        ts, env_state, last_obs, rng = runner
        rng, k_act, k_step = jax.random.split(rng, 3)
        pi, value = network.apply(ts.params, last_obs)
        action = pi.sample(seed=k_act)
        obsv, env_state, reward, done, info = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
            jax.random.split(k_step, c["NUM_ENVS"]), env_state, action, env_params)
        info = {"invalid": info["invalid"][:, seat], "returned_episode": info["returned_episode"],
                "returned_episode_returns": info["returned_episode_returns"]}
        return (ts, env_state, obsv, rng), Transition(done, action, value, reward, pi.log_prob(action), last_obs, info)

    def train(rng):
        rng, k_init, k_reset = jax.random.split(rng, 3)
        params = network.init(k_init, jnp.zeros(env.observation_space(env_params).shape))
        tx = optax.chain(optax.clip_by_global_norm(c["MAX_GRAD_NORM"]),
                         optax.adam(learning_rate=linear_schedule if c["ANNEAL_LR"] else c["LR"], eps=1e-5))
        ts = TrainState.create(apply_fn=network.apply, params=params, tx=tx)
        obsv, env_state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(k_reset, c["NUM_ENVS"]), env_params)

        def update(runner, unused):
            runner, traj = jax.lax.scan(env_step, runner, None, c["NUM_STEPS"])
            ts, env_state, last_obs, rng = runner
            _, last_val = network.apply(ts.params, last_obs)
            adv, targets = gae(traj, last_val, c["GAMMA"], c["GAE_LAMBDA"])
            state, loss_info = jax.lax.scan(update_epoch, (ts, traj, adv, targets, rng), None, c["UPDATE_EPOCHS"])
            ended = traj.info["returned_episode"]
            metric = {"episode_return": (traj.info["returned_episode_returns"] * ended).sum() / jnp.maximum(ended.sum(), 1),
                      "invalid": traj.info["invalid"].mean(), **jax.tree.map(lambda x: x.mean(), loss_info)}
            return (state[0], env_state, last_obs, state[-1]), metric

        rng, k = jax.random.split(rng)
        runner, metric = jax.lax.scan(update, (ts, env_state, obsv, k), None, c["NUM_UPDATES"])
        return {"runner_state": runner, "metrics": metric}

    return train


@entry_point("python -m experiments.ecosystem.purejaxrl_ppo")
def main(argv=None) -> int:
    from gymnax.environments.spaces import Box  # the optional extra, only for this command

    ap = ArgumentParser(description=__doc__.split("\n")[0])
    add_learning_run_args(ap, seed=30, eval_seed=12345)
    ap.add_argument("--action-format", default="compact")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="override ppo.py's hyperparameters")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)

    config = {"NUM_ENVS": args.num_envs, "TOTAL_TIMESTEPS": args.total_timesteps, **overrides(args.set, DEFAULT_CONFIG)}
    base, env_params = nexus_jax.make_gymnax(args.env_id, gymnax_v1=False, action_format=args.action_format)
    train = jax.jit(jax.vmap(make_train(config, PureJaxRLWrappers(base, Box), env_params, base.seat)))
    seeds = [args.seed + i for i in range(args.num_seeds)]
    keys = jnp.stack([jax.random.PRNGKey(s) for s in seeds])
    t0 = time.time()
    compiled = train.lower(keys).compile()
    compile_s, t0 = time.time() - t0, time.time()
    out = jax.block_until_ready(compiled(keys))
    train_s = time.time() - t0
    c = {**DEFAULT_CONFIG, **config}
    steps = int(c["TOTAL_TIMESTEPS"] // c["NUM_STEPS"] // c["NUM_ENVS"]) * c["NUM_STEPS"] * c["NUM_ENVS"]
    report = {"command": "python -m experiments.ecosystem.purejaxrl_ppo " + " ".join(argv if argv is not None else sys.argv[1:]),
              "machine": machine(), "env_id": args.env_id, "action_format": args.action_format, "config": c,
              "train": {"compile_s": round(compile_s, 1), "train_s": round(train_s, 1), "env_steps_per_seed": steps,
                        "seeds": seeds, "env_steps_per_s": round(steps * len(seeds) / train_s)}}
    print(json.dumps(report["train"]), flush=True)
    multi = nexus_jax.make(args.env_id, action_format=args.action_format)  # the same seat, for evaluate's harness
    report["baselines"] = {
        "random valid, full flat space": evaluate(nexus_jax.make(args.env_id), random_valid, args.episodes, args.eval_seed),
        f"random valid, {args.action_format} space": evaluate(multi, random_valid, args.episodes, args.eval_seed)}
    show("", report["baselines"])
    report["per_seed"], params = {}, out["runner_state"][0].params
    n_act = base.action_space(env_params).n
    for i, seed in enumerate(seeds):
        p = jax.tree.map(lambda x: x[i], params)
        ev = {f"trained ({how})": evaluate(multi, trained_policy(p, n_act, c["ACTIVATION"], how == "greedy"),
                                          args.episodes, args.eval_seed) for how in ("sampled", "greedy")}
        report["per_seed"][seed] = {
            "train": curve(out["metrics"], i), "eval": ev,
            "beats_beyond_ci": {f"{a} > {b}": ci_above(as_summary(ev[a]), as_summary(report["baselines"][b]))
                                for a in ev for b in report["baselines"]}}
        show(f"seed {seed} ", ev)
        print(json.dumps(report["per_seed"][seed]["train"]), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    args.out.with_suffix(".msgpack").write_bytes(flax.serialization.to_bytes(params))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
