"""The one rollout every trainer and evaluator runs: a vmapped env step driven by an act function.

`step` is one step of a batch of envs (E,) of a `LearnerEnv`: the learner seats' masks, the
act function's action, the vmapped `env.step` (auto-reset), and the learner seats' invalid
flags. `run` is `num_steps` of them in one `lax.scan` from `num_envs` fresh envs, folding a
per-step accumulator. PPO, GRPO and BC (training), `train.evaluate` and the pipeline's
evaluation all step through `step`; all but PPO and GRPO (whose env batch lives across
updates, or whose keys are shared within groups) through `run`.

Key use is fixed here, so two callers with the same key see the same episodes: `run` splits
its key into (reset, steps); each step's key into (act, env); the env key into one per env.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from nexus_jax import sharding

# act(key, obs (E, A, D), state (E,), masks) -> (action (E, A[, 5]), extra): `extra` (any pytree, or None)
# is what the caller wants kept beside the action (log-probabilities, values).
Act = Callable[[Any, jnp.ndarray, Any, Any], tuple]


class Step(NamedTuple):
    """One step of E envs: what an accumulator sees. Leading axis E; `state` is the state acted in."""

    obs: jnp.ndarray  # (E, A, D) observation acted on
    state: Any  # env states acted in
    masks: Any  # learner seats' masks (flat (E, A, n) or the factored dict)
    action: jnp.ndarray  # (E, A[, 5])
    extra: Any  # the act function's extra output
    reward: jnp.ndarray  # (E, A)
    done: jnp.ndarray  # (E,) the episode ended (the next obs and state are a fresh episode's)
    invalid: jnp.ndarray  # (E, A) the env judged the learner seat's action invalid
    info: dict  # env.step's info (leaves (E, ...))
    next_obs: jnp.ndarray  # (E, A, D)
    next_state: Any


def step(env, act: Act, key_act, env_keys, obs, state, env_params=None) -> Step:
    """One step of the envs `state` (E,) with `act`; `env_keys` (E,) one key per env; `env_params` (traced,
    optional) the params every env steps with (default: the env's)."""
    masks = jax.vmap(env.masks)(state)
    action, extra = act(key_act, obs, state, masks)
    next_obs, next_state, reward, done, info = jax.vmap(env.step, (0, 0, 0, None))(env_keys, state, action, env_params)
    return Step(obs, state, masks, action, extra, reward, done, env.batch_learner_info(info, "invalid"), info,
                next_obs, next_state)


def run(env, key, num_envs: int, num_steps: int, act: Act, accumulate: Callable, acc0, env_params=None, mesh=None):
    """`num_steps` steps of `num_envs` envs reset from `key` -> (final accumulator, stacked per-step outputs (T, ...)).

    `accumulate(acc, Step) -> (acc, out)` folds each step; `out` (any pytree) is stacked over
    steps. `mesh` (optional): the env batch stays sharded over the mesh's data axis.
    """
    k_reset, k_run = jax.random.split(key)
    obs, state = sharding.constrain_batch(jax.vmap(env.reset)(jax.random.split(k_reset, num_envs)), mesh)

    def body(carry, k):
        obs, state, acc = carry
        k_act, k_env = jax.random.split(k)
        s = step(env, act, k_act, jax.random.split(k_env, num_envs), obs, state, env_params)
        acc, out = accumulate(acc, s)
        return (*sharding.constrain_batch((s.next_obs, s.next_state), mesh), acc), out

    (_, _, acc), outs = jax.lax.scan(body, (obs, state, acc0), jax.random.split(k_run, num_steps))
    return acc, outs
