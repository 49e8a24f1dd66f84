"""Behaviour cloning on device: the warm start for PPO / GRPO (the seed's SFT stage).

`collect` rolls any behaviour (an NPC archetype playing the learner seats, a policy, or
your own function) through the vmapped env inside one `lax.scan` and returns a flat
`BCData`; `bc_loss` is the masked negative log-likelihood of the behaviour's actions under
the factored (or flat) heads, plus an optional value regression on the behaviour's
discounted returns (so a PPO critic starts calibrated); `bc_update` is one epoch of
shuffled minibatches; `make_bc_train(cfg, env, policy)` returns a pure
`train(rng, params) -> (params, metrics)` (collect, then `epochs` of `bc_update`) to jit.

A recurrent policy (`memory: gru`) is fitted on whole env sequences: `collect(sequences=True)` keeps the
data env-major (E, T, ...) with each step's reset flag, minibatches are sets of envs, and the loss
replays each sequence from a zero memory (the collection starts at a reset).

Masks. With the env's masks (`masked=True`) the likelihood is over valid choices only.
With `UnmaskedEnv` (what the pipeline uses) every head sees all-true masks: the policy is
free to emit invalid actions, and maximum likelihood on the heuristic's (always valid)
actions is what teaches it the protocol's structure (the analogue of the seed's parse
errors going down after SFT).
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax.training.train_state import TrainState

from nexus_jax import sharding
from nexus_jax.envs.nexus import default_unvault_step, hedge_actions
from train.config import BCConfig
from train.learner_env import LearnerEnv
from train.memory import first_steps, policy_act, stateful
from train.minibatches import scan_shuffled
from train.evaluate import heuristic_actions, heuristic_archetypes
from nexus_jax import rollout
from train.networks import ActorCritic
from train.ppo import compute_gae


@dataclasses.dataclass(frozen=True, eq=False)
class UnmaskedEnv(LearnerEnv):
    """A LearnerEnv whose masks are all true (same shapes): the policy may emit invalid actions.

    The env still judges every action and counts invalid ones (`info["invalid"]`, with the
    invalid penalty in the reward). Skipping the mask computation also makes steps cheaper.
    Only the masks change, so `wrap` lays them over any view (the flat one, `EntityLearnerEnv`).
    """

    def masks(self, state):
        shapes = jax.eval_shape(self.valid_masks, state)
        return jax.tree.map(lambda s: jnp.ones(s.shape, bool), shapes)

    def valid_masks(self, state):
        """The env's real action masks (what the wrapped view's `masks` returns): BC's validity targets."""
        return super().masks(state)

    @classmethod
    def wrap(cls, env: LearnerEnv) -> "UnmaskedEnv":
        """`env` unmasked, its own view (observations, steps) kept: an instance of `_unmasked(type(env))`."""
        return _unmasked(type(env))(env.env, env.action_head)


@functools.cache
def _unmasked(view: type) -> type:
    """The `view` class (LearnerEnv or a subclass) with `UnmaskedEnv`'s masks: UnmaskedEnv itself for LearnerEnv,
    else a subclass of both, e.g. `EntityLearnerEnv`'s reset and step with all-true masks."""
    if issubclass(view, UnmaskedEnv):
        return view
    if issubclass(UnmaskedEnv, view):
        return UnmaskedEnv
    return type(f"Unmasked{view.__name__}", (UnmaskedEnv, view), {})


class BCData(NamedTuple):
    """Behaviour data: N samples, each (A, ...) over the learner seats; or, for a recurrent policy
    (`collect(sequences=True)`), N env sequences of T steps, leaves (N, T, A, ...)."""

    obs: Any  # (N, A, D), or a pytree with leaves (N, A, ...) (the entity view's EntityObs)
    masks: Any  # masks the policy is scored with (all true under UnmaskedEnv)
    action: jnp.ndarray  # (N, A, 5) structured or (N, A) flat
    returns: jnp.ndarray  # (N, A) discounted return-to-go of the behaviour (raw reward units)
    invalid: jnp.ndarray  # (N, A) the env judged the behaviour's action invalid
    valid: Any = None  # the env's real masks (only under UnmaskedEnv with store_valid): validity targets
    resets: Any = None  # sequences only: (N, T) the step starts an episode after the first (the memory is reset)


