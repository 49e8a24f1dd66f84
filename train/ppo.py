"""PPO (IPPO / MAPPO) on device, PureJaxRL style, split into named functions.

`make_train(cfg)` returns a pure `train(rng, lr)`: init, then `lax.scan` over updates, each
one `rollout` (a scan of vmapped env steps), `compute_gae`, and `update` (epochs x
minibatches of `ppo_loss`). The learning rate is a traced input, so
`jax.vmap(jax.vmap(train, (0, None)), (None, 0))` sweeps seeds x learning rates in one
compilation (`make_sweep`). `make_chunks` runs the same updates a chunk at a time from a
carry of plain arrays, which `python -m train` checkpoints between chunks (train/resume.py).

A recurrent policy (`memory: gru`, train/memory.py) keeps its memory in the runner (zeroed where an
episode ends, by the rollout); `update` then cuts minibatches of whole env sequences and the loss
replays each sequence from the memory the rollout started with, as JaxMARL's ippo_rnn does.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax.training.train_state import TrainState
from jax.sharding import NamedSharding, PartitionSpec as P

from nexus_jax import sharding
from train.alignment import align_advantages, check_alignment
from train.config import PPOConfig
from train.learner_env import LearnerEnv
from train.memory import first_steps
from train.models import make_learner_env, make_policy
from train.minibatches import scan_shuffled
from train import past_partners
from nexus_jax.rollout import step as step_envs
from train.networks import ActorCritic
from train.snapshots import scan_into_snapshots, scan_with_snapshots, snapshot_buffer
from train.tracking import DeviceFeed


LRS_AXIS, SEEDS_AXIS = "lrs", "seeds"  # the run axes of a sweep's mesh (`run_grid`)
_ENV_BATCH = ("env_state", "obs", "ep_return", "memory")  # carry entries with an env axis


class Transition(NamedTuple):
    """One env step of the batch; arrays are (E, A, ...) with E envs and A learner seats."""

    obs: jnp.ndarray  # (E, A, D) observation the action was taken on
    masks: Any  # action masks on that observation (flat (E, A, n) or dict of head masks)
    action: jnp.ndarray  # (E, A) flat or (E, A, 5) structured
    log_prob: jnp.ndarray  # (E, A)
    value: jnp.ndarray  # (E, A)
    reward: jnp.ndarray  # (E, A)
    done: jnp.ndarray  # (E, A) the episode ended with this step (next obs is a fresh episode's)
    invalid: jnp.ndarray  # (E, A) the env judged the action invalid
    episode_return: jnp.ndarray  # (E, A) the finished episode's return where done, else 0
    learn: Any = None  # (E, A) bool, with past partners: the current policy acted (only these enter the loss)


class RunnerState(NamedTuple):
    train_state: TrainState
    env_state: Any  # batched env state (E,)
    obs: jnp.ndarray  # (E, A, D)
    ep_return: jnp.ndarray  # (E, A) return so far of the running episodes
    rng: jnp.ndarray
    memory: Any = None  # a recurrent policy's memory ({"actor"[, "critic"]: (E, A, H)}); None when feedforward


# ---- setup -------------------------------------------------------------------------------

def make_env(cfg: PPOConfig) -> LearnerEnv:
    return make_learner_env(cfg)


def make_optimizer(cfg: PPOConfig, lr) -> optax.GradientTransformation:
    """Adam with global-norm clipping; `lr` may be traced (annealed linearly to 0 if asked)."""
    steps_per_update = cfg.update_epochs * cfg.num_minibatches

    def schedule(count):
        frac = 1.0 - (count // steps_per_update) / cfg.num_updates
        return lr * frac if cfg.anneal_lr else lr * jnp.ones_like(frac)

    return optax.chain(optax.clip_by_global_norm(cfg.max_grad_norm), optax.adam(schedule, eps=1e-5))


def env_reset(env: LearnerEnv, rng, num_envs: int):
    return jax.vmap(env.reset)(jax.random.split(rng, num_envs))


def init_runner(rng, lr, cfg: PPOConfig, env: LearnerEnv, policy: ActorCritic) -> RunnerState:
    rng, k_env, k_init = jax.random.split(rng, 3)
    obs, env_state = env_reset(env, k_env, cfg.num_envs)
    masks = jax.vmap(env.masks)(env_state)
    params = policy.init(k_init, obs, masks)
    ts = TrainState.create(apply_fn=None, params=params, tx=make_optimizer(cfg, lr))
    memory = policy.initial_memory(cfg.num_envs, critic=True)
    return RunnerState(ts, env_state, obs, jnp.zeros(jax.tree.leaves(obs)[0].shape[:2]), rng, memory)


# ---- rollout -----------------------------------------------------------------------------

def env_step(runner: RunnerState, env: LearnerEnv, policy: ActorCritic, mesh=None,
             past: past_partners.PastPartners | None = None):
    """One vmapped env step with the current policy -> (runner, Transition).

    `mesh` (optional): keep the env batch sharded over its data axis (see `shard_runner`).
    `past` (optional, feedforward policies): the seats it freezes act with its params (train/past_partners.py),
    and the Transition's `learn` marks the others.
    """
    ts, env_state, obs, ep_return, rng, memory = runner
    rng, k_act, k_env = jax.random.split(rng, 3)

    def act(k, obs, state, masks):
        action, log_prob, _ = policy.act(ts.params, obs, masks, k)
        if past is not None:
            action = past_partners.mix(past.frozen, action, policy.act(past.params, obs, masks, k)[0])
        return action, (log_prob, policy.value(ts.params, obs))

    def act_recurrent(k, obs, state, masks, memory):
        action, log_prob, _, value, memory = policy.step(ts.params, obs, masks, k, memory)
        return action, (log_prob, value), memory

    s = step_envs(env, act if memory is None else act_recurrent, k_act,
                  jax.random.split(k_env, jax.tree.leaves(obs)[0].shape[0]), obs, env_state, memory=memory)
    masks, action, (log_prob, value), reward, done = s.masks, s.action, s.extra, s.reward, s.done
    next_obs, env_state, invalid = s.next_obs, s.next_state, s.invalid
    done_a = jnp.broadcast_to(done[:, None], reward.shape)
    ep_return = ep_return + reward
    finished = jnp.where(done_a, ep_return, 0.0)
    tr = Transition(obs, masks, action, log_prob, value, reward, done_a, invalid, finished,
                    None if past is None else ~past.frozen)
    env_state, next_obs, ep_return, memory = sharding.constrain_batch(
        (env_state, next_obs, jnp.where(done_a, 0.0, ep_return), s.next_memory), mesh)
    return RunnerState(ts, env_state, next_obs, ep_return, rng, memory), sharding.constrain_batch(tr, mesh)


def rollout(runner: RunnerState, env: LearnerEnv, policy: ActorCritic, num_steps: int, mesh=None,
            past: past_partners.PastPartners | None = None):
    """`num_steps` env steps -> (runner, Transition with a leading time axis (T, E, A, ...)); `past`: the
    rollout's past partners (`env_step`)."""
    return jax.lax.scan(lambda r, _: env_step(r, env, policy, mesh, past), runner, None, num_steps)


