"""Task sets as data: the default nine-task pipeline (+ one urgent task) and a random generator.

A task set is a `TaskSet` of (A, K) arrays (seat a, task slot k) plus a (T, T) dependency
matrix over flat slots t = a * K + k (`deps[t, u]`: task t needs task u done first).
Urgent tasks exist in the set but are released only when an URGENT_TASK crisis fires;
their deadline is then relative to the injection time.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct


@struct.dataclass
class TaskSet:
    exists: jax.Array  # (A, K) bool, slot holds a task
    urgent: jax.Array  # (A, K) bool, released by an URGENT_TASK crisis only
    cores: jax.Array  # (A, K) float
    ram: jax.Array  # (A, K) float, GB
    gpu: jax.Array  # (A, K) float, GPUs
    duration_min: jax.Array  # (A, K) float, minutes of allocated time to finish
    deadline_h: jax.Array  # (A, K) float, hours from episode start (urgent: from injection)
    deps: jax.Array  # (T, T) bool, deps[t, u]: t needs u

    def demand(self) -> jax.Array:
        """(A, K, 3) cores, RAM, GPU."""
        return jnp.stack([self.cores, self.ram, self.gpu], -1)


# The default pipeline of the original CrisisCompute code [seed]: (seat, slot, name, cores, ram, gpu, minutes, deadline_h, deps).
DEFAULT_TASKS = (
    (0, 0, "load_raw_batch_1", 2, 4, 0, 45, 2.0, ()),
    (0, 1, "load_raw_batch_2", 2, 4, 0, 45, 2.5, ()),
    (0, 2, "load_raw_batch_3", 2, 4, 0, 40, 3.0, ()),
    (1, 0, "clean_batch_1", 4, 6, 0, 50, 3.5, ((0, 0),)),
    (1, 1, "clean_batch_2", 4, 6, 0, 50, 4.0, ((0, 1),)),
    (1, 2, "clean_batch_3", 4, 6, 0, 45, 4.5, ((0, 2),)),
    (2, 0, "train_baseline_model", 4, 12, 1, 90, 5.5, ((1, 0), (1, 1))),
    (2, 1, "train_advanced_model", 4, 10, 1, 75, 6.5, ((1, 2),)),
    (2, 2, "validate_models", 2, 8, 1, 30, 7.5, ((2, 0), (2, 1))),
)
# The urgent task injected by the default crisis scenario [ours]: it needs the GPU the trainer
# also needs, so its injection is a real conflict; deadline 1.5 h after injection.
DEFAULT_URGENT = ((0, 3, "urgent_hotfix_batch", 4, 8, 1, 40, 1.5, ()),)
DEFAULT_NUM_AGENTS, DEFAULT_MAX_TASKS = 3, 4


def task_names(num_agents: int, max_tasks: int) -> list[list[str]]:
    """Human-readable names of the default set's slots ("" for empty slots)."""
    names = [["" for _ in range(max_tasks)] for _ in range(num_agents)]
    for a, k, name, *_ in DEFAULT_TASKS + DEFAULT_URGENT:
        if a < num_agents and k < max_tasks:
            names[a][k] = name
    return names


def default_task_arrays(num_agents: int, max_tasks: int) -> dict[str, np.ndarray] | None:
    """The default task set as numpy arrays for params, or None if it does not fit the shapes."""
    if num_agents < DEFAULT_NUM_AGENTS or max_tasks < DEFAULT_MAX_TASKS:
        return None
    A, K = num_agents, max_tasks
    out = {
        "task_exists": np.zeros((A, K), bool),
        "task_urgent": np.zeros((A, K), bool),
        "task_cores": np.zeros((A, K), np.float32),
        "task_ram": np.zeros((A, K), np.float32),
        "task_gpu": np.zeros((A, K), np.float32),
        "task_duration_min": np.zeros((A, K), np.float32),
        "task_deadline_h": np.zeros((A, K), np.float32),
        "task_deps": np.zeros((A * K, A * K), bool),
    }
    for urgent, rows in ((False, DEFAULT_TASKS), (True, DEFAULT_URGENT)):
        for a, k, _name, cores, ram, gpu, minutes, deadline, deps in rows:
            out["task_exists"][a, k] = True
            out["task_urgent"][a, k] = urgent
            out["task_cores"][a, k] = cores
            out["task_ram"][a, k] = ram
            out["task_gpu"][a, k] = gpu
            out["task_duration_min"][a, k] = minutes
            out["task_deadline_h"][a, k] = deadline
            for b, j in deps:
                out["task_deps"][a * K + k, b * K + j] = True
    return out


