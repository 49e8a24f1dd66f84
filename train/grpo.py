"""GRPO on device: critic-free group-relative policy optimisation, PureJaxRL style.

Each update rolls B groups of G episodes. The G members of a group share the reset key
(same endowments) and, when `share_step_keys`, every step key too (same shock draws and
NPC random draws; the learners' own action keys always differ). The group is the
baseline: a learner's advantage is (return - group mean) / (group std + eps), per episode
(`adv_mode=episode`, the return broadcast to every step) or per step (`adv_mode=step`:
return-to-go at step t against the group's returns-to-go at step t). Statistics are per
learner seat (`pool_agents=false`) or pooled over the learner seats. The loss is the
PPO-clip surrogate plus `kl_coef` x KL(policy || reference) (the k3 estimator
exp(r) - r - 1 with r = log pi_ref - log pi, zero exactly when the policies agree) minus
an optional entropy bonus. No value network.

A recurrent policy (`memory: gru`) carries its memory and the reference policy's through the rollout
(both from zeros at the reset), and the loss replays each member's episode from a zero memory.

Memory. The trajectory is T x B x G samples. Rollouts run `group_chunk` groups at a
time (`lax.map`), and each minibatch's gradient is accumulated over chunks of
`group_chunk` groups (`lax.scan`), so activations and env work live for one chunk only;
`group_chunk=0` does a whole minibatch at once. `memory_report` measures the compiled
update with `memory_analysis()` (see docs/training.md, GRPO section).
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax.training.train_state import TrainState

from nexus_jax import sharding
from train.config import GRPOConfig
from train.learner_env import LearnerEnv
from train.memory import first_steps
from train.minibatches import scan_shuffled
from nexus_jax import rollout
from train.networks import ActorCritic
from train.tracking import DeviceFeed


class GroupBatch(NamedTuple):
    """A GRPO rollout, group-major: arrays are (B, T, G, A, ...) (alive: (B, T, G))."""

    obs: Any  # an array, or a pytree of them (the entity view's EntityObs)
    masks: Any
    action: jnp.ndarray
    log_prob: jnp.ndarray  # behaviour (old) policy
    ref_log_prob: jnp.ndarray  # reference policy, fixed for the update
    reward: jnp.ndarray  # 0 after the episode ended
    alive: jnp.ndarray  # the step belongs to the group member's episode
    invalid: jnp.ndarray
    resets: Any = None  # a recurrent policy's (B, T, G): the step starts an episode after step 0 (memory reset)


# ---- advantages --------------------------------------------------------------------------

def _normalise(x, eps, axes):
    mean = x.mean(axes, keepdims=True)
    std = x.std(axes, keepdims=True)  # population std (ddof=0)
    return (x - mean) / (std + eps)


def group_advantages(returns, eps: float = 1e-8, pool_agents: bool = False):
    """returns (B, G, A) -> (R - mean_G) / (std_G + eps), statistics over the group axis (and A if pooled)."""
    return _normalise(returns, eps, (1, 2) if pool_agents else (1,))


def step_advantages(rewards, gamma: float = 1.0, eps: float = 1e-8, pool_agents: bool = False):
    """rewards (B, T, G, A) -> per-step group advantages: each return-to-go at step t normalised
    against the group's returns-to-go at the same step t."""
    def body(c, r):
        c = r + gamma * c
        return c, c

    _, rtg = jax.lax.scan(body, jnp.zeros_like(rewards[:, 0]), jnp.moveaxis(rewards, 1, 0), reverse=True)
    rtg = jnp.moveaxis(rtg, 0, 1)
    return _normalise(rtg, eps, (2, 3) if pool_agents else (2,))


def advantages(batch: GroupBatch, cfg: GRPOConfig):
    """(B, T, G, A) advantages of a rollout, per episode or per step.

    `cfg.invalid_penalty` is charged per invalid action on top of the env's reward, in these
    returns only (the analogue of the seed's format reward for parse errors).
    """
    reward = batch.reward - cfg.invalid_penalty * batch.invalid if cfg.invalid_penalty else batch.reward
    if cfg.adv_mode == "step":
        return step_advantages(reward, cfg.gamma, cfg.adv_eps, cfg.pool_agents)
    adv = group_advantages(reward.sum(1), cfg.adv_eps, cfg.pool_agents)  # (B, G, A)
    return jnp.broadcast_to(adv[:, None], reward.shape)