# ---- advantages --------------------------------------------------------------------------

def compute_gae(rewards, values, dones, last_value, gamma: float, gae_lambda: float):
    """Generalised advantage estimates over a time-major batch -> (advantages, returns).

    rewards, values, dones: (T, ...); last_value: (...) the value of the obs after step T-1.
    `dones[t]` means step t ended the episode, so nothing is bootstrapped across it.
    """
    def body(carry, x):
        gae, next_value = carry
        reward, value, done = x
        not_done = 1.0 - done.astype(jnp.float32)
        delta = reward + gamma * next_value * not_done - value
        gae = delta + gamma * gae_lambda * not_done * gae
        return (gae, value), gae

    _, adv = jax.lax.scan(body, (jnp.zeros_like(last_value), last_value), (rewards, values, dones), reverse=True)
    return adv, adv + values


# ---- loss and update ---------------------------------------------------------------------

def ppo_loss(params, policy: ActorCritic, batch: Transition, advantages, targets, cfg: PPOConfig, memory=None,
             resets=None):
    """Clipped PPO surrogate + clipped value loss - entropy bonus -> (loss, aux metrics).

    Means run over every (sample, learner) pair (with past partners, over those the current policy
    played: `batch.learn`); advantages are normalised over the
    minibatch when `cfg.normalize_advantages`. A recurrent policy's `batch` is time-major
    sequences (T, b, A, ...), replayed from `memory` (at step 0) with the reset flags `resets` (T, b).
    """
    if memory is None:
        log_prob, entropy = policy.evaluate(params, batch.obs, batch.masks, batch.action)
        value = policy.value(params, batch.obs)
    else:
        log_prob, entropy, value = policy.evaluate_sequence(params, batch.obs, batch.masks, batch.action, memory,
                                                            resets, value=True)

    if batch.learn is None:
        mean, log_ratio = jnp.mean, log_prob - batch.log_prob
    else:  # a past partner's action was not sampled by this policy: its ratio is held at 1 and weighs nothing
        weight = batch.learn.astype(log_prob.dtype)
        mean = lambda x: (weight * x).sum() / jnp.maximum(weight.sum(), 1.0)  # noqa: E731
        log_ratio = jnp.where(batch.learn, log_prob - batch.log_prob, 0.0)

    v_clipped = batch.value + jnp.clip(value - batch.value, -cfg.clip_eps, cfg.clip_eps)
    value_loss = 0.5 * mean(jnp.maximum(jnp.square(value - targets), jnp.square(v_clipped - targets)))

    if cfg.normalize_advantages and batch.learn is None:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    elif cfg.normalize_advantages:
        centred = advantages - mean(advantages)
        advantages = centred / (jnp.sqrt(mean(jnp.square(centred))) + 1e-8)
    ratio = jnp.exp(log_ratio)
    surrogate = jnp.minimum(ratio * advantages, jnp.clip(ratio, 1 - cfg.clip_eps, 1 + cfg.clip_eps) * advantages)
    actor_loss = -mean(surrogate)
    ent = mean(entropy)
    total = actor_loss + cfg.vf_coef * value_loss - cfg.ent_coef * ent
    aux = {
        "value_loss": value_loss,
        "actor_loss": actor_loss,
        "entropy": ent,
        "approx_kl": mean((ratio - 1) - jnp.log(ratio)),
        "clip_frac": mean(jnp.abs(ratio - 1) > cfg.clip_eps),
    }
    return total, aux