def empty_task_arrays(num_agents: int, max_tasks: int) -> dict[str, np.ndarray]:
    """A task set with no tasks (for shapes the default set does not fit; use task_source='random')."""
    A, K = num_agents, max_tasks
    z = lambda dt: np.zeros((A, K), dt)  # noqa: E731
    return {
        "task_exists": z(bool), "task_urgent": z(bool), "task_cores": z(np.float32),
        "task_ram": z(np.float32), "task_gpu": z(np.float32), "task_duration_min": z(np.float32),
        "task_deadline_h": z(np.float32), "task_deps": np.zeros((A * K, A * K), bool),
    }


def params_task_set(params) -> TaskSet:
    """The fixed task set stored in params."""
    return TaskSet(
        exists=params.task_exists, urgent=params.task_urgent, cores=params.task_cores,
        ram=params.task_ram, gpu=params.task_gpu, duration_min=params.task_duration_min,
        deadline_h=params.task_deadline_h, deps=params.task_deps,
    )


def generate_task_set(key: jax.Array, params) -> TaskSet:
    """A random pipeline from the params' distribution (training and holdout task sets).

    Seat a's tasks form a chain (slot k after slot k-1 with prob gen_chain_prob); seat a > 0's
    slot k also needs seat a-1's slot k with prob gen_cross_dep_prob (the loader -> cleaner ->
    trainer shape of the default set). The last slot of seat 0 is an urgent task when
    gen_urgent_prob fires. Deadlines are cumulative durations times a random slack.
    """
    A, K = params.num_agents, params.max_tasks
    # One draw for everything (one PRNG call keeps compile time low): u[i] is uniform(0, 1).
    u = jax.random.uniform(key, (9, A, K))
    lerp = lambda x, lo, hi: lo + x * (hi - lo)  # noqa: E731
    exists = (u[0] < params.gen_task_prob).at[:, 0].set(True)  # every seat has work
    cores = jnp.clip(jnp.floor(lerp(u[1], params.gen_cores_min, params.gen_cores_max + 1.0)),
                     params.gen_cores_min, params.gen_cores_max)
    ram = jnp.round(lerp(u[2], params.gen_ram_min, params.gen_ram_max))
    seat_gpu_p = jnp.where(jnp.arange(A) == A - 1, params.gen_gpu_prob_last, params.gen_gpu_prob)[:, None]
    gpu = (u[3] < seat_gpu_p).astype(jnp.float32)
    duration = jnp.maximum(jnp.round(lerp(u[4], params.gen_duration_min, params.gen_duration_max) / 5.0) * 5.0, 5.0)
    chain = (u[5] < params.gen_chain_prob) & (jnp.arange(K) > 0)[None, :]
    cross = (u[6] < params.gen_cross_dep_prob) & (jnp.arange(A) > 0)[:, None]
    urgent_fires = u[7, 0, 0] < params.gen_urgent_prob
    urgent = jnp.zeros((A, K), bool).at[0, K - 1].set(urgent_fires & (K > 1))
    exists = exists | urgent
    chain, cross = chain & ~urgent, cross & ~urgent

    T = A * K
    t = jnp.arange(T).reshape(A, K)
    deps = jnp.zeros((T, T), bool)
    prev = jnp.roll(t, 1, axis=1)  # slot k-1 of the same seat
    up = jnp.roll(t, 1, axis=0)  # same slot of seat a-1
    prev_ok = exists & chain & jnp.roll(exists, 1, axis=1)
    up_ok = exists & cross & jnp.roll(exists, 1, axis=0) & ~jnp.roll(urgent, 1, axis=0)
    deps = deps.at[t.ravel(), prev.ravel()].max(prev_ok.ravel())
    deps = deps.at[t.ravel(), up.ravel()].max(up_ok.ravel())

    # Deadline: earliest possible finish along the dependency chain (a longest-path bound,
    # relaxed K*A times) times a random slack; urgent tasks get their own relative deadline.
    dur_h = jnp.where(exists, duration / 60.0, 0.0).ravel()

    def relax(finish, _):
        start = jnp.max(jnp.where(deps, finish[None, :], 0.0), axis=1)
        return start + dur_h, None

    finish, _ = jax.lax.scan(relax, dur_h, None, length=T)
    slack = lerp(u[8].reshape(T), params.gen_slack_min, params.gen_slack_max)
    deadline = jnp.round(finish * slack * 2.0) / 2.0 + 0.5
    deadline = jnp.where(urgent.ravel(), params.gen_urgent_deadline_h, deadline).reshape(A, K)
    z = lambda x: jnp.where(exists, x, 0.0).astype(jnp.float32)  # noqa: E731
    return TaskSet(exists=exists, urgent=urgent, cores=z(cores), ram=z(ram), gpu=z(gpu),
                   duration_min=z(duration), deadline_h=z(deadline), deps=deps & exists.ravel()[:, None])
