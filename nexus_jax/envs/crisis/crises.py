"""Crises: the episode's schedule (data), the capacity it leaves, urgent injection, preemption."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from nexus_jax.envs.crisis.constants import CORES, GPU, RAM, Crisis
from nexus_jax.envs.crisis.state import CrisisSchedule


def hours_to_steps(hours: jax.Array, params) -> jax.Array:
    return jnp.round(hours * 60.0 / params.minutes_per_step).astype(jnp.int32)


def num_steps(params) -> jax.Array:
    """Episode length in steps (traced: episode_hours and minutes_per_step are params)."""
    return hours_to_steps(params.episode_hours, params)


def params_schedule(params, level: jax.Array) -> CrisisSchedule:
    """The schedule written in params; entries above the curriculum level are disabled."""
    start = hours_to_steps(params.crisis_start_h, params)
    return CrisisSchedule(
        kind=params.crisis_kind,
        start_step=start,
        end_step=start + hours_to_steps(params.crisis_duration_h, params),
        magnitude=params.crisis_magnitude.astype(jnp.float32),
        enabled=(params.crisis_kind != Crisis.NONE) & (level >= params.crisis_level),
    )


def random_schedule(key: jax.Array, params, level: jax.Array) -> CrisisSchedule:
    """Random crises (kinds, start, span, magnitude from params); overlapping entries are compound crises."""
    C = params.max_crises
    u = jax.random.uniform(key, (4, C))  # one PRNG call: kind, start, span, magnitude
    lerp = lambda x, lo, hi: lo + x * (hi - lo)  # noqa: E731
    cdf = jnp.cumsum(params.rand_crisis_probs)
    kind = jnp.minimum(jnp.sum(u[0][:, None] >= cdf[None, :], axis=1), 2) + 1  # GPU_OUTAGE, URGENT_TASK, RESOURCE_PRESSURE
    start_h = lerp(u[1], params.rand_crisis_start_min_h, params.rand_crisis_start_max_h)
    dur_h = lerp(u[2], params.rand_crisis_duration_min_h, params.rand_crisis_duration_max_h)
    mag = lerp(u[3], params.rand_crisis_magnitude_min, params.rand_crisis_magnitude_max)
    mag = jnp.where(kind == Crisis.GPU_OUTAGE, 1.0, mag)
    start = hours_to_steps(start_h, params)
    return CrisisSchedule(kind=kind.astype(jnp.int32), start_step=start, end_step=start + hours_to_steps(dur_h, params),
                          magnitude=mag, enabled=level >= params.rand_crisis_min_level[kind - 1])


def make_schedule(key: jax.Array, params, level: jax.Array) -> CrisisSchedule:
    fixed, rand = params_schedule(params, level), random_schedule(key, params, level)
    return jax.tree.map(lambda r, f: jnp.where(params.crisis_source == 1, r, f), rand, fixed)


def active(schedule: CrisisSchedule, step: jax.Array) -> jax.Array:
    """(C,) bool: entries in force at `step`."""
    return schedule.enabled & (schedule.start_step <= step) & (step < schedule.end_step)


def capacity_at(schedule: CrisisSchedule, step: jax.Array, level: jax.Array, params) -> jax.Array:
    """(3,) cores, RAM, GPU usable at `step`: the cluster minus the level's cut, times every active crisis."""
    base = jnp.stack([params.total_cores - params.level_core_cut[level],
                      params.total_ram - params.level_ram_cut[level],
                      jnp.asarray(params.total_gpu, jnp.float32)])
    on = active(schedule, step)
    keep = 1.0 - schedule.magnitude
    gpu_f = jnp.prod(jnp.where(on & (schedule.kind == Crisis.GPU_OUTAGE), keep, 1.0))
    pres_f = jnp.prod(jnp.where(on & (schedule.kind == Crisis.RESOURCE_PRESSURE), keep, 1.0))
    factor = jnp.zeros(3).at[CORES].set(pres_f).at[RAM].set(pres_f).at[GPU].set(gpu_f)
    # Whole units only: a GPU at 50% is no GPU for a task that needs one.
    return jnp.floor(base * factor + 1e-6)


def urgent_due(schedule: CrisisSchedule, step: jax.Array) -> jax.Array:
    """() bool: an enabled URGENT_TASK entry has started by `step`."""
    return jnp.any(schedule.enabled & (schedule.kind == Crisis.URGENT_TASK) & (schedule.start_step <= step))


def greedy_fit(order: jax.Array, demand: jax.Array, wants: jax.Array, free: jax.Array) -> jax.Array:
    """Grant seats in `order` whose demand still fits `free`; (A,) bool granted. Never exceeds `free`."""

    def body(left, i):
        ok = wants[i] & jnp.all(demand[i] <= left + 1e-6)
        return left - jnp.where(ok, demand[i], 0.0), (i, ok)

    _, (idx, ok) = jax.lax.scan(body, free, order)
    return jnp.zeros(wants.shape, bool).at[idx].set(ok)