def update(train_state: TrainState, traj: Transition, advantages, targets, rng, policy: ActorCritic, cfg: PPOConfig,
           mesh=None, memory=None):
    """`update_epochs` passes of shuffled minibatches over the (T*E) samples -> (train_state, mean aux).

    `mesh` (optional): every minibatch is sharded over the mesh's data axis and the parameters
    replicated; the loss is a mean over the minibatch, so XLA's partitioner computes per-device
    partial gradients and all-reduces them (the gradient average across devices). The
    minibatches are the same global shuffle as on one device, so the result is the same.
    `memory` (a recurrent policy's memories when the rollout began, (E, A, H)): the minibatches
    are shuffled envs, each with its whole sequence (T steps) and its memory at step 0.
    """
    if memory is None:
        flat = lambda x: x.reshape((-1,) + x.shape[2:])  # noqa: E731  (T, E, ...) -> (T*E, ...)
        data = jax.tree.map(flat, (traj, advantages, targets))
    else:  # env-major, so the shuffle picks whole sequences: (T, E, ...) -> (E, T, ...)
        seq = (traj, advantages, targets, first_steps(traj.done[..., 0]))
        data = (*jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), seq), memory)

    def minibatch(ts, mb):
        if memory is None:
            batch, adv, tgt = mb
            grads, aux = jax.grad(ppo_loss, has_aux=True)(ts.params, policy, batch, adv, tgt, cfg)
        else:
            (batch, adv, tgt, resets), m0 = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), mb[:4]), mb[4]
            grads, aux = jax.grad(ppo_loss, has_aux=True)(ts.params, policy, batch, adv, tgt, cfg, m0, resets)
        return ts.apply_gradients(grads=grads), aux

    def epoch(ts, key):
        return scan_shuffled(minibatch, ts, data, key, cfg.num_minibatches, mesh)

    train_state, aux = jax.lax.scan(epoch, sharding.constrain_replicated(train_state, mesh),
                                    jax.random.split(rng, cfg.update_epochs))
    return sharding.constrain_replicated(train_state, mesh), jax.tree.map(jnp.mean, aux)