# ---- behaviours --------------------------------------------------------------------------

Behaviour = Callable  # (key, obs (E, A, D), state (E,), masks) -> actions (E, A[, 5]); or, for a recurrent
#                       policy (`policy_behaviour`), a `rollout.Recurrent` in the rollout's act signature


def npc_behaviour(env: LearnerEnv, archetype: int | str, hedge_prob: float = 0.0, hedge_margin: int = 9) -> Behaviour:
    """The jitted NPC heuristic of `archetype` (id or name) playing every learner seat.

    `hedge_prob` > 0 lays the vault hedge over it (`nexus_jax.envs.nexus.npc.hedge`): at step 0
    and at step 1 the seat vaults what it holds of that step's resource with probability
    `hedge_prob` (a fresh coin each step), and it unvaults whatever its vault holds so that the
    withdrawals arrive `hedge_margin` steps before the episode ends.
    """
    if isinstance(archetype, str):
        table = heuristic_archetypes(env)
        if archetype not in table:
            raise ValueError(f"unknown NPC archetype {archetype!r} (known: {sorted(table)})")
        archetype = table[archetype]
    params = env.env.default_params
    unvault_at = default_unvault_step(params, hedge_margin)

    def one(key, state):
        if hedge_prob == 0:
            return heuristic_actions(env, key, state, archetype)
        k_npc, k_coin = jax.random.split(key)
        a = heuristic_actions(env, k_npc, state, archetype)
        coin = jax.random.uniform(k_coin, a.shape[:1]) < hedge_prob
        return hedge_actions(a, state, params, env.seats, coin, unvault_at)

    def act(key, obs, state, masks):
        a = jax.vmap(one)(jax.random.split(key, jax.tree.leaves(obs)[0].shape[0]), state)
        return env.env.encode(a) if env.action_head == "flat" else a

    return act


def policy_behaviour(policy: ActorCritic, params) -> Behaviour:
    """Sample from a trained policy (e.g. to distil it, or to build a dataset from a checkpoint); a policy with a
    memory gives a `rollout.Recurrent` behaviour."""
    if policy.memory_size:
        return policy_act(policy, params)
    return lambda key, obs, state, masks: policy.act(params, obs, masks, key)[0]


# ---- collection --------------------------------------------------------------------------

def collect(key, env: LearnerEnv, behaviour: Behaviour, num_envs: int, num_steps: int, gamma: float = 0.99,
            store_valid: bool = False, mesh=None, labeler: Behaviour | None = None, sequences: bool = False):
    """Roll `behaviour` for `num_steps` steps in `num_envs` auto-resetting envs -> (BCData (T*E,), stats).

    Pure; jit it with env/behaviour closed over (`make_bc_train` does). `returns` are
    discounted returns-to-go within each episode (bootstrapped with 0 at the cut-off).
    `store_valid` (an UnmaskedEnv): also keep the env's real masks, for `bc_loss`'s validity term.
    `mesh` (optional): the env batch is sharded over the mesh's data axis (each device steps its envs).
    `labeler` (optional, DAgger; stateless): `behaviour` drives the envs, and the stored action is what
    `labeler` (the teacher) would have done in each visited state. `sequences`: the data stays whole env
    sequences, BCData (E, T, ...) with `resets`, for a recurrent policy.
    """
    store_valid = store_valid and hasattr(env, "valid_masks")
    drive = behaviour.act if isinstance(behaviour, rollout.Recurrent) else stateful(
        lambda k, obs, state, masks: (behaviour(k, obs, state, masks), None))

    def act(k, obs, state, masks, memory):
        """-> (the action that drives the env, the label stored: the labeler's action, else the same, memory)."""
        if labeler is None:
            action, _, memory = drive(k, obs, state, masks, memory)
            return action, action, memory
        k_act, k_label = jax.random.split(k)
        action, _, memory = drive(k_act, obs, state, masks, memory)
        return action, labeler(k_label, obs, state, masks), memory

    if isinstance(behaviour, rollout.Recurrent):
        acts = rollout.Recurrent(act, behaviour.init)
    else:
        acts = lambda k, obs, state, masks: act(k, obs, state, masks, None)[:2]  # noqa: E731

    def keep(acc, s: rollout.Step):
        valid = jax.vmap(env.valid_masks)(s.state) if store_valid else None
        done_a = jnp.broadcast_to(s.done[:, None], s.reward.shape)
        return acc, (s.obs, s.masks, s.extra, s.reward, done_a, s.invalid, valid)

    _, (obs_t, masks_t, act_t, rew_t, done_t, inv_t, valid_t) = rollout.run(env, key, num_envs, num_steps, acts, keep,
                                                                              None, mesh=mesh)
    zeros = jnp.zeros_like(rew_t)
    returns, _ = compute_gae(rew_t, zeros, done_t, zeros[0], gamma, 1.0)  # lambda=1, V=0: returns-to-go
    if sequences:  # (T, E, ...) -> env-major (E, T, ...)
        flat = lambda x: jnp.swapaxes(x, 0, 1)  # noqa: E731
    else:
        flat = lambda x: x.reshape((-1,) + x.shape[2:])  # noqa: E731
    data = BCData(jax.tree.map(flat, obs_t), jax.tree.map(flat, masks_t), flat(act_t), flat(returns), flat(inv_t),
                  jax.tree.map(flat, valid_t) if store_valid else None,
                  flat(first_steps(done_t[..., 0])) if sequences else None)
    episodes = done_t[..., 0].sum()
    # Mean return of finished episodes (learner seat 0): cumulative reward reset at each done.
    def acc(c, x):
        r, d = x
        c = c + r
        return jnp.where(d, 0.0, c), jnp.where(d, c, 0.0)

    _, finished = jax.lax.scan(acc, jnp.zeros(num_envs), (rew_t[..., 0], done_t[..., 0]))
    stats = {"episodes": episodes, "episode_return": finished.sum() / jnp.maximum(episodes, 1),
             "invalid_rate": inv_t.astype(jnp.float32).mean()}
    return data, stats


