"""Masked recurrent IPPO as JaxMARL's `baselines/IPPO/ippo_rnn_smax.py` runs it, and MAPPO-RNN as
`baselines/MAPPO/mappo_rnn_mpe.py` runs it, re-implemented (our code).

Its data path: masks from `env.get_avail_actions(env_state.env_state)`, batchified to
(NUM_ACTORS, n); a GRU actor-critic whose logits are `logits - (1 - avail) * 1e10`; actions
sampled as (1, NUM_ACTORS), `unbatchify`d and `.squeeze()`d to scalars; a vmapped step; info
reshaped to NUM_ACTORS; GAE; PPO over minibatches of actors (whole sequences) with the
initial hidden state. `DEFAULT_CONFIG` is the upstream yaml's (ippo_rnn_smax.yaml), plus our
REWARD_SCALE (1.0, i.e. off, by default).

`--mappo` (`make_train(..., mappo=True)`) switches to mappo_rnn_mpe.py's data path: an unmasked GRU actor
on the agent's obs, a separate GRU critic on the world state (every agent's obs concatenated, repeated per
agent: what its `MPEWorldStateWrapper` builds, then swapaxes + reshape to NUM_ACTORS), `unbatchify`'s `(1,)`
actions handed to the env as they are (no `.squeeze()`), `MAPPO_CONFIG` (mappo_homogenous_rnn_mpe.yaml).
One difference: upstream trains actor and critic with two optimisers; here one Adam on the summed loss
(the same per-parameter updates, but the 0.5 grad-norm clip is over both).
`python -m experiments.ecosystem.ippo_rnn_masked` trains it on nexus-v0 (`--num-seeds`, vmapped), evaluates each seed's policy
against every NPC archetype in seat 0 (same keys, 95% CIs; with the flat format also the share of steps of
each action type) and writes the report and the trained params (a leading seed axis); `--params` evaluates a
run's saved params instead of training. Needs the `jaxmarl` extra.
"""
from __future__ import annotations

import functools
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

import distrax
import flax.linen as nn
import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.linen.initializers import constant, orthogonal
from flax.training.train_state import TrainState

import nexus_jax
import jaxmarl  # after nexus_jax (its XLA:CPU flag, experiments/ecosystem/ecosystem.py); the `jaxmarl` extra
from jaxmarl.wrappers.baselines import LogWrapper
from experiments.ecosystem.common import add_learning_run_args, as_summary, overrides
from experiments.ecosystem.ecosystem import evaluate as evaluate_policy, random_valid
from experiments.ecosystem.ippo_ff import batchify, clipped_loss, gae, unbatchify
from nexus_jax import rollout
from nexus_jax.cli import ArgumentParser, entry_point
from nexus_jax.envs.nexus import NPC_ARCHETYPES, NUM_ACTION_TYPES, ActionType, Archetype, npc_actions
from train.learner_env import LearnerEnv
from train.stats import ci_above, mean_ci

DEFAULT_CONFIG = {
    "LR": 0.004, "NUM_ENVS": 128, "NUM_STEPS": 128, "GRU_HIDDEN_DIM": 128, "FC_DIM_SIZE": 128,
    "TOTAL_TIMESTEPS": 1e7, "UPDATE_EPOCHS": 4, "NUM_MINIBATCHES": 4, "GAMMA": 0.99, "GAE_LAMBDA": 0.95,
    "CLIP_EPS": 0.05, "ENT_COEF": 0.01, "VF_COEF": 0.5, "MAX_GRAD_NORM": 0.25, "ANNEAL_LR": True,
    "REWARD_SCALE": 1.0,  # [ours] learning sees reward x this (1.0: as upstream; configs/ppo.yaml uses 0.1)
}
# baselines/MAPPO/config/mappo_homogenous_rnn_mpe.yaml (FLAIROx/JaxMARL), minus logging and seeds
MAPPO_CONFIG = {
    "LR": 2e-3, "NUM_ENVS": 16, "NUM_STEPS": 128, "TOTAL_TIMESTEPS": 1e7, "FC_DIM_SIZE": 128, "GRU_HIDDEN_DIM": 128,
    "UPDATE_EPOCHS": 4, "NUM_MINIBATCHES": 4, "GAMMA": 0.99, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2, "ENT_COEF": 0.01,
    "VF_COEF": 0.5, "MAX_GRAD_NORM": 0.5, "ANNEAL_LR": True, "REWARD_SCALE": 1.0,
}
OUT = Path(__file__).parent / "results" / "ippo_rnn_masked.json"