def rollout_metrics(traj: Transition) -> dict:
    """Per-update metrics from a rollout: finished episodes' returns and the invalid-action rate."""
    done = traj.done.astype(jnp.float32)
    count = done.sum((0, 1))  # (A,)
    ret = traj.episode_return.sum((0, 1)) / jnp.maximum(count, 1.0)
    return {
        "episode_return": ret[0],  # the first learner seat (agent_0)
        "episode_return_learners": ret.mean(),
        "episodes": count[0],
        "invalid_rate": traj.invalid.astype(jnp.float32).mean(),
        "reward_per_step": traj.reward.mean(),
    }


def update_step(runner: RunnerState, update_idx, env: LearnerEnv, policy: ActorCritic, cfg: PPOConfig,
                progress: Callable | None = None, mesh=None, feed: DeviceFeed | None = None,
                snapshots=None, snapshot_every: int = 0):
    """One PPO iteration: rollout, GAE, update -> (runner, metrics). `feed`: the metrics go to the
    experiment logger (train/tracking.py; None: nothing traced). `snapshots` (the `snapshot_buffer` so far,
    filled every `snapshot_every` updates): the pool `cfg.past_partners > 0` draws from."""
    memory0 = runner.memory  # the memories the rollout starts from: the loss replays each sequence from them
    past = None
    if cfg.past_partners > 0:
        past_partners.check_past_partners(cfg.past_partners, env.num_learners, snapshot_every if snapshots is not None
                                          else 0)
        rng, k_past = jax.random.split(runner.rng)
        runner = runner._replace(rng=rng)
        past = past_partners.draw(k_past, snapshots, update_idx, snapshot_every, cfg.num_envs, env.num_learners,
                                  cfg.past_partners)
    runner, traj = rollout(runner, env, policy, cfg.num_steps, mesh, past)
    if runner.memory is None:
        last_value = policy.value(runner.train_state.params, runner.obs)
    else:
        last_value = policy.value_step(runner.train_state.params, runner.obs, jax.vmap(env.masks)(runner.env_state),
                                       runner.memory)
    adv, targets = compute_gae(traj.reward * cfg.reward_scale, traj.value, traj.done, last_value, cfg.gamma,
                               cfg.gae_lambda)
    if cfg.align_beta > 0:
        check_alignment(cfg.align_beta, env.num_learners)
        partners = env.partners(traj.action, tuple(cfg.align_types)) if cfg.align_scope == "partner" else None
        answered = env.offers_and_answers(traj.action) if cfg.align_scope == "answered" else None
        adv = align_advantages(adv, traj.done, cfg.gamma, cfg.align_beta, partners, answered)
    rng, k_upd = jax.random.split(runner.rng)
    ts, aux = update(runner.train_state, traj, adv, targets, k_upd, policy, cfg, mesh, memory0)
    metrics = {**rollout_metrics(traj), **aux}
    if progress is not None:
        jax.debug.callback(progress, update_idx, metrics["episode_return"])
    if feed is not None:
        feed.emit(update_idx, metrics)
    return runner._replace(train_state=ts, rng=rng), metrics