# ---- loss and update ---------------------------------------------------------------------

def bc_loss(params, policy: ActorCritic, batch: BCData, vf_coef: float = 0.0, reward_scale: float = 0.1,
            validity_coef: float = 0.0):
    """Masked NLL of the behaviour's actions (+ vf_coef x value regression on returns) -> (loss, aux).

    With `batch.valid` (the env's real masks; the policy scored unmasked) the unmasked NLL
    splits exactly into the NLL within the valid choices plus the validity term
    sum_heads -log P(head choice is valid | the behaviour's earlier choices)
    = log pi_valid(a) - log pi(a); `validity_coef` adds that term again with this weight,
    stressing the protocol's structure over the heuristic's own randomness.
    """
    if batch.resets is None:
        score = lambda masks: policy.evaluate(params, batch.obs, masks, batch.action)  # noqa: E731
        log_prob, entropy = score(batch.masks)
        values = lambda: policy.value(params, batch.obs)  # noqa: E731
    else:  # env sequences (b, T, ...): replayed time-major from zero memories (each starts at a reset)
        batch = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), batch)
        memory = policy.initial_memory(batch.resets.shape[1], critic=True)
        score = lambda masks, value=False: policy.evaluate_sequence(  # noqa: E731
            params, batch.obs, masks, batch.action, memory, batch.resets, value)
        log_prob, entropy, *value_seq = score(batch.masks, vf_coef > 0)  # the values from the same pass
        values = lambda: value_seq[0]  # noqa: E731
    nll = -log_prob.mean()
    aux = {"nll": nll, "entropy": entropy.mean()}
    loss = nll
    if batch.valid is not None:
        log_prob_valid, _ = score(batch.valid)
        validity = (log_prob_valid - log_prob).mean()
        aux["validity_nll"] = validity
        loss = loss + validity_coef * validity
    if vf_coef > 0:
        value = values()
        value_loss = 0.5 * jnp.square(value - reward_scale * batch.returns).mean()
        loss = loss + vf_coef * value_loss
        aux["value_loss"] = value_loss
    return loss, aux