class ScannedGRU(nn.Module):
    """A GRU scanned over time; the carry resets to zeros where `resets` is set."""

    @functools.partial(nn.scan, variable_broadcast="params", in_axes=0, out_axes=0, split_rngs={"params": False})
    @nn.compact
    def __call__(self, carry, x):
        ins, resets = x
        carry = jnp.where(resets[:, None], jnp.zeros_like(carry), carry)
        return nn.GRUCell(features=ins.shape[1])(carry, ins)

    @staticmethod
    def initialize_carry(batch_size: int, hidden_size: int):
        return jnp.zeros((batch_size, hidden_size))


class ActorCriticRNN(nn.Module):
    """SMAX's shared GRU torso; with `mappo`, MAPPO's separate actor (obs) and critic (world state) GRUs,
    their two hidden states side by side in one (B, 2 * fc) carry."""

    action_dim: int
    fc: int
    gru: int
    mappo: bool = False

    @nn.compact
    def __call__(self, hidden, x):
        obs, dones, avail, world = x
        dense = lambda n, s: nn.Dense(n, kernel_init=orthogonal(s), bias_init=constant(0.0))  # noqa: E731
        h_a, h_c = jnp.split(hidden, 2, axis=-1) if self.mappo else (hidden, None)
        h_a, emb = ScannedGRU()(h_a, (nn.relu(dense(self.fc, np.sqrt(2))(obs)), dones))
        logits = dense(self.action_dim, 0.01)(nn.relu(dense(self.gru, 2)(emb)))
        pi = distrax.Categorical(logits=logits - (1 - avail) * 1e10)
        if self.mappo:
            h_c, c_emb = ScannedGRU()(h_c, (nn.relu(dense(self.fc, np.sqrt(2))(world)), dones))
            c = nn.relu(dense(self.gru, 2)(c_emb))
            hidden = jnp.concatenate([h_a, h_c], axis=-1)
        else:
            c, hidden = nn.relu(dense(self.fc, 2)(emb)), h_a
        return hidden, pi, jnp.squeeze(dense(1, 1.0)(c), -1)


def world_state(obs: dict, agents, num_actors: int):
    """MAPPO's world state per actor: every agent's obs concatenated, repeated per agent, agent-major."""
    ws = jnp.concatenate([obs[a] for a in agents], axis=-1)  # (NUM_ENVS, n * D)
    return jnp.broadcast_to(ws[None], (len(agents),) + ws.shape).reshape((num_actors, -1))


class Transition(NamedTuple):
    done: jnp.ndarray  # this step's done (GAE; upstream's `global_done`: nexus episodes end together)
    last_done: jnp.ndarray  # the done before this step (the GRU's reset input)
    action: jnp.ndarray
    value: jnp.ndarray
    reward: jnp.ndarray
    log_prob: jnp.ndarray
    obs: jnp.ndarray
    info: Any
    avail: jnp.ndarray
    world: jnp.ndarray  # MAPPO's critic input (the obs again without `mappo`; unused then)