def check_minibatches(cfg: PPOConfig, mesh) -> None:
    """The env batch and every minibatch divide over the mesh's devices (ValueError naming the size otherwise);
    a recurrent policy's minibatch is `num_envs / num_minibatches` whole env sequences."""
    sharding.check_divisible(cfg.num_envs, mesh)
    sharding.check_divisible(cfg.minibatch_size, mesh, "minibatch_size (num_envs * num_steps / num_minibatches)")
    if cfg.recurrent:
        sharding.check_divisible(cfg.num_envs // cfg.num_minibatches, mesh,
                                 "envs per minibatch (num_envs / num_minibatches, memory=gru)")


def make_mesh(cfg: PPOConfig):
    """The data mesh `cfg.num_devices` asks for: None for 1 (single device), all devices for 0
    (`sharding.mesh_for`: over several processes, only 0)."""
    return sharding.mesh_for(cfg.num_devices)


def run_grid(cfg: PPOConfig, mesh):
    """The mesh a sweep of learning rates x seeds runs on: its runs spread over `mesh`'s devices (lrs, then
    seeds), each run's env batch over the devices left (`sharding.grid_mesh`); None without a mesh."""
    if mesh is None:
        return None
    grid = sharding.grid_mesh({LRS_AXIS: len(cfg.sweep_lrs), SEEDS_AXIS: cfg.num_seeds}, mesh.devices.flat)
    check_minibatches(cfg, grid)
    return grid


def over_runs(fn: Callable, grid, seed_axes=(0, None), lr_axes=(None, 0)) -> Callable:
    """`fn` vmapped over seeds (inner) and learning rates (outer) -> outputs (L, S, ...); with a `run_grid`
    mesh the two run axes are laid over its lrs and seeds axes (`vmap`'s `spmd_axis_name`)."""
    seeds, lrs = (None, None) if grid is None else (SEEDS_AXIS, LRS_AXIS)
    return jax.vmap(jax.vmap(fn, seed_axes, spmd_axis_name=seeds), lr_axes, spmd_axis_name=lrs)


def runs_layout(tree, grid) -> dict:
    """Shardings of a chunk carry or metrics with leading (L, S) axes on a `run_grid` mesh: the run axes over
    its lrs and seeds axes, the env axis (2) of the env batch entries over its data axis."""
    def layout(key, x):
        batch = key in _ENV_BATCH and len(x.shape) > 2
        return NamedSharding(grid, P(LRS_AXIS, SEEDS_AXIS, sharding.DATA_AXIS) if batch else P(LRS_AXIS, SEEDS_AXIS))
    return {k: jax.tree.map(lambda x, k=k: layout(k, x), v) for k, v in tree.items()}


def shard_runner(runner: RunnerState, mesh) -> RunnerState:
    """Inside jit: env batch (env_state, obs, ep_return) sharded over the data axis, train state replicated."""
    if mesh is None:
        return runner
    env_state, obs, ep_return, memory = sharding.constrain_batch(
        (runner.env_state, runner.obs, runner.ep_return, runner.memory), mesh)
    ts, rng = sharding.constrain_replicated((runner.train_state, runner.rng), mesh)
    return RunnerState(ts, env_state, obs, ep_return, rng, memory)


