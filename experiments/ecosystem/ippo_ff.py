"""IPPO-FF as JaxMARL's `baselines/IPPO/ippo_ff_mpe.py` runs it, re-implemented (our code, their data path).

What is reproduced exactly, because it is what an env must survive: `env = LogWrapper(make(
ENV_NAME, **ENV_KWARGS))`; `batchify` (stack the agents' dicts, reshape to (NUM_ACTORS, -1));
an unmasked `distrax.Categorical` actor; `unbatchify` (reshape the (NUM_ACTORS,) actions to
(num_agents, NUM_ENVS, -1): a `(1,)` action per agent per env, with no `.squeeze()`); a vmapped
`env.step`; every `info` leaf reshaped to `(NUM_ACTORS,)`; GAE; clipped PPO with minibatches over
(NUM_STEPS x NUM_ACTORS); the linear LR anneal; `DEFAULT_CONFIG` is the upstream yaml's. Used by
`experiments.ecosystem.ecosystem` (the learning run) and tests/test_jaxmarl_compat.py (tiny sizes).
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import distrax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.linen.initializers import constant, orthogonal
from flax.training.train_state import TrainState

# baselines/IPPO/config/ippo_ff_mpe.yaml (FLAIROx/JaxMARL), minus logging and seeds.
DEFAULT_CONFIG = {
    "LR": 2.5e-4, "NUM_ENVS": 16, "NUM_STEPS": 128, "TOTAL_TIMESTEPS": 1e7, "UPDATE_EPOCHS": 4,
    "NUM_MINIBATCHES": 4, "GAMMA": 0.99, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2, "ENT_COEF": 0.01,
    "VF_COEF": 0.5, "MAX_GRAD_NORM": 0.5, "ACTIVATION": "tanh", "ANNEAL_LR": True,
}


class ActorCritic(nn.Module):
    """Two 64-unit layers for the actor and for the critic, orthogonal init (the upstream network)."""

    action_dim: int
    activation: str = "tanh"

    @nn.compact
    def __call__(self, x):
        act = nn.relu if self.activation == "relu" else nn.tanh
        dense = lambda n, s: nn.Dense(n, kernel_init=orthogonal(s), bias_init=constant(0.0))  # noqa: E731
        a = act(dense(64, np.sqrt(2))(act(dense(64, np.sqrt(2))(x))))
        pi = distrax.Categorical(logits=dense(self.action_dim, 0.01)(a))
        c = act(dense(64, np.sqrt(2))(act(dense(64, np.sqrt(2))(x))))
        return pi, jnp.squeeze(dense(1, 1.0)(c), axis=-1)


class Transition(NamedTuple):
    done: jnp.ndarray
    action: jnp.ndarray
    value: jnp.ndarray
    reward: jnp.ndarray
    log_prob: jnp.ndarray
    obs: jnp.ndarray
    info: Any


def batchify(x: dict, agent_list, num_actors):
    return jnp.stack([x[a] for a in agent_list]).reshape((num_actors, -1))


def unbatchify(x, agent_list, num_envs, num_agents):
    x = x.reshape((num_agents, num_envs, -1))
    return {a: x[i] for i, a in enumerate(agent_list)}


def sizes(config: dict, num_agents: int) -> dict:
    """The derived sizes upstream writes into its config."""
    num_actors = num_agents * config["NUM_ENVS"]
    return {"NUM_ACTORS": num_actors,
            "NUM_UPDATES": int(config["TOTAL_TIMESTEPS"] // config["NUM_STEPS"] // config["NUM_ENVS"]),
            "MINIBATCH_SIZE": num_actors * config["NUM_STEPS"] // config["NUM_MINIBATCHES"]}


def env_step_fn(env, network, config: dict) -> Callable:
    """One scan step of the rollout: upstream's `_env_step`."""
    c = config

    def _env_step(runner_state, unused):
        train_state, env_state, last_obs, rng = runner_state
        obs_batch = batchify(last_obs, env.agents, c["NUM_ACTORS"])
        rng, _rng = jax.random.split(rng)
        pi, value = network.apply(train_state.params, obs_batch)
        action = pi.sample(seed=_rng)
        log_prob = pi.log_prob(action)
        env_act = unbatchify(action, env.agents, c["NUM_ENVS"], env.num_agents)
        rng, _rng = jax.random.split(rng)
        rng_step = jax.random.split(_rng, c["NUM_ENVS"])
        obsv, env_state, reward, done, info = jax.vmap(env.step)(rng_step, env_state, env_act)
        info = jax.tree.map(lambda x: x.reshape((c["NUM_ACTORS"])), info)
        transition = Transition(batchify(done, env.agents, c["NUM_ACTORS"]).squeeze(), action, value,
                                batchify(reward, env.agents, c["NUM_ACTORS"]).squeeze(), log_prob, obs_batch, info)
        return (train_state, env_state, obsv, rng), transition

    return _env_step


def gae(traj, last_val, gamma: float, lam: float):
    def body(carry, t):
        g, next_value = carry
        delta = t.reward + gamma * next_value * (1 - t.done) - t.value
        g = delta + gamma * lam * (1 - t.done) * g
        return (g, t.value), g

    _, adv = jax.lax.scan(body, (jnp.zeros_like(last_val), last_val), traj, reverse=True, unroll=8)
    return adv, adv + traj.value