def make_train(config: dict, env, mappo: bool = False) -> Callable:
    """`env` is wrapped in JaxMARL's LogWrapper; -> pure `train(rng)` and the network. `mappo`: MAPPO-RNN's data
    path (unmasked actor, world-state critic, (1,) actions; `MAPPO_CONFIG` the defaults)."""
    c = {**(MAPPO_CONFIG if mappo else DEFAULT_CONFIG), **config}
    c["NUM_ACTORS"] = env.num_agents * c["NUM_ENVS"]
    c["NUM_UPDATES"] = int(c["TOTAL_TIMESTEPS"] // c["NUM_STEPS"] // c["NUM_ENVS"])
    n_act = env.action_space(env.agents[0]).n
    net = ActorCriticRNN(n_act, c["FC_DIM_SIZE"], c["GRU_HIDDEN_DIM"], mappo)
    carry = c["FC_DIM_SIZE"] * (2 if mappo else 1)

    def inputs(obs, done, env_state):
        """(obs, done, avail, world) batched per actor; MAPPO's actor is unmasked."""
        if mappo:
            avail = jnp.ones((c["NUM_ACTORS"], n_act))
        else:
            avail = batchify(jax.vmap(env.get_avail_actions)(env_state.env_state), env.agents, c["NUM_ACTORS"])
        obs_batch = batchify(obs, env.agents, c["NUM_ACTORS"])
        world = world_state(obs, env.agents, c["NUM_ACTORS"]) if mappo else obs_batch
        return obs_batch, done, jax.lax.stop_gradient(avail), world

    def lr(count):
        return c["LR"] * (1.0 - (count // (c["NUM_MINIBATCHES"] * c["UPDATE_EPOCHS"])) / c["NUM_UPDATES"])

    def env_step(runner, unused):
        ts, env_state, last_obs, last_done, h, rng = runner
        rng, k_act, k_step = jax.random.split(rng, 3)
        x = inputs(last_obs, last_done, env_state)
        h, pi, value = net.apply(ts.params, h, jax.tree.map(lambda v: v[None], x))
        action = pi.sample(seed=k_act)
        log_prob = pi.log_prob(action)
        env_act = unbatchify(action, env.agents, c["NUM_ENVS"], env.num_agents)  # (1,) per agent
        if not mappo:  # ippo_rnn_smax.py squeezes them to scalars; mappo_rnn_mpe.py does not
            env_act = {k: v.squeeze() for k, v in env_act.items()}
        obsv, env_state, reward, done, info = jax.vmap(env.step)(jax.random.split(k_step, c["NUM_ENVS"]), env_state,
                                                                 env_act)
        info = jax.tree.map(lambda x: x.reshape((c["NUM_ACTORS"])), info)
        done_batch = batchify(done, env.agents, c["NUM_ACTORS"]).squeeze()
        reward_batch = c["REWARD_SCALE"] * batchify(reward, env.agents, c["NUM_ACTORS"]).squeeze()
        t = Transition(done_batch, last_done, action.squeeze(), value.squeeze(), reward_batch,
                       log_prob.squeeze(), x[0], info, x[2], x[3])
        return (ts, env_state, obsv, done_batch, h, rng), t

    def loss_fn(params, h0, traj, adv, targets):
        _, pi, value = net.apply(params, h0[0], (traj.obs, traj.last_done, traj.avail, traj.world))  # upstream: .squeeze()
        total, (_, _, entropy) = clipped_loss(pi, value, traj, adv, targets, c)
        return total, entropy

    def update_epoch(state, unused):
        ts, h0, traj, adv, targets, rng = state
        rng, k = jax.random.split(rng)
        perm = jax.random.permutation(k, c["NUM_ACTORS"])
        batch = (h0.reshape((1, c["NUM_ACTORS"], -1)), traj, adv, targets)
        batch = jax.tree.map(lambda x: jnp.take(x, perm, axis=1), batch)
        mbs = jax.tree.map(lambda x: jnp.swapaxes(jnp.reshape(x, [x.shape[0], c["NUM_MINIBATCHES"], -1] + list(x.shape[2:])),
                                                  1, 0), batch)

        def minibatch(ts, mb):
            (loss, ent), grads = jax.value_and_grad(loss_fn, has_aux=True)(ts.params, *mb)
            return ts.apply_gradients(grads=grads), {"total_loss": loss, "entropy": ent}

        ts, info = jax.lax.scan(minibatch, ts, mbs)
        return (ts, h0, traj, adv, targets, rng), info

    def train(rng):
        rng, k_init, k_reset = jax.random.split(rng, 3)
        h = ScannedGRU.initialize_carry(c["NUM_ENVS"], carry)
        obs_dim = env.observation_space(env.agents[0]).shape[0]
        init_x = (jnp.zeros((1, c["NUM_ENVS"], obs_dim)), jnp.zeros((1, c["NUM_ENVS"])), jnp.ones((1, c["NUM_ENVS"], n_act)),
                  jnp.zeros((1, c["NUM_ENVS"], obs_dim * (env.num_agents if mappo else 1))))
        params = net.init(k_init, h, init_x)
        tx = optax.chain(optax.clip_by_global_norm(c["MAX_GRAD_NORM"]),
                         optax.adam(learning_rate=lr if c["ANNEAL_LR"] else c["LR"], eps=1e-5))
        ts = TrainState.create(apply_fn=net.apply, params=params, tx=tx)
        obsv, env_state = jax.vmap(env.reset)(jax.random.split(k_reset, c["NUM_ENVS"]))
        h = ScannedGRU.initialize_carry(c["NUM_ACTORS"], carry)

        def update(runner, unused):
            h0 = runner[4]
            runner, traj = jax.lax.scan(env_step, runner, None, c["NUM_STEPS"])
            ts, env_state, last_obs, last_done, h, rng = runner
            obs_b, done_b, _, world = inputs(last_obs, last_done, env_state)
            avail = jnp.ones((c["NUM_ACTORS"], n_act))  # upstream bootstraps with every action allowed
            _, _, last_val = net.apply(ts.params, h, jax.tree.map(lambda v: v[None], (obs_b, done_b, avail, world)))
            adv, targets = gae(traj, last_val.squeeze(), c["GAMMA"], c["GAE_LAMBDA"])
            state, loss_info = jax.lax.scan(update_epoch, (ts, h0, traj, adv, targets, rng), None, c["UPDATE_EPOCHS"])
            ended = traj.info["returned_episode"]
            metric = {"episode_return": (traj.info["returned_episode_returns"] * ended).sum() / jnp.maximum(ended.sum(), 1),
                      "invalid": traj.info["invalid"].mean() if "invalid" in traj.info else jnp.nan,  # MPE has none
                      **jax.tree.map(lambda x: x.mean(), loss_info)}
            return (state[0], env_state, last_obs, last_done, h, state[-1]), metric

        runner = (ts, env_state, obsv, jnp.zeros((c["NUM_ACTORS"]), bool), h, rng)
        runner, metric = jax.lax.scan(update, runner, None, c["NUM_UPDATES"])
        return {"params": runner[0].params, "metrics": metric}

    return train, net


def evaluate(env, net, params, gru: int, episodes: int, seed: int, greedy: bool = False) -> dict:
    """Episodes of the trained GRU policy (sampled, or greedy: its most probable action; valid unless `net.mappo`,
    whose actor is unmasked) on seat agent_0 of a one-learner env (so MAPPO's world state is that seat's obs).
    `gru`: the carry's width."""
    agent, steps, n = env.agents[0], int(env.default_params.max_steps), env.action_space(env.agents[0]).n
    flat = env.action_format == "flat"  # then also the share of steps of each action type (decoded)

    @jax.jit
    def run(key):
        obs, state = jax.vmap(env.reset)(jax.random.split(key, episodes))

        def body(carry, k):
            obs, state, h, ret, inv = carry
            k_act, k_env = jax.random.split(k)
            avail = jnp.ones((episodes, n)) if net.mappo else jax.vmap(env.get_avail_actions)(state)[agent]
            x = (obs[agent], jnp.zeros(episodes, bool), avail, obs[agent])
            h, pi, _ = net.apply(params, h, jax.tree.map(lambda v: v[None], x))
            a = (pi.mode() if greedy else pi.sample(seed=k_act))[0]
            obs, state, rew, _, info = jax.vmap(env.step)(jax.random.split(k_env, episodes), state, {agent: a})
            types = jax.nn.one_hot(env.decode(a)[:, 0], NUM_ACTION_TYPES).mean(0) if flat else jnp.zeros(NUM_ACTION_TYPES)
            return (obs, state, h, ret + rew[agent], inv + info["invalid"][:, 0]), types

        init = (obs, state, jnp.zeros((episodes, gru)), jnp.zeros(episodes), jnp.zeros(episodes))
        (_, _, _, ret, inv), types = jax.lax.scan(body, init, jax.random.split(jax.random.fold_in(key, 1), steps))
        return ret, inv / steps, types.mean(0)

    ret, inv, types = jax.device_get(run(jax.random.PRNGKey(seed)))
    m, h = mean_ci(ret)
    out = {"return_mean": m, "return_ci95": h, "invalid_rate": float(inv.mean()), "episodes": episodes}
    if flat:
        out["action_type_share"] = {ActionType(i).name: round(float(v), 4) for i, v in enumerate(types)}
    return out


def evaluate_heuristics(env, episodes: int, seed: int) -> dict:
    """Each NPC archetype playing seat agent_0 (its economy kept: `behaviours` overridden there, as
    train/evaluate.py does), on the same episode keys as `evaluate` -> name -> return and CI."""
    steps, seat = int(env.default_params.max_steps), env.learner_seats[0]

    def one(arch, key):
        params = env.default_params
        params = params.replace(behaviours=params.behaviours.at[seat].set(arch))
        seat_env = LearnerEnv(env, "flat", params)  # agent_0's view in the rollout's protocol

        def act(k, obs, state, masks):
            rows = jax.vmap(lambda kk, s: npc_actions(kk, s, params, params.behaviours)[seat])(
                jax.random.split(k, episodes), state)
            return env.encode(rows)[:, None], None

        obs, state = jax.vmap(seat_env.reset)(jax.random.split(key, episodes))
        return rollout.evaluate_from(seat_env, act, obs, state, jax.random.split(jax.random.fold_in(key, 1), steps),
                                     rollout.batch_split(episodes), params).returns[:, 0]

    archs = jnp.asarray([int(a) for a in NPC_ARCHETYPES])
    rets = jax.device_get(jax.jit(jax.vmap(one, (0, None)))(archs, jax.random.PRNGKey(seed)))
    return {Archetype(int(a)).name.lower(): dict(zip(("return_mean", "return_ci95"), mean_ci(r)))
            for a, r in zip(archs, rets)}


def timed(train: Callable, seeds: list[int]) -> tuple[dict, dict]:
    """Compiles `vmap(train)` over the seeds, then runs it -> (output, compile and train seconds)."""
    keys = jnp.stack([jax.random.PRNGKey(s) for s in seeds])
    t0 = time.time()
    compiled = jax.jit(jax.vmap(train)).lower(keys).compile()
    compile_s, t0 = time.time() - t0, time.time()
    out = jax.block_until_ready(compiled(keys))
    return out, {"compile_s": round(compile_s, 1), "train_s": round(time.time() - t0, 1)}


@entry_point("python -m experiments.ecosystem.ippo_rnn_masked")
def main(argv=None) -> int:
    ap = ArgumentParser(description=__doc__.split("\n")[0])
    add_learning_run_args(ap, seed=0, eval_seed=1)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                    help="override upstream hyperparameters (e.g. GAMMA=1 GAE_LAMBDA=1); the run is then not 'defaults'")
    ap.add_argument("--mappo", action="store_true", help="MAPPO-RNN's data path (unmasked, world-state critic, its yaml)")
    ap.add_argument("--action-format", default=None, help="default: compact with --mappo, else flat")
    ap.add_argument("--mpe-steps", type=float, default=0, help="with --mappo: also time it on MPE_simple_spread_v3")
    ap.add_argument("--train-only", action="store_true",
                    help="skip the evaluations (they play seat agent_0 of a one-learner env; e.g. for nexus-selfplay-v0)")
    ap.add_argument("--heuristics-only", action="store_true", help="only evaluate the NPC archetypes in seat 0")
    ap.add_argument("--params", type=Path, default=None,
                    help="evaluate these trained params (a run's .msgpack, --num-seeds of them, the same --set) instead of training")
    args = ap.parse_args(argv)
    if args.heuristics_only:
        report = evaluate_heuristics(nexus_jax.make(args.env_id), args.episodes, args.eval_seed)
        print(json.dumps(report, indent=1))
        return report
    defaults = MAPPO_CONFIG if args.mappo else DEFAULT_CONFIG
    config = {"NUM_ENVS": args.num_envs, "TOTAL_TIMESTEPS": args.total_timesteps, **overrides(args.set, defaults)}
    c = {**defaults, **config}
    action_format = args.action_format or ("compact" if args.mappo else "flat")
    seeds = [args.seed + i for i in range(args.num_seeds)]
    base = nexus_jax.make(args.env_id, action_format=action_format)
    train, net = make_train(config, LogWrapper(base), args.mappo)
    carry = c["FC_DIM_SIZE"] * (2 if args.mappo else 1)
    report = {"command": "python -m experiments.ecosystem.ippo_rnn_masked " + " ".join(argv if argv is not None else sys.argv[1:]),
              "config": c, "mappo": args.mappo, "action_format": action_format, "seeds": seeds,
              "heuristics_in_seat_0": {}, "random_valid": {}, "per_seed": {}}
    if args.params:  # the params' tree from tracing the training (no compile), then the saved values
        keys = jnp.stack([jax.random.PRNGKey(s) for s in seeds])
        out = {"params": flax.serialization.from_bytes(jax.eval_shape(jax.vmap(train), keys)["params"],
                                                      args.params.read_bytes()), "metrics": None}
        report["train"] = {"params": str(args.params)}
    else:
        out, timing = timed(train, seeds)
        steps = int(c["TOTAL_TIMESTEPS"] // c["NUM_STEPS"] // c["NUM_ENVS"]) * c["NUM_STEPS"] * c["NUM_ENVS"]
        report["train"] = {**timing, "env_steps_per_seed": steps,
                           "env_steps_per_s": round(steps * len(seeds) / timing["train_s"])}
    m = jax.device_get(out["metrics"])
    if not args.train_only:
        report["heuristics_in_seat_0"] = evaluate_heuristics(nexus_jax.make(args.env_id), args.episodes, args.eval_seed)
        report["random_valid"] = {f: evaluate_policy(nexus_jax.make(args.env_id, action_format=f), random_valid,
                                                     args.episodes, args.eval_seed) for f in sorted({"flat", action_format})}
    print(json.dumps(report["train"]), flush=True)
    baselines = {**report["heuristics_in_seat_0"], **{f"random valid, {f}": v for f, v in report["random_valid"].items()}}
    for i, seed in enumerate(seeds):
        params = jax.tree.map(lambda x: x[i], out["params"])
        ev = {} if args.train_only else {
            how: evaluate(base, net, params, carry, args.episodes, args.eval_seed, greedy=how == "greedy")
            for how in ("sampled", "greedy")}
        k = 0 if m is None else max(m["episode_return"].shape[1] // 10, 1)
        report["per_seed"][seed] = {} if m is None else {
            "return_first_10pct": float(m["episode_return"][i, :k].mean()),
            "return_last_10pct": float(m["episode_return"][i, -k:].mean()),
            "invalid_first_10pct": float(m["invalid"][i, :k].mean()),
            "invalid_last_10pct": float(m["invalid"][i, -k:].mean())}
        report["per_seed"][seed].update(eval=ev, beats_beyond_ci={
            f"{how} > {name}": ci_above(as_summary(ev[how]), as_summary(h)) for how in ev for name, h in baselines.items()})
        print(seed, json.dumps(report["per_seed"][seed]), flush=True)
    if args.mpe_steps:  # the same trainer on MPE (no avail actions there: MAPPO only)
        mpe_cfg = {"NUM_ENVS": args.num_envs, "TOTAL_TIMESTEPS": args.mpe_steps}
        _, t_mpe = timed(make_train(mpe_cfg, LogWrapper(jaxmarl.make("MPE_simple_spread_v3")), mappo=True)[0], [args.seed])
        n = int(args.mpe_steps // c["NUM_STEPS"] // args.num_envs) * c["NUM_STEPS"] * args.num_envs
        report["mpe_simple_spread_v3"] = {**t_mpe, "env_steps": n, "env_steps_per_s": round(n / t_mpe["train_s"])}
        print("MPE:", report["mpe_simple_spread_v3"], flush=True)
    print(json.dumps(report, indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    if not args.params:
        args.out.with_suffix(".msgpack").write_bytes(flax.serialization.to_bytes(out["params"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
