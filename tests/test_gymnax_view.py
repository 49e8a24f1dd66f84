"""The single-agent gymnax view: PureJaxRL-shaped training runs on it unchanged."""
from typing import NamedTuple

import distrax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from nexus_jax.envs.nexus.gymnax_view import NexusGymnax

NUM_ENVS, NUM_STEPS, NUM_UPDATES = 4, 8, 2


@pytest.fixture(scope="module")
def env():
    return NexusGymnax.make("nexus-v0", max_steps=6)  # short episodes: the rollout crosses auto-resets


class ActorCritic(nn.Module):
    num_actions: int

    @nn.compact
    def __call__(self, x):
        h = nn.tanh(nn.Dense(32)(x))
        return nn.Dense(self.num_actions)(h), nn.Dense(1)(h)[..., 0]


class Transition(NamedTuple):
    obs: jnp.ndarray
    action: jnp.ndarray
    mask: jnp.ndarray
    reward: jnp.ndarray
    done: jnp.ndarray
    invalid: jnp.ndarray


def make_train(env, env_params):
    """PureJaxRL's shape: vmapped reset/step with params passed through, a scanned rollout, optax updates."""
    net = ActorCritic(env.action_space(env_params).n)
    tx = optax.adam(1e-3)

    def policy(params, obs, mask):
        logits, value = net.apply(params, obs)
        return distrax.Categorical(logits=jnp.where(mask, logits, -1e9)), value

    def train(rng):
        rng, k_init, k_reset = jax.random.split(rng, 3)
        params = net.init(k_init, jnp.zeros(env.observation_space(env_params).shape))
        opt = tx.init(params)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(k_reset, NUM_ENVS), env_params)

        def update(carry, _):
            params, opt, obs, state, rng = carry

            def env_step(c, _):
                obs, state, rng = c
                rng, k_act, k_step = jax.random.split(rng, 3)
                mask = jax.vmap(env.action_mask, in_axes=(0, None))(state, env_params)
                action = policy(params, obs, mask)[0].sample(seed=k_act)
                obs2, state2, reward, done, info = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                    jax.random.split(k_step, NUM_ENVS), state, action, env_params)
                return (obs2, state2, rng), Transition(obs, action, mask, reward, done, info["invalid"][:, env.seat])

            (obs, state, rng), traj = jax.lax.scan(env_step, (obs, state, rng), None, NUM_STEPS)

            def loss_fn(p):
                dist, value = policy(p, traj.obs, traj.mask)
                ret = jax.lax.stop_gradient(traj.reward)  # one-step targets are enough for a smoke loop
                adv = ret - jax.lax.stop_gradient(value)
                return -(dist.log_prob(traj.action) * adv).mean() + 0.5 * ((ret - value) ** 2).mean()

            loss, grads = jax.value_and_grad(loss_fn)(params)
            upd, opt = tx.update(grads, opt)
            params = optax.apply_updates(params, upd)
            return (params, opt, obs, state, rng), (loss, traj.done.sum(), traj.invalid.sum())

        (params, *_), metrics = jax.lax.scan(update, (params, opt, obs, state, rng), None, NUM_UPDATES)
        return params, metrics

    return train


def test_purejaxrl_shaped_loop_trains(env):
    train = jax.jit(make_train(env, env.default_params))
    params, (loss, dones, invalid) = train(jax.random.PRNGKey(0))
    assert np.isfinite(np.asarray(loss)).all()
    assert int(dones.sum()) == NUM_ENVS * 2  # 16 steps per env, episodes of 6: two ends each
    assert int(invalid.sum()) == 0  # masked sampling never picks an invalid action
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(params))


def test_gymnax_interface(env):
    p = env.default_params
    assert env.num_actions == env.action_space(p).n == 823
    assert env.observation_space(p).shape == (287,)
    key = jax.random.PRNGKey(0)
    obs, state = jax.eval_shape(env.reset, key, p)
    assert obs.shape == (287,)
    out = jax.eval_shape(env.step, key, state, jnp.int32(0), p)
    assert len(out) == 5 and out[2].shape == () and out[3].shape == () and "discount" in out[4]


def test_gymnax_own_wrappers_accept_it():
    purerl = pytest.importorskip("gymnax.wrappers.purerl")
    from importlib.metadata import version

    v1 = int(version("gymnax").split(".")[0]) >= 1  # gymnax 1.x: (obs, state, reward, terminated, truncated, info)
    env = NexusGymnax.make("nexus-v0", gymnax_v1=v1, max_steps=3)
    wrapped = purerl.LogWrapper(env)
    step = jax.jit(wrapped.step)
    obs, state = jax.jit(wrapped.reset)(jax.random.PRNGKey(0), env.default_params)
    for t in range(3):
        out = step(jax.random.PRNGKey(t), state, jnp.int32(0), env.default_params)
        state, info = out[1], out[-1]
    assert bool(info["returned_episode"]) and np.isfinite(float(info["returned_episode_returns"]))