def clipped_loss(pi, value, traj, adv, targets, c: dict):
    """Upstream IPPO's PPO objective from the new policy and values -> (total, (value_loss, actor, entropy)):
    clipped surrogate on per-minibatch normalised advantages + clipped value loss - entropy bonus."""
    log_prob = pi.log_prob(traj.action)
    v_clip = traj.value + (value - traj.value).clip(-c["CLIP_EPS"], c["CLIP_EPS"])
    value_loss = 0.5 * jnp.maximum(jnp.square(value - targets), jnp.square(v_clip - targets)).mean()
    ratio = jnp.exp(log_prob - traj.log_prob)
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    actor = -jnp.minimum(ratio * adv, jnp.clip(ratio, 1.0 - c["CLIP_EPS"], 1.0 + c["CLIP_EPS"]) * adv).mean()
    entropy = pi.entropy().mean()
    return actor + c["VF_COEF"] * value_loss - c["ENT_COEF"] * entropy, (value_loss, actor, entropy)


def ppo_loss(network, config: dict) -> Callable:
    def loss_fn(params, traj, adv, targets):
        pi, value = network.apply(params, traj.obs)
        return clipped_loss(pi, value, traj, adv, targets, config)

    return loss_fn


def update_epoch_fn(network, config: dict) -> Callable:
    c = config
    grad_fn = jax.value_and_grad(ppo_loss(network, config), has_aux=True)

    def _update_minibatch(train_state, batch):
        (loss, aux), grads = grad_fn(train_state.params, *batch)
        return train_state.apply_gradients(grads=grads), {"total_loss": loss, "entropy": aux[2]}

    def _update_epoch(update_state, unused):
        train_state, traj, adv, targets, rng = update_state
        rng, _rng = jax.random.split(rng)
        batch_size = c["MINIBATCH_SIZE"] * c["NUM_MINIBATCHES"]
        perm = jax.random.permutation(_rng, batch_size)
        batch = jax.tree.map(lambda x: x.reshape((batch_size,) + x.shape[2:]), (traj, adv, targets))
        batch = jax.tree.map(lambda x: jnp.take(x, perm, axis=0), batch)
        minibatches = jax.tree.map(lambda x: jnp.reshape(x, [c["NUM_MINIBATCHES"], -1] + list(x.shape[1:])), batch)
        train_state, loss_info = jax.lax.scan(_update_minibatch, train_state, minibatches)
        return (train_state, traj, adv, targets, rng), loss_info

    return _update_epoch


def make_train(config: dict, env) -> Callable:
    """`env` is already wrapped (JaxMARL's LogWrapper); -> pure `train(rng)`, as upstream's `make_train`."""
    c = {**DEFAULT_CONFIG, **config, **sizes({**DEFAULT_CONFIG, **config}, env.num_agents)}

    def linear_schedule(count):
        return c["LR"] * (1.0 - (count // (c["NUM_MINIBATCHES"] * c["UPDATE_EPOCHS"])) / c["NUM_UPDATES"])

    def train(rng):
        network = ActorCritic(env.action_space(env.agents[0]).n, activation=c["ACTIVATION"])
        rng, _rng = jax.random.split(rng)
        params = network.init(_rng, jnp.zeros(env.observation_space(env.agents[0]).shape))
        lr = linear_schedule if c["ANNEAL_LR"] else c["LR"]
        tx = optax.chain(optax.clip_by_global_norm(c["MAX_GRAD_NORM"]), optax.adam(learning_rate=lr, eps=1e-5))
        train_state = TrainState.create(apply_fn=network.apply, params=params, tx=tx)
        rng, _rng = jax.random.split(rng)
        obsv, env_state = jax.vmap(env.reset)(jax.random.split(_rng, c["NUM_ENVS"]))
        env_step, update_epoch = env_step_fn(env, network, c), update_epoch_fn(network, c)

        def _update_step(runner_state, unused):
            runner_state, traj = jax.lax.scan(env_step, runner_state, None, c["NUM_STEPS"])
            train_state, env_state, last_obs, rng = runner_state
            _, last_val = network.apply(train_state.params, batchify(last_obs, env.agents, c["NUM_ACTORS"]))
            adv, targets = gae(traj, last_val, c["GAMMA"], c["GAE_LAMBDA"])
            update_state, loss_info = jax.lax.scan(update_epoch, (train_state, traj, adv, targets, rng), None,
                                                   c["UPDATE_EPOCHS"])
            metric = jax.tree.map(lambda x: x.mean(), traj.info)
            # upstream logs the mean over all steps; the mean over finished episodes is what a return curve needs
            ended = traj.info["returned_episode"]
            metric["episode_return"] = (traj.info["returned_episode_returns"] * ended).sum() / jnp.maximum(ended.sum(), 1)
            metric = {**metric, **jax.tree.map(lambda x: x.mean(), loss_info)}
            return (update_state[0], env_state, last_obs, update_state[-1]), metric

        rng, _rng = jax.random.split(rng)
        runner_state, metric = jax.lax.scan(_update_step, (train_state, env_state, obsv, _rng), None,
                                            c["NUM_UPDATES"])
        return {"runner_state": runner_state, "metrics": metric}

    return train