def make_train(cfg: PPOConfig, progress: Callable | None = None, env: LearnerEnv | None = None, mesh=None,
               snapshot_every: int = 0, feed: DeviceFeed | None = None):
    """-> pure `train(rng, lr=cfg.lr)` returning {"params", "metrics" (num_updates,)}; jit/vmap it.

    `snapshot_every` k > 0: the output also holds "snapshots", the params at updates 0, k, 2k, ...
    stacked on a leading axis (train/snapshots.py; the self-play evaluation reads them).

    `mesh` (a `jax.sharding.Mesh` with a "data" axis; default from `cfg.num_devices`, where 1
    = single device, unchanged): the env batch is sharded over the data axis, the parameters
    and optimiser state replicated, gradients averaged across devices by XLA (see `update`).
    """
    env = env or make_env(cfg)
    policy = make_policy(cfg, env)
    mesh = make_mesh(cfg) if mesh is None else mesh
    check_minibatches(cfg, mesh)

    def train(rng, lr=None):
        lr = cfg.lr if lr is None else lr
        runner = shard_runner(init_runner(rng, lr, cfg, env, policy), mesh)
        body = lambda r, i, snaps=None: update_step(r, i, env, policy, cfg, progress, mesh, feed, snaps,  # noqa: E731
                                                    snapshot_every)
        if snapshot_every:
            runner, metrics, snaps = scan_with_snapshots(body, runner, cfg.num_updates, snapshot_every,
                                                         lambda r: r.train_state.params)
            return {"params": runner.train_state.params, "metrics": metrics, "snapshots": snaps}
        runner, metrics = jax.lax.scan(body, runner, jnp.arange(cfg.num_updates))
        return {"params": runner.train_state.params, "metrics": metrics}

    return train


def make_sweep(cfg: PPOConfig, progress: Callable | None = None, env: LearnerEnv | None = None, mesh=None,
               snapshot_every: int = 0, feed: DeviceFeed | None = None):
    """-> jitted `sweep(rngs (S,), lrs (L,))`: every seed x learning rate, outputs (L, S, ...), one compilation.

    With a mesh (`mesh=` or `cfg.num_devices != 1`, every process's devices in a multi-process
    run) the *runs* are spread over the devices (`run_grid`: learning rates, then seeds, each over
    gcd(count, devices) devices) and, where there are more devices than runs, each run's env batch
    over the devices left; runs need no communication, only a run's own env shards do. A single run
    (one seed, one learning rate) is `make_train(cfg, mesh=...)`, which shards that run's env batch
    (`python -m train` picks it, see `make_runs`).
    """
    mesh = make_mesh(cfg) if mesh is None else mesh
    grid = run_grid(cfg, mesh)
    train = make_train(dataclasses.replace(cfg, num_devices=1), progress, env, mesh=grid,
                       snapshot_every=snapshot_every, feed=feed)
    return jax.jit(over_runs(train, grid))


def make_runs(cfg: PPOConfig, progress: Callable | None = None, env: LearnerEnv | None = None, mesh=None,
              snapshot_every: int = 0, feed: DeviceFeed | None = None):
    """What `python -m train` runs -> jitted `runs(rngs (S,), lrs (L,))` with outputs (L, S, ...).

    One device: `make_sweep`. Several: the seeds are spread over the devices (`make_sweep`
    with the mesh) when `num_seeds` is a multiple of the device count; a single run (one
    seed, one learning rate) shards its env batch instead (`make_train(cfg, mesh)`).
    """
    mesh = make_mesh(cfg) if mesh is None else mesh
    single = cfg.num_seeds == 1 and len(cfg.sweep_lrs) == 1
    if mesh is None or not single:
        return make_sweep(cfg, progress, env, mesh, snapshot_every, feed)
    train = jax.jit(make_train(cfg, progress, env, mesh, snapshot_every, feed))

    def runs(rngs, lrs):
        out = train(rngs[0], lrs[0])
        return jax.tree.map(lambda x: x[None, None], out)

    return runs


# ---- training in chunks (checkpoints, resume) ------------------------------------------------

