"""The one rollout every trainer, evaluator and tool runs: a vmapped env step driven by an act function.

`step` is one step of a batch of envs (E,): the envs' masks, the act function's action, the
vmapped `env.step`, and the envs' invalid flags. `scan` is a `lax.scan` of `step`s over
per-step keys, folding a per-step accumulator; `run` resets `num_envs` envs and scans them
with the batch key scheme. PPO, GRPO, BC, `train.evaluate`, the pipeline's evaluation, the
suite, the sweep, crisis evaluation, `nexus_jax.tournament` and `nexus_jax.sharding` all
step through `step`, and all but PPO and GRPO (whose env batch lives across updates, or
whose keys are shared within groups) through `scan`.

`make_rollout` is the sharded, chunked rollout of many envs of any registered id (random
valid actions by default): the env batch is split over a mesh's data axis with `shard_map`
(each device steps its own envs, no communication), and inside a device optionally in
`env_chunks` sequential chunks (`lax.map`), so peak memory is set by the chunk, not the
batch. With `trajectory=False` only per-env sums are kept. Its randomness is keyed per env
(`split(key, num_envs)`, then `fold_in(env_key, t)` per step), so it gives the same
trajectories whatever the number of devices or chunks.

The env is anything with these pure functions over one env (duck-typed; `train.learner_env.
LearnerEnv` is the trainers' one, `nexus_jax.sharding` and the tournament adapt the
array-level and functional APIs):

    reset(key) -> (obs, state)                      # only `run` calls it
    masks(state) -> masks of the acting seats       # any pytree, or None when the act ignores masks
    step(key, state, action, params) -> (obs, state, reward, done, info)   # params traced or None
    invalid(info) -> invalid flags of the acting seats over a batch of envs (or None)

Memory: an act function may carry a policy state from step to step (a recurrent policy's
memory): pass a `Recurrent` (the act function `act(key, obs, state, masks, memory) -> (action,
extra, memory)` and `init(num_envs)`, the memory at the start of an episode) wherever an act
function is taken. The rollout carries the memory (leaves (E, ...)) beside the env states and
sets an env's entries to zeros where its episode ended, so the first step of every episode,
after an auto-reset too, starts from zeros: JaxMARL's `ScannedRNN` convention (its carry is
reset with the previous step's `done`). `step` takes the memory as an argument (its callers
carry it in their own scan).

Key use: `run` splits its key into (reset, steps), one key per step, and each step's key by
`split_key` into (act key, per-env keys); by default `split_key(k) = (k_act, split(k_env, E))`.
Callers with another established key scheme (per-env streams that do not depend on the
mesh, for the sharded rollout) pass their own per-step key material and `split_key`, so
their numbers stay what they were.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec as P

from nexus_jax.sharding import DATA_AXIS, check_divisible, constrain_batch, mesh_size

# act(key, obs (E, A, D), state (E,), masks) -> (action (E, A[, 5]), extra): `extra` (any pytree, or None)
# is what the caller wants kept beside the action (log-probabilities, values).
Act = Callable[[Any, jnp.ndarray, Any, Any], tuple]


class Recurrent(NamedTuple):
    """An act function that carries a memory through the rollout (a recurrent policy's hidden state).

    `act(key, obs, state, masks, memory) -> (action, extra, memory after the step)`; `init(num_envs)`
    -> the memory at the start of an episode, leaves (E, ...), zeros. Where an env's episode ends the
    rollout sets its memory to zeros (`reset_memory`).
    """

    act: Callable
    init: Callable


def reset_memory(memory, done):
    """`memory` (leaves (E, ...)) with the entries of the envs whose episode ended (done (E,)) set to zeros."""
    return jax.tree.map(lambda m: jnp.where(done.reshape(done.shape + (1,) * (m.ndim - 1)), jnp.zeros_like(m), m),
                        memory)


class Step(NamedTuple):
    """One step of E envs: what an accumulator sees. Leading axis E; `state` is the state acted in."""

    obs: jnp.ndarray  # (E, A, D) observation acted on
    state: Any  # env states acted in
    masks: Any  # acting seats' masks (flat (E, A, n), the factored dict, or None)
    action: jnp.ndarray  # (E, A[, 5])
    extra: Any  # the act function's extra output
    reward: jnp.ndarray  # (E, A)
    done: jnp.ndarray  # (E,) the episode ended (with an auto-resetting step, next_* are a fresh episode's)
    invalid: jnp.ndarray  # (E, A) the env judged the acting seat's action invalid (None if the env has no flags)
    info: dict  # env.step's info (leaves (E, ...))
    next_obs: jnp.ndarray  # (E, A, D)
    next_state: Any
    memory: Any = None  # a `Recurrent` act's memory the step acted with (None without)
    next_memory: Any = None  # its memory after the step, zeros where the episode ended


def step(env, act: Act, key_act, env_keys, obs, state, env_params=None, memory=None) -> Step:
    """One step of the envs `state` (E,) with `act`; `env_keys` (E, ...) one key (or key pytree) per env;
    `env_params` (traced, optional) the params every env steps with (None: the env's). With `memory`
    (leaves (E, ...)), `act` is a `Recurrent`'s act function: it gets the memory and returns the next one,
    which is reset to zeros where the episode ended (`Step.next_memory`)."""
    masks = jax.vmap(env.masks)(state)
    if memory is None:
        action, extra = act(key_act, obs, state, masks)
    else:
        action, extra, next_memory = act(key_act, obs, state, masks, memory)
    next_obs, next_state, reward, done, info = jax.vmap(env.step, (0, 0, 0, None))(env_keys, state, action, env_params)
    s = Step(obs, state, masks, action, extra, reward, done, env.invalid(info), info, next_obs, next_state)
    return s if memory is None else s._replace(memory=memory, next_memory=reset_memory(next_memory, done))


def batch_split(num_envs: int) -> Callable:
    """The default per-step key split: (act key, one env key per env)."""
    def split(k):
        k_act, k_env = jax.random.split(k)
        return k_act, jax.random.split(k_env, num_envs)
    return split


def scan(env, act: Act | Recurrent, accumulate: Callable, acc0, obs, state, step_keys, split_key: Callable,
         env_params=None, mesh=None):
    """`step`s of the envs (obs, state) (E,), one per leading entry of `step_keys` ->
    ((final obs, final state, final accumulator), stacked per-step outputs (T, ...)).

    `split_key(step_keys[t]) -> (act key, per-env keys (E, ...))`. `accumulate(acc, Step) ->
    (acc, out)` folds each step; `out` (any pytree) is stacked over steps. `mesh` (optional):
    the env batch stays sharded over the mesh's data axis. A `Recurrent` act starts from
    `act.init(E)` (fresh episodes) and its memory is carried step to step (an accumulator that
    wants the last one reads `Step.next_memory`).
    """
    recurrent = isinstance(act, Recurrent)
    fn = act.act if recurrent else act

    def body(carry, k):
        obs, state, acc, memory = carry
        key_act, env_keys = split_key(k)
        s = step(env, fn, key_act, env_keys, obs, state, env_params, memory)
        acc, out = accumulate(acc, s)
        return (*constrain_batch((s.next_obs, s.next_state), mesh), acc, constrain_batch(s.next_memory, mesh)), out

    memory = constrain_batch(act.init(jax.tree.leaves(obs)[0].shape[0]), mesh) if recurrent else None
    (obs, state, acc, _), out = jax.lax.scan(body, (obs, state, acc0, memory), step_keys)
    return (obs, state, acc), out


def run(env, key, num_envs: int, num_steps: int, act: Act | Recurrent, accumulate: Callable, acc0, env_params=None,
        mesh=None):
    """`num_steps` steps of `num_envs` envs reset from `key` -> ((final obs, final state, final accumulator),
    stacked per-step outputs (T, ...)), as `scan`.

    `accumulate(acc, Step) -> (acc, out)`; `acc0` the initial accumulator, or a function of the
    reset states (E,) that returns it (episode metrics start from the initial state). `mesh`
    (optional): the env batch stays sharded over the mesh's data axis.
    """
    k_reset, k_run = jax.random.split(key)
    obs, state = constrain_batch(jax.vmap(env.reset)(jax.random.split(k_reset, num_envs)), mesh)
    acc0 = acc0(state) if callable(acc0) else acc0
    return scan(env, act, accumulate, acc0, obs, state, jax.random.split(k_run, num_steps), batch_split(num_envs),
                env_params, mesh)


# ---- the one evaluator: each env's first episode, with the env's episode metrics ----------------

class Episodes(NamedTuple):
    """What `evaluate` returns: each env's first episode. Leading axis E (one episode per env)."""

    returns: jnp.ndarray  # (E, A) each acting seat's return
    invalid_rate: jnp.ndarray  # (E, A) share of the episode's steps its action was judged invalid (0 without flags)
    length: jnp.ndarray  # (E,) the episode's steps (num_steps when it had not ended by then)
    metrics: dict  # the env's episode metrics (`env.episode_metrics`), leaves (E, ...); {} unless asked for
    extra: Any  # the caller's fold over the episode, leaves (E, ...); None without
    trace: Any  # the caller's per-step output stacked (T, ...), every step (past the episode's end too); None without
    state: Any  # the envs' states after the last step


def evaluate(env, act: Act | Recurrent, key, num_episodes: int, num_steps: int, env_params=None, *, metrics: bool = False,
             fold: Callable | None = None, fold0=None, trace: Callable | None = None) -> Episodes:
    """The one evaluator: `num_episodes` envs reset from `key` (`run`'s key scheme), stepped `num_steps` times
    with `act`; everything is summed over each env's first episode only (an env whose episode ended keeps
    stepping, auto-reset, uncounted), so every policy sees the same episodes on the same key.

    `metrics`: also the env's episode metrics (`env.episode_metrics`, read with `env_params`, or
    `env.default_params` when None). `fold(acc, Step) -> acc` with `fold0` (or a function of the reset
    states returning it): the caller's own per-episode totals (leaves (E, ...)). `trace(Step) -> out`:
    a per-step output, stacked over steps.
    """
    k_reset, k_run = jax.random.split(key)
    obs, state = jax.vmap(env.reset)(jax.random.split(k_reset, num_episodes))
    return evaluate_from(env, act, obs, state, jax.random.split(k_run, num_steps), batch_split(num_episodes),
                         env_params, metrics=metrics, fold=fold, fold0=fold0, trace=trace)


def evaluate_from(env, act: Act | Recurrent, obs, state, step_keys, split_key: Callable, env_params=None, *, metrics: bool = False,
                  fold: Callable | None = None, fold0=None, trace: Callable | None = None) -> Episodes:
    """`evaluate` from given reset envs (obs, state) (E,) with the caller's per-step keys and `split_key` (as
    `scan`): for callers with their own reset or key scheme."""
    num_envs = jax.tree.leaves(obs)[0].shape[0]
    spec = env.episode_metrics if metrics else None
    spec_params = env.default_params if spec is not None and env_params is None else env_params
    fold0 = fold0(state) if callable(fold0) else fold0

    def keep(alive, new, old):
        """`new` where the env's first episode is still running, else `old` (leaves with a leading env axis)."""
        return jax.tree.map(lambda n, o: jnp.where(alive.reshape((-1,) + (1,) * (n.ndim - 1)) > 0, n, o), new, old)

    def accumulate(acc, s: Step):
        alive, ret, inv, length, m, x = acc
        live = alive[:, None]
        ret = ret + live * s.reward
        if s.invalid is not None:
            inv = inv + live * s.invalid.astype(jnp.float32)
        if spec is not None:
            m = keep(alive, jax.vmap(lambda a, st, i: spec.update(a, st, i, spec_params))(m, s.state, s.info), m)
        if fold is not None:
            x = keep(alive, fold(x, s), x)
        acc = (alive * (1.0 - s.done.astype(jnp.float32)), ret, inv, length + alive, m, x)
        return acc, (trace(s) if trace is not None else None)

    num_seats = jax.tree.leaves(obs)[0].shape[1]
    zeros = jnp.zeros((num_envs, num_seats))
    m0 = jax.vmap(lambda st: spec.init(st, spec_params))(state) if spec is not None else {}
    acc0 = (jnp.ones(num_envs), zeros, zeros, jnp.zeros(num_envs), m0, fold0)
    (_, last_state, (_, ret, inv, length, m, x)), out = scan(env, act, accumulate, acc0, obs, state, step_keys,
                                                             split_key, env_params)
    summary = jax.vmap(spec.summary)(m) if spec is not None else {}
    return Episodes(ret, inv / jnp.maximum(length, 1.0)[:, None], length, summary, x, out, last_state)


# ---- the sharded, chunked rollout of the array-level API -------------------------------------

class Trajectory(NamedTuple):
    """Every step of a rollout, time-major: (T, E, A, ...) with E envs, A agents the caller drives."""

    obs: jnp.ndarray  # (T, E, A, D) the observation the action was taken on
    action: jnp.ndarray  # (T, E, A, ...)
    reward: jnp.ndarray  # (T, E, A)
    done: jnp.ndarray  # (T, E) this step ended the episode (the next obs is a fresh episode's)


class Summary(NamedTuple):
    """What a summary-only rollout keeps: per env, O(E) memory whatever the number of steps."""

    return_sum: jnp.ndarray  # (E, A) summed reward over all steps
    episodes: jnp.ndarray  # (E,) finished episodes
    final_obs: jnp.ndarray  # (E, A, D) observation after the last step
    reward_sq_sum: jnp.ndarray  # (E, A) summed squared reward (a cheap checksum of the whole trajectory)


def random_valid_action(key, obs, avail):
    """A uniformly random valid flat action per agent: avail (A, n) bool -> (A,) int32."""
    del obs
    return jax.random.categorical(key, jnp.where(avail, 0.0, -jnp.inf), axis=-1).astype(jnp.int32)


def uniform_action_fn(num_actions: int):
    """-> act_fn drawing a uniform flat action in [0, num_actions) per agent, no mask (invalid ones become WAIT)."""
    def act(key, obs, avail):
        del avail
        return jax.random.randint(key, obs.shape[:1], 0, num_actions, jnp.int32)
    return act


class ArrayEnv(NamedTuple):
    """A registered env's array-level API (`step_arrays` with its auto-reset, `avail_actions_array`) at
    traced `params`, in the rollout's protocol: every agent acts."""

    env: Any
    params: Any
    use_masks: bool = True

    def masks(self, state):
        return self.env.avail_actions_array(state, self.params) if self.use_masks else None

    def step(self, key, state, action, params):
        return self.env.step_arrays(key, state, action, params)

    def invalid(self, info):
        return None


class EpisodeEnv(NamedTuple):
    """A registered env's array-level API at traced `params` WITHOUT auto-reset (`step_env`), in the rollout's
    protocol: for evaluations that play exactly one episode of the env's length per env and read the state it
    ends in, and for `nexus_jax.viz`'s replays. Every agent acts. Masks are those of the env's action format:
    the factored heads' dict for `action_format="structured"`, else the flat (A, n) masks."""

    env: Any
    params: Any

    @property
    def default_params(self):
        return self.params

    @property
    def episode_metrics(self):
        return self.env.episode_metrics

    def reset(self, key):
        return self.env.reset_env(key, self.params)

    def masks(self, state):
        if getattr(self.env, "action_format", "flat") == "structured":
            return self.env.factored_action_masks(state, self.params)
        return self.env.avail_actions_array(state, self.params)

    def step(self, key, state, action, params):
        return self.env.step_env(key, state, action, params)

    def invalid(self, info):
        return None


def _local_rollout(env, params, keys, num_steps: int, act_fn: Callable, trajectory: bool, use_masks: bool = True):
    """Roll the envs of `keys` (E,) for `num_steps` (per-env key streams) -> Trajectory or Summary."""
    pair = jax.vmap(jax.random.split)(keys)  # per env: (key of the first reset, root of the step keys)
    obs, state = jax.vmap(env.reset_env, (0, None))(pair[:, 0], params)
    roots = pair[:, 1]

    def split_key(t):
        k = jax.vmap(lambda kk: jax.random.split(jax.random.fold_in(kk, t)))(roots)
        return k[:, 0], k[:, 1]

    def act(key, obs, state, avail):
        return jax.vmap(act_fn, (0, 0, 0 if use_masks else None))(key, obs, avail), None

    def accumulate(acc, s: Step):
        reward = s.reward.astype(jnp.float32)
        if trajectory:
            return acc, Trajectory(s.obs, s.action, reward, s.done)
        ret, eps, sq = acc
        return (ret + reward, eps + s.done.astype(jnp.int32), sq + reward * reward), None

    zeros = jnp.zeros((keys.shape[0], obs.shape[1]), jnp.float32)
    acc0 = (zeros, jnp.zeros(keys.shape[0], jnp.int32), zeros)
    (obs, _, acc), traj = scan(ArrayEnv(env, params, use_masks), act, accumulate, acc0, obs, state,
                               jnp.arange(num_steps), split_key, params)
    if trajectory:
        return traj
    return Summary(acc[0], acc[1], obs, acc[2])


def make_rollout(env, num_envs: int, num_steps: int, *, mesh: Mesh | None = None, act_fn: Callable | None = None,
                 env_chunks: int = 1, trajectory: bool = True, use_masks: bool = True, axis: str = DATA_AXIS):
    """-> jitted `rollout(key, params)`: `num_envs` envs of `env` for `num_steps` steps, with auto-reset.

    `env` is any nexus_jax env (array-level `reset_env`/`step_arrays`/`avail_actions_array`).
    `act_fn(key, obs (A, D), avail (A, n)) -> (A,)` picks the actions of one env (default: a
    uniformly random valid action). `mesh`: shard the env batch over its `axis` (each device
    runs `num_envs / devices` envs; params replicated). `env_chunks`: each device runs its envs
    in that many sequential chunks (peak memory / env_chunks). `trajectory`: keep every step
    (Trajectory, time-major) or only per-env sums (Summary: memory independent of `num_steps`).
    `use_masks=False` skips computing action masks (`avail` is None; the default action is then
    a uniform flat action, invalid ones become WAIT as the env's rules say): for throughput or
    memory runs where mask checks would dominate the step.
    The result does not depend on `mesh` or `env_chunks`.
    """
    if act_fn is None:
        act_fn = random_valid_action if use_masks else uniform_action_fn(int(env.action_space(env.agents[0]).n))
    devices = mesh_size(mesh, axis)
    check_divisible(num_envs, mesh, "num_envs", axis)
    local = num_envs // devices
    if local % env_chunks:
        raise ValueError(f"envs per device ({local}) must be a multiple of env_chunks ({env_chunks})")

    def per_device(keys, params):
        if env_chunks == 1:
            return _local_rollout(env, params, keys, num_steps, act_fn, trajectory, use_masks)
        chunks = keys.reshape((env_chunks, -1) + keys.shape[1:])
        out = jax.lax.map(lambda k: _local_rollout(env, params, k, num_steps, act_fn, trajectory, use_masks), chunks)
        if trajectory:  # (C, T, Ec, ...) -> (T, C*Ec, ...)
            return jax.tree.map(lambda x: jnp.moveaxis(x, 0, 1).reshape((x.shape[1], -1) + x.shape[3:]), out)
        return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), out)

    env_axis = 1 if trajectory else 0
    if mesh is not None:
        out_spec = jax.tree.map(lambda _: P(*([None] * env_axis), axis),
                                (Trajectory if trajectory else Summary)(*([0] * 4)))
        per_device = jax.shard_map(per_device, mesh=mesh, in_specs=(P(axis), P()), out_specs=out_spec,
                                   check_vma=False)

    def rollout(key, params=None):
        params = env.default_params if params is None else params
        keys = constrain_batch(jax.random.split(key, num_envs), mesh, 0, axis)
        return per_device(keys, params)

    return jax.jit(rollout)
