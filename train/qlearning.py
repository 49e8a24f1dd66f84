"""Tabular Q-learning baseline on crisis-v0 (the seed's Mode 1), jitted and vmappable over seeds and configs.

Each seat keeps its own Q-table over a small discretised view of its situation and learns
with the Bellman update, masked epsilon-greedy exploration, epsilon decaying per episode:
lr 0.15, gamma 0.95, epsilon 0.6 x 0.97 per episode down to 0.10 (SPEC.md section 4).
`make_train(env, num_episodes)(key, params, config)` runs the whole training in one jit.
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from nexus_jax.envs.crisis import GPU, now_hours, num_steps, ready, used

# Discretised state: running (2) x ready count 0/1/2+ (3) x most urgent ready deadline
# none/<1h/<2h/later (4) x GPU free (2) x contention last step (2) x I owe a yield (2).
NUM_STATES = 2 * 3 * 4 * 2 * 2 * 2


@struct.dataclass
class QConfig:
    lr: Any = 0.15  # [seed]
    gamma: Any = 0.95  # [seed]
    eps_start: Any = 0.6  # [spec]
    eps_decay: Any = 0.97  # per episode [spec]
    eps_min: Any = 0.10  # [spec]


def discretize(state, params) -> jax.Array:
    """(A,) state index per seat from its own tasks, the cluster and its contracts."""
    is_ready = ready(state)
    n_ready = jnp.minimum(jnp.sum(is_ready, 1), 2)
    left = jnp.where(is_ready, state.tasks.deadline_h - now_hours(state.step, params), jnp.inf).min(1)
    urg = jnp.where(jnp.isinf(left), 0, jnp.where(left < 1.0, 1, jnp.where(left < 2.0, 2, 3)))
    gpu_free = (state.capacity[GPU] - used(state)[GPU]) > 0
    contested = jnp.sum(state.last_requested) > 1
    owe = jnp.any(state.contract_open, axis=0)  # [creditor, debtor]: column = I am the debtor
    running = state.running_slot >= 0
    idx = running.astype(jnp.int32)
    for v, size in ((n_ready, 3), (urg, 4), (gpu_free, 2), (jnp.broadcast_to(contested, running.shape), 2), (owe, 2)):
        idx = idx * size + v.astype(jnp.int32)
    return idx


def epsilon(episode: jax.Array, config: QConfig) -> jax.Array:
    return jnp.maximum(config.eps_min, config.eps_start * config.eps_decay ** episode)


def select(key, q_rows, mask, eps) -> jax.Array:
    """Masked epsilon-greedy over (A, n) Q rows."""
    k1, k2 = jax.random.split(key)
    greedy = jnp.argmax(jnp.where(mask, q_rows, -jnp.inf), axis=1)
    rand = jax.random.categorical(k1, jnp.where(mask, 0.0, -jnp.inf))
    explore = jax.random.uniform(k2, greedy.shape) < eps
    return jnp.where(explore, rand, greedy).astype(jnp.int32)


def td_update(q, s, a, r, s_next, mask_next, done, config: QConfig):
    """One Bellman update per seat: Q[i, s, a] += lr (r + gamma max_a' Q[i, s', a'] - Q[i, s, a])."""
    A = q.shape[0]
    seats = jnp.arange(A)
    best_next = jnp.max(jnp.where(mask_next, q[seats, s_next], -jnp.inf), axis=1)
    best_next = jnp.where(jnp.isfinite(best_next), best_next, 0.0)
    target = r + config.gamma * best_next * (1.0 - done)
    old = q[seats, s, a]
    return q.at[seats, s, a].set(old + config.lr * (target - old))


def make_train(env, num_episodes: int):
    """Returns a pure `train(key, params, config) -> (q (A, S, n), per-episode metrics)`.

    Episodes run to the env's fixed length (`num_steps(params)` must equal the default 48 x
    scale; the scan length is env.default_params' episode length, static).
    """
    T = int(num_steps(env.default_params))
    n = env.num_actions

    def episode(carry, ep):
        q, key, params, config = carry
        key, k_reset, k_steps = jax.random.split(key, 3)
        _, state = env.reset_env(k_reset, params)
        eps = epsilon(ep, config)

        def step(c, k):
            q, state, ret = c
            s = discretize(state, params)
            mask = env.avail_actions_array(state, params)
            a = select(k, q[jnp.arange(q.shape[0]), s], mask, eps)
            _, nxt, r, done, info = env.step_env(k, state, a, params)
            q = td_update(q, s, a, r, discretize(nxt, params), env.avail_actions_array(nxt, params),
                          done.astype(jnp.float32), config)
            return (q, nxt, ret + r), info

        (q, state, ret), infos = jax.lax.scan(step, (q, state, jnp.zeros(env.num_agents)), jax.random.split(k_steps, T))
        last = jax.tree.map(lambda x: x[-1], infos)
        out = dict(total_reward=jnp.sum(ret), completion_rate=last["completion_rate"],
                   on_time_rate=last["on_time_rate"], fairness=last["fairness"],
                   belief_accuracy=last["belief_accuracy_mean"], epsilon=eps)
        return (q, key, params, config), out

    def train(key, params=None, config: QConfig = QConfig()):
        params = env.default_params if params is None else params
        q0 = jnp.zeros((env.num_agents, NUM_STATES, n))
        (q, _, _, _), metrics = jax.lax.scan(episode, (q0, key, params, config), jnp.arange(num_episodes))
        return q, metrics

    return train
