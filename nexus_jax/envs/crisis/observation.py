"""Per-seat flat observation (for MLPs) and its documented layout.

`get_obs` builds named blocks and checks each against `block_sizes`, which `obs_size` and
`observation_layout` read, so the layout cannot drift from the vector; `BLOCK_DOCS` says what
each block holds (the documentation's observation table is generated from these).
All values are scaled to about [0, 1] and clipped to +-obs_clip.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from nexus_jax.envs.crisis.constants import NUM_ERRORS, NUM_LEVELS, NUM_OUTCOMES, NUM_RESOURCES, Crisis
from nexus_jax.envs.crisis.crises import active, num_steps
from nexus_jax.envs.crisis.dependencies import DEPENDENCY_FEATURES, dependency_features
from nexus_jax.envs.crisis import negotiation as nego
from nexus_jax.envs.crisis.reward import task_stats

TASK_FEATURES = 14
TASK_DEADLINE = 8  # index of "hours to deadline" within a slot's features (EDF's key)
TASK_SLACK, TASK_FITS = 12, 13  # indices of the slack and fits-now features
TASK_IDLE_UNLOCKS = TASK_FEATURES + 4  # index of the "idle_unlocks" feature (with dependency_features)
PEER_FEATURES = 19
GLOBAL_FEATURES = 16


def task_features(dependency: bool = False) -> int:
    """Features per task slot: 14, or 19 with the opt-in dependency features."""
    return TASK_FEATURES + (DEPENDENCY_FEATURES if dependency else 0)


# Block -> (size as an expression in A seats, K task slots and F = task_features(...), what it holds), in order.
BLOCK_DOCS = {
    "global": ("16", "step / episode steps, hour / episode hours, capacity / cluster (cores, RAM, GPU), "
                     "free / cluster (3), GPU outage on, resource pressure on, negotiation on, curriculum level "
                     "one-hot (5)"),
    "self_id": ("A", "one-hot of my seat"),
    "tasks": ("F*K", "per own task slot, F = 14: released, done, running, ready, remaining work share, cores, RAM, "
                     "GPU (shares of the cluster), hours to deadline / episode hours, missed, urgent, hours of work "
                     "left / episode hours, slack / episode hours, fits the free capacity now; with "
                     "dependency_features F = 19: dependents, unlocks, unlock hours, chain hours, idle unlocks"),
    "peers": ("19*(A-1)", "per peer, in order i+1, ..., i+A-1 (mod A), 19 each: running, running demand (3), "
                          "requested last step, last demand (3), yielded last step, my trust in it, its trust in "
                          "me, its reputation, my beliefs about it (cores, RAM, GPU shares, yield probability), "
                          "I owe it, it owes me, its completion rate"),
    "last_error": ("6", "one-hot of the Error of my last action (NONE when it was valid)"),
    "last_outcome": ("8", "Outcome flags of my last step: allocated, denied, yielded, charter, preempted, "
                          "completed, contract honoured, contract broken"),
    "reputation": ("1", "my reputation (mean trust of the others in me)"),
    "belief_accuracy": ("1", "accuracy of my beliefs about the peers' demand last step"),
}


def block_sizes(num_agents: int, max_tasks: int, dependency: bool = False) -> dict[str, int]:
    """Width of each observation block, in layout order."""
    return {"global": GLOBAL_FEATURES, "self_id": num_agents, "tasks": max_tasks * task_features(dependency),
            "peers": (num_agents - 1) * PEER_FEATURES, "last_error": NUM_ERRORS, "last_outcome": NUM_OUTCOMES,
            "reputation": 1, "belief_accuracy": 1}


def obs_size(num_agents: int, max_tasks: int, dependency: bool = False) -> int:
    return sum(block_sizes(num_agents, max_tasks, dependency).values())


def observation_layout(params) -> dict[str, slice]:
    """Name -> slice of each block in the flat observation vector."""
    out, start = {}, 0
    for name, size in block_sizes(params.num_agents, params.max_tasks, params.dependency_features).items():
        out[name] = slice(start, start + size)
        start += size
    return out


def _cluster(params) -> jax.Array:
    return jnp.stack([params.total_cores, params.total_ram, jnp.maximum(params.total_gpu, 1.0)]).astype(jnp.float32)


def get_obs(state, params) -> jax.Array:
    """(A, D) observations of every seat."""
    A, K = state.done.shape
    cluster = _cluster(params)
    now = nego.now_hours(state.step, params)
    on = active(state.schedule, state.step)
    glob = jnp.concatenate([
        jnp.stack([state.step / num_steps(params), now / params.episode_hours]),
        state.capacity / cluster,
        (state.capacity - nego.used(state)) / cluster,
        jnp.stack([jnp.any(on & (state.schedule.kind == Crisis.GPU_OUTAGE)),
                   jnp.any(on & (state.schedule.kind == Crisis.RESOURCE_PRESSURE)),
                   nego.negotiation_on(state, params)]).astype(jnp.float32),
        jax.nn.one_hot(state.level, NUM_LEVELS),
    ])
    t = state.tasks
    running = state.running_slot[:, None] == jnp.arange(K)[None, :]
    remaining = jnp.where(t.exists, 1.0 - state.progress_min / jnp.maximum(t.duration_min, 1e-6), 0.0)
    visible = t.exists & state.released
    left_h = jnp.where(visible & ~state.done, jnp.maximum(t.duration_min - state.progress_min, 0.0) / 60.0, 0.0)
    to_deadline = jnp.where(visible, t.deadline_h - now, 0.0)
    free = state.capacity - nego.used(state)
    fits = visible & ~state.done & jnp.all(t.demand() <= free[None, None, :] + 1e-6, axis=-1)
    tasks = jnp.stack([
        visible, state.done, running, nego.ready(state), remaining,
        t.cores / cluster[0], t.ram / cluster[1], t.gpu / cluster[2],
        to_deadline / params.episode_hours, state.missed, t.urgent & visible,
        left_h / params.episode_hours, jnp.where(visible & ~state.done, to_deadline - left_h, 0.0) / params.episode_hours,
        fits,
    ], -1).astype(jnp.float32)
    if params.dependency_features:
        tasks = jnp.concatenate([tasks, dependency_features(state, params)], -1)
    tasks = tasks.reshape(A, K * tasks.shape[-1])

    rep = nego.reputation(state.trust)
    per_rate = task_stats(state)[3]
    run_dem = nego.running_demand(state) / cluster
    beliefs = jnp.concatenate([state.beliefs[..., :NUM_RESOURCES] / cluster, state.beliefs[..., NUM_RESOURCES:]], -1)

    f32 = lambda x: x.astype(jnp.float32)  # noqa: E731
    per_peer = jnp.concatenate([  # (A, .) features of seat j as everyone sees it
        f32(state.running_slot >= 0)[:, None], run_dem, f32(state.last_requested)[:, None],
        state.last_demand / cluster, f32(state.last_yielded)[:, None]], 1)
    rows = jnp.broadcast_to(per_peer[None], (A, A, per_peer.shape[1]))  # [i, j]
    pair = jnp.concatenate([  # [i, j] features of the pair
        rows, state.trust[..., None], state.trust.T[..., None], jnp.broadcast_to(rep[None, :, None], (A, A, 1)),
        beliefs, f32(state.contract_open.T)[..., None], f32(state.contract_open)[..., None],
        jnp.broadcast_to(per_rate[None, :, None], (A, A, 1))], -1)
    idx = (jnp.arange(A)[:, None] + jnp.arange(1, A)[None, :]) % A  # peers in order i+1, ..., i+A-1
    peers = pair[jnp.arange(A)[:, None], idx].reshape(A, (A - 1) * PEER_FEATURES)
    blocks = {
        "global": jnp.broadcast_to(glob, (A, GLOBAL_FEATURES)), "self_id": jnp.eye(A), "tasks": tasks, "peers": peers,
        "last_error": jax.nn.one_hot(state.last_error, NUM_ERRORS), "last_outcome": state.last_outcome.astype(jnp.float32),
        "reputation": rep[:, None], "belief_accuracy": state.last_belief_accuracy[:, None],
    }
    sizes = block_sizes(A, K, params.dependency_features)
    widths = {name: b.shape[1] for name, b in blocks.items()}
    if widths != sizes or list(widths) != list(sizes):
        raise AssertionError(f"crisis observation blocks {widths} differ from the documented layout {sizes}")
    obs = jnp.concatenate(list(blocks.values()), 1)
    return jnp.clip(obs, -params.obs_clip, params.obs_clip).astype(jnp.float32)