# ---- rollout -----------------------------------------------------------------------------

def rollout_groups(params, ref_params, rng, env: LearnerEnv, policy: ActorCritic, cfg: GRPOConfig,
                   mesh=None) -> GroupBatch:
    """B groups x G episodes of `cfg.steps(env)` steps, `chunk` groups at a time -> GroupBatch (B, T, G, ...).

    `mesh` (optional): each chunk's C x G envs are sharded over the data axis.
    """
    B, G, T, C = cfg.num_groups, cfg.group_size, cfg.steps(env), cfg.chunk()
    E = C * G
    k_reset, k_steps, k_act = jax.random.split(rng, 3)
    reset_keys = jax.random.split(k_reset, B).reshape(B // C, C, -1)
    if cfg.share_step_keys:
        step_keys = jax.random.split(k_steps, B * T).reshape(B // C, T, C, 1, -1)
        step_keys = jnp.broadcast_to(step_keys, (B // C, T, C, G, step_keys.shape[-1]))
    else:
        step_keys = jax.random.split(k_steps, B * T * G).reshape(B // C, T, C, G, -1)
    act_keys = jax.random.split(k_act, (B // C) * T).reshape(B // C, T, -1)

    def act(k, obs, state, masks):
        action, logp, _ = policy.act(params, obs, masks, k)
        return action, (logp, policy.evaluate(ref_params, obs, masks, action)[0])

    def act_recurrent(k, obs, state, masks, memory):
        action, logp, _, m = policy.act_step(params, obs, masks, k, memory["policy"])
        ref_logp, _, m_ref = policy.evaluate_step(ref_params, obs, masks, action, memory["reference"])
        return action, (logp, ref_logp), {"policy": m, "reference": m_ref}

    zeros = policy.initial_memory(E)  # the policy's and the reference's, from zeros at the reset
    memory0 = None if zeros is None else {"policy": zeros, "reference": zeros}

    def one_chunk(keys):
        rk, sk, ak = keys
        obs, state = sharding.constrain_batch(jax.vmap(env.reset)(jnp.repeat(rk, G, axis=0)), mesh)  # row c*G + g

        def step(carry, x):
            obs, state, alive, memory = carry
            k_step, k_a = x
            s = rollout.step(env, act if memory is None else act_recurrent, k_a, k_step.reshape(E, -1), obs, state,
                             memory=memory)
            logp, ref_logp = s.extra
            out = (obs, s.masks, s.action, logp, ref_logp, s.reward * alive[:, None], alive,
                   s.invalid & (alive[:, None] > 0)) + (() if memory is None else (s.done,))
            return sharding.constrain_batch((s.next_obs, s.next_state, alive * (1.0 - s.done), s.next_memory),
                                            mesh), out

        _, out = jax.lax.scan(step, (obs, state, jnp.ones(E), sharding.constrain_batch(memory0, mesh)), (sk, ak))
        if memory0 is not None:  # done (T, E) -> the reset flags of the replay
            out = out[:-1] + (first_steps(out[-1]),)
        # (T, C*G, ...) -> (C, T, G, ...)
        return jax.tree.map(lambda x: jnp.moveaxis(x.reshape((T, C, G) + x.shape[2:]), 1, 0), out)

    out = jax.lax.map(one_chunk, (reset_keys, step_keys, act_keys))
    out = jax.tree.map(lambda x: x.reshape((B,) + x.shape[2:]), out)
    return GroupBatch(*out)


# ---- loss and update ---------------------------------------------------------------------

def kl_penalty(log_prob, ref_log_prob):
    """k3 estimator of KL(pi || pi_ref) per sample: exp(r) - r - 1, r = log pi_ref - log pi (>= 0, 0 iff equal)."""
    r = ref_log_prob - log_prob
    return jnp.exp(r) - r - 1.0


def grpo_loss(params, policy: ActorCritic, batch: GroupBatch, adv, cfg: GRPOConfig, norm=None):
    """PPO-clip surrogate + kl_coef x KL to the reference - ent_coef x entropy, averaged over alive
    (sample, learner) pairs (or summed and divided by `norm`, for gradient accumulation) -> (loss, aux).
    A recurrent policy replays each member's sequence (T steps) from a zero memory."""
    if batch.resets is None:
        flat = lambda x: x.reshape((-1,) + x.shape[3:])  # noqa: E731  (b, T, G, A, ...) -> (b*T*G, A, ...)
        obs, masks = jax.tree.map(flat, (batch.obs, batch.masks))
        log_prob, entropy = policy.evaluate(params, obs, masks, flat(batch.action))
    else:  # (b, T, G, A, ...) -> time-major sequences (T, b*G, A, ...)
        flat = lambda x: jnp.moveaxis(x, 1, 0).reshape((x.shape[1], -1) + x.shape[3:])  # noqa: E731
        resets = flat(batch.resets)
        obs, masks = jax.tree.map(flat, (batch.obs, batch.masks))
        log_prob, entropy = policy.evaluate_sequence(params, obs, masks, flat(batch.action),
                                                     policy.initial_memory(resets.shape[1]), resets)
    old, ref, a = flat(batch.log_prob), flat(batch.ref_log_prob), flat(adv)
    w = jnp.broadcast_to(flat(batch.alive)[..., None], log_prob.shape)
    norm = w.sum() if norm is None else norm
    ratio = jnp.exp(log_prob - old)
    surrogate = jnp.minimum(ratio * a, jnp.clip(ratio, 1 - cfg.clip_eps, 1 + cfg.clip_eps) * a)
    kl = kl_penalty(log_prob, ref)
    per = -surrogate + cfg.kl_coef * kl - cfg.ent_coef * entropy
    mean = lambda x: (x * w).sum() / norm  # noqa: E731
    aux = {"actor_loss": mean(-surrogate), "kl_ref": mean(kl), "entropy": mean(entropy),
           "approx_kl": mean((ratio - 1) - jnp.log(ratio)),
           "clip_frac": mean((jnp.abs(ratio - 1) > cfg.clip_eps).astype(jnp.float32))}
    return mean(per), aux


def grpo_update(train_state: TrainState, batch: GroupBatch, adv, rng, policy: ActorCritic, cfg: GRPOConfig,
                mesh=None):
    """`update_epochs` x minibatches of groups; each minibatch's gradient accumulated over chunks of
    `cfg.chunk()` groups -> (train_state, mean aux). `mesh` (optional): each chunk's groups are
    sharded over the data axis and the parameters replicated (XLA all-reduces the gradient)."""
    M = cfg.num_groups // cfg.num_minibatches
    C = min(cfg.chunk(), M)

    def minibatch(ts, mb):
        data, a = mb
        chunks = jax.tree.map(lambda x: x.reshape((M // C, C) + x.shape[1:]), (data, a))
        chunks = sharding.constrain_batch(chunks, mesh, batch_axis=1)
        w_alive = data.alive.sum() * data.log_prob.shape[-1]

        def acc(g, ch):
            d, aa = ch
            grads, aux = jax.grad(grpo_loss, has_aux=True)(ts.params, policy, d, aa, cfg, w_alive)
            return jax.tree.map(jnp.add, g, grads), aux

        zero = jax.tree.map(jnp.zeros_like, ts.params)
        grads, aux = jax.lax.scan(acc, zero, chunks)
        return ts.apply_gradients(grads=grads), jax.tree.map(jnp.sum, aux)  # chunk terms already / w_alive

    def epoch(ts, key):  # each minibatch's chunks are sharded in `minibatch`, so no constraint here
        return scan_shuffled(minibatch, ts, (batch, adv), key, cfg.num_minibatches)

    train_state, aux = jax.lax.scan(epoch, sharding.constrain_replicated(train_state, mesh),
                                    jax.random.split(rng, cfg.update_epochs))
    return sharding.constrain_replicated(train_state, mesh), jax.tree.map(jnp.mean, aux)


def batch_metrics(batch: GroupBatch) -> dict:
    ret = batch.reward.sum(1)  # (B, G, A)
    alive = batch.alive.sum()
    return {"episode_return": ret[..., 0].mean(), "episode_return_learners": ret.mean(),
            "group_return_std": ret[..., 0].std(1).mean(),
            "invalid_rate": batch.invalid.astype(jnp.float32).sum() / (alive * batch.invalid.shape[-1])}


def make_optimizer(cfg: GRPOConfig) -> optax.GradientTransformation:
    return optax.chain(optax.clip_by_global_norm(cfg.max_grad_norm), optax.adam(cfg.lr, eps=1e-5))


def update_step(ts: TrainState, ref_params, rng, env, policy, cfg: GRPOConfig, mesh=None):
    """One GRPO iteration: rollout B x G episodes, group advantages, clipped + KL update -> (ts, metrics)."""
    k_roll, k_upd = jax.random.split(rng)
    batch = rollout_groups(ts.params, ref_params, k_roll, env, policy, cfg, mesh)
    adv = advantages(batch, cfg)
    ts, aux = grpo_update(ts, batch, adv, k_upd, policy, cfg, mesh)
    return ts, {**batch_metrics(batch), **aux}


def make_grpo_train(cfg: GRPOConfig, env: LearnerEnv, policy: ActorCritic, progress: Callable | None = None,
                    mesh=None, feed: DeviceFeed | None = None):
    """-> pure `train(rng, params, ref_params=None) -> (params, metrics (num_updates,))`; jit it.

    Only the actor is optimised (params["actor"]; a critic, if present, is carried unchanged).
    The reference defaults to the starting params (the BC policy in the pipeline).
    `mesh` (optional): rollouts and gradient chunks sharded over the data axis, params replicated;
    the chunk's envs (chunk x group_size) and groups (chunk) must divide over the devices.
    `feed`: every update's metrics to the experiment logger (train/tracking.py).
    """
    cfg.check()
    chunk = min(cfg.chunk(), cfg.num_groups // cfg.num_minibatches)
    sharding.check_divisible(cfg.chunk() * cfg.group_size, mesh, "GRPO envs per chunk (group_chunk x group_size)")
    sharding.check_divisible(chunk, mesh, "GRPO groups per gradient chunk (group_chunk)")
    tx = make_optimizer(cfg)

    def train(rng, params, ref_params=None):
        ref_params = params if ref_params is None else ref_params
        actor = {"actor": params["actor"]}
        ref = {"actor": ref_params["actor"]}
        ts = TrainState.create(apply_fn=None, params=actor, tx=tx)

        def body(ts, x):
            i, k = x
            ts, m = update_step(ts, ref, k, env, policy, cfg, mesh)
            if progress is not None:
                jax.debug.callback(progress, i, m["episode_return"])
            if feed is not None:
                feed.emit(i, m)
            return ts, m

        ts, metrics = jax.lax.scan(body, ts, (jnp.arange(cfg.num_updates), jax.random.split(rng, cfg.num_updates)))
        return {**params, "actor": ts.params["actor"]}, metrics

    return train


def memory_report(cfg: GRPOConfig, env: LearnerEnv, policy: ActorCritic, params) -> dict:
    """Compile one GRPO update (rollout + loss + grads) and read XLA's memory analysis -> bytes, total and per episode."""
    tx = make_optimizer(cfg)
    actor = {"actor": params["actor"]}
    ts = TrainState.create(apply_fn=None, params=actor, tx=tx)
    fn = jax.jit(lambda ts, k: update_step(ts, actor, k, env, policy, cfg))
    compiled = fn.lower(ts, jax.random.PRNGKey(0)).compile()
    m = compiled.memory_analysis()
    episodes = cfg.num_groups * cfg.group_size
    temp = int(getattr(m, "temp_size_in_bytes", 0))
    total = temp + int(getattr(m, "argument_size_in_bytes", 0)) + int(getattr(m, "output_size_in_bytes", 0))
    return {"episodes": episodes, "temp_bytes": temp, "total_bytes": total, "temp_per_episode": temp / episodes,
            "group_chunk": cfg.chunk()}