def runner_to_carry(runner: RunnerState, snapshots=None) -> dict:
    """The scan carry as plain arrays (no optimiser object), so it can leave jit and be checkpointed."""
    ts = runner.train_state
    carry = {"params": ts.params, "opt_state": ts.opt_state, "step": ts.step, "env_state": runner.env_state,
             "obs": runner.obs, "ep_return": runner.ep_return, "rng": runner.rng}
    if runner.memory is not None:
        carry["memory"] = runner.memory
    if snapshots is not None:
        carry["snapshots"] = snapshots
    return carry


def carry_to_runner(carry: dict, cfg: PPOConfig, lr) -> RunnerState:
    """Inverse of `runner_to_carry`: the optimiser is rebuilt from cfg and lr (it holds no arrays)."""
    ts = TrainState(step=carry["step"], apply_fn=None, params=carry["params"], tx=make_optimizer(cfg, lr),
                    opt_state=carry["opt_state"])
    return RunnerState(ts, carry["env_state"], carry["obs"], carry["ep_return"], carry["rng"], carry.get("memory"))


def make_chunks(cfg: PPOConfig, progress: Callable | None = None, env: LearnerEnv | None = None,
                snapshot_every: int = 0, mesh=None, feed: DeviceFeed | None = None):
    """-> jitted (init, run) that train every seed x learning rate like `make_sweep`, a chunk at a time.

    `init(rngs (S,), lrs (L,))` -> carry with (L, S) leading axes (`runner_to_carry`);
    `run(carry, lrs, start, length)` -> (carry, metrics (L, S, length)) runs updates start ..
    start + length - 1 (`length` static; `start` traced, so every chunk of one length shares a
    compilation). Each update is `update_step`, as in `make_train`'s scan, on the same keys,
    so chunks of any size end where one scan ends (tests/test_resume.py checks it bitwise).
    `mesh`: the runs and env batches laid out as in `make_sweep` (`run_grid`); the carry and the
    metrics come out with the shardings of `runs_layout`, which a restore gives them back.
    """
    env = env or make_env(cfg)
    policy = make_policy(cfg, env)
    grid = run_grid(cfg, mesh)
    params_of = lambda r: r.train_state.params  # noqa: E731

    def init_one(rng, lr):
        runner = shard_runner(init_runner(rng, lr, cfg, env, policy), grid)
        snaps = snapshot_buffer(runner.train_state.params, cfg.num_updates, snapshot_every) if snapshot_every else None
        return runner_to_carry(runner, snaps)

    def run_one(carry, lr, start, length):
        runner = carry_to_runner(carry, cfg, lr)
        body = lambda r, i, snaps=None: update_step(r, i, env, policy, cfg, progress, grid, feed, snaps,  # noqa: E731
                                                    snapshot_every)
        indices = start + jnp.arange(length)
        if snapshot_every:
            (runner, snaps), metrics = scan_into_snapshots(body, runner, carry["snapshots"], indices, snapshot_every,
                                                           params_of)
            return runner_to_carry(runner, snaps), metrics
        runner, metrics = jax.lax.scan(body, runner, indices)
        return runner_to_carry(runner), metrics

    init = over_runs(init_one, grid)

    def run(carry, lrs, start, length: int):
        one = lambda c, lr: run_one(c, lr, start, length)  # noqa: E731
        return over_runs(one, grid, (0, None), (0, 0))(carry, lrs)

    if grid is None:
        return jax.jit(init), jax.jit(run, static_argnames="length")
    inputs = (jax.ShapeDtypeStruct((cfg.num_seeds, 2), jnp.uint32), jax.ShapeDtypeStruct((len(cfg.sweep_lrs),),
                                                                                          jnp.float32))
    layout = runs_layout(jax.eval_shape(init, *inputs), grid)
    metrics_layout = NamedSharding(grid, P(LRS_AXIS, SEEDS_AXIS))
    return (jax.jit(init, out_shardings=layout),
            jax.jit(run, static_argnames="length", out_shardings=(layout, metrics_layout)))
