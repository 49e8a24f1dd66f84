"""Reward: 0.6 individual + 0.4 team [spec], every term and weight a param."""
from __future__ import annotations

import jax
import jax.numpy as jnp


def jain(x: jax.Array, mask: jax.Array) -> jax.Array:
    """Jain's fairness index over the masked entries; 0 when all are zero (nothing served yet)."""
    x = jnp.where(mask, x, 0.0)
    n = jnp.maximum(jnp.sum(mask), 1)
    sq = jnp.sum(x * x)
    return jnp.where(sq > 0, jnp.sum(x) ** 2 / (n * jnp.maximum(sq, 1e-12)), 0.0)


def task_stats(state):
    """Counts over released tasks: (total, done, on time) team-wide and per seat, and seat completion rates."""
    counted = state.tasks.exists & state.released
    done = counted & state.done
    on_time = done & (state.completed_h <= state.tasks.deadline_h + 1e-6)
    per_total = jnp.sum(counted, 1)
    per_rate = jnp.sum(done, 1) / jnp.maximum(per_total, 1)
    return (jnp.sum(counted), jnp.sum(done), jnp.sum(on_time), per_rate, per_total > 0)


def team_score(state, params) -> jax.Array:
    """The seed's team score: completion, on-time, incomplete share, all-done bonus, fairness."""
    total, done, on_time, per_rate, has = task_stats(state)
    denom = jnp.maximum(total, 1)
    cr, otr = done / denom, on_time / denom
    all_on_time = (total > 0) & (on_time == total)
    return (params.team_completion * cr + params.team_on_time * otr - params.team_incomplete * (1.0 - cr)
            + params.team_all_done * all_on_time + params.team_fairness * jain(per_rate, has))


def completion_reward(completed: jax.Array, completed_h: jax.Array, deadline_h: jax.Array, params) -> jax.Array:
    """(A,) reward for tasks completed this step [seed]."""
    early = deadline_h - completed_h
    late = jnp.maximum(-early, 0.0)
    on_time = params.on_time_base + params.early_bonus_per_hour * jnp.maximum(early, 0.0) + params.on_time_bonus
    late_r = jnp.maximum(0.0, params.late_base - params.late_rate * late) - jnp.minimum(params.late_penalty_cap, late)
    r = jnp.where(early >= -1e-6, on_time, late_r)
    return jnp.sum(jnp.where(completed, r, 0.0), axis=1)


def individual_reward(completed, state, waiting, newly_missed, invalid, params) -> jax.Array:
    """(A,) completion terms - waiting - missed deadlines - invalid actions."""
    r = completion_reward(completed, state.completed_h, state.tasks.deadline_h, params)
    r = r - params.wait_penalty * (params.minutes_per_step / 10.0) * waiting
    r = r - params.missed_deadline_penalty * jnp.sum(newly_missed, axis=1)
    return r - params.invalid_penalty * invalid


def team_reward(score_before, score_after, broken_now, params) -> jax.Array:
    """() delta (or level) of the team score, minus the broken-contract term."""
    base = jnp.where(params.team_reward_mode == 1, score_after, score_after - score_before)
    return base - params.team_broken_contract * broken_now


def combine(individual, team, params) -> jax.Array:
    """(A,) w_individual x individual + w_team x team, then `reward_share` of it replaced by the seats' mean."""
    r = params.w_individual * individual + params.w_team * team
    shared = (1.0 - params.reward_share) * r + params.reward_share * jnp.mean(r)
    return jnp.where(params.reward_share > 0, shared, r)  # exactly the unshared reward at the default 0