def bc_update(train_state: TrainState, data: BCData, rng, policy: ActorCritic, num_minibatches: int,
              vf_coef: float = 0.0, reward_scale: float = 0.1, validity_coef: float = 0.0, mesh=None):
    """One epoch: shuffle the N samples into `num_minibatches` minibatches, a gradient step each -> (ts, mean aux).

    `mesh` (optional): each minibatch is sharded over the data axis and the parameters
    replicated, so XLA all-reduces the gradient (as in `train.ppo.update`).
    """
    def minibatch(ts, mb):
        grads, aux = jax.grad(bc_loss, has_aux=True)(ts.params, policy, mb, vf_coef, reward_scale, validity_coef)
        return ts.apply_gradients(grads=grads), aux

    ts, aux = scan_shuffled(minibatch, sharding.constrain_replicated(train_state, mesh), data, rng, num_minibatches,
                            mesh)
    return sharding.constrain_replicated(ts, mesh), jax.tree.map(jnp.mean, aux)


# ---- config and the whole stage ----------------------------------------------------------

def make_bc_train(cfg: BCConfig, env: LearnerEnv, policy: ActorCritic, behaviour: Behaviour | None = None,
                  mesh=None):
    """-> pure `train(rng, params) -> (params, metrics)`: collect with `behaviour` (default: the NPC
    `cfg.archetype`), then `cfg.epochs` epochs of `bc_update`, then `cfg.dagger_rounds` DAgger rounds
    (the policy drives, the teacher labels the states it reaches: BC's own mistakes get corrected).
    metrics: per-epoch loss terms (epochs,), the behaviour's collection stats, and per DAgger round
    (rounds,) the policy's own return and invalid rate. `fit(rng, params, data)` skips collection.
    `mesh` (optional): collection sharded over the data axis, minibatches too, params replicated."""
    behaviour = behaviour or npc_behaviour(env, cfg.archetype, cfg.hedge_prob, cfg.hedge_margin)
    sequences = bool(policy.memory_size)
    sharding.check_divisible(cfg.num_envs, mesh)
    sharding.check_divisible(cfg.num_envs * cfg.num_steps // cfg.num_minibatches, mesh, "BC minibatch size")
    if sequences:
        if cfg.num_envs % cfg.num_minibatches:
            raise ValueError(f"config key 'bc.num_minibatches': a recurrent policy's minibatches are whole env "
                             f"sequences: must divide bc.num_envs = {cfg.num_envs}")
        sharding.check_divisible(cfg.num_envs // cfg.num_minibatches, mesh, "BC envs per minibatch (memory=gru)")
    tx = optax.chain(optax.clip_by_global_norm(cfg.max_grad_norm), optax.adam(cfg.lr))

    def fit(rng, params, data: BCData, epochs: int = cfg.epochs):
        ts = TrainState.create(apply_fn=None, params=params, tx=tx)
        ts, aux = jax.lax.scan(
            lambda t, k: bc_update(t, data, k, policy, cfg.num_minibatches, cfg.vf_coef, cfg.reward_scale,
                                   cfg.validity_coef, mesh),
            ts, jax.random.split(rng, epochs))
        return ts.params, aux

    def collect_from(key, drive: Behaviour, labeler: Behaviour | None = None):
        return collect(key, env, drive, cfg.num_envs, cfg.num_steps, cfg.gamma, store_valid=cfg.validity_coef > 0,
                       mesh=mesh, labeler=labeler, sequences=sequences)

    def dagger_round(teacher_data: BCData):
        """Roll the current policy, label its states with the teacher, refit on both datasets."""
        def one(params, key):
            k_col, k_fit = jax.random.split(key)
            own, stats = collect_from(k_col, policy_behaviour(policy, params), labeler=behaviour)
            both = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), teacher_data, own)
            params, aux = fit(k_fit, params, both, cfg.dagger_epochs)
            return params, {"dagger_policy_return": stats["episode_return"],
                            "dagger_policy_invalid_rate": stats["invalid_rate"], "dagger_nll": aux["nll"][-1]}
        return one

    def train(rng, params):
        k_col, k_fit = jax.random.split(rng)
        data, stats = collect_from(k_col, behaviour)
        params, aux = fit(k_fit, params, data)
        aux = {**aux, **{f"behaviour_{k}": v for k, v in stats.items()}}
        if cfg.dagger_rounds:
            params, rounds = jax.lax.scan(dagger_round(data), params,
                                          jax.random.split(jax.random.fold_in(rng, 1), cfg.dagger_rounds))
            aux.update(rounds)
        return params, aux

    train.fit = fit
    return train
