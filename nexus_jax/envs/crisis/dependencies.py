"""What each task's finish leads to through the dependency graph: opt-in observation features.

The plain observation shows a task's own deadline, work and readiness, but not what waits on it:
on the default task set EDF's 174.75 can be beaten by +3.0 only by starting `load_raw_batch_3`
first, because it alone heads a chain (batch 3 -> clean 3 -> advanced model) that nothing else
blocks, which keeps the trainer seat busy earlier. `dependency_features` gives, per task (A, K, 5):

  dependents    undone tasks that need it, directly or transitively / slots
  unlocks       undone tasks that need it and whose every other undone prerequisite needs it or is
                needed by it (finishing it, after its own prerequisites, is all their chain waits on) / slots
  unlock_hours  hours of work left of those tasks / episode hours
  chain_hours   the longest chain of work left that starts at it (its own work included) / episode hours
  idle_unlocks  of the tasks it unlocks, those of other seats that are idle now (nothing running, nothing
                ready): the work its chain would give a seat that has none / slots

All are 0 for an empty, done or unreleased slot. Pure jnp on one state (no batch axis); the graph
is the episode's `tasks.deps` (T = A * K flat slots), so the cost is a few (T, T) products per step.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from nexus_jax.envs.crisis.negotiation import ready

DEPENDENCY_FEATURES = 5


def closure(deps: jax.Array) -> jax.Array:
    """(T, T) bool: c[t, u] iff t needs u directly or through a chain (repeated squaring, ceil(log2 T) rounds)."""
    c = deps
    for _ in range(max(1, int(deps.shape[0] - 1).bit_length())):
        c = c | ((c.astype(jnp.float32) @ c.astype(jnp.float32)) > 0)
    return c


def dependency_features(state, params) -> jax.Array:
    """(A, K, DEPENDENCY_FEATURES) float32 for every seat's task slots (layout in the module docstring)."""
    A, K = state.done.shape
    T = A * K
    t = state.tasks
    undone = (t.exists & ~state.done).reshape(T)
    visible = (t.exists & state.released & ~state.done).reshape(T)
    left_h = (jnp.maximum(t.duration_min - state.progress_min, 0.0) / 60.0).reshape(T) * undone
    needs = closure(t.deps) & undone[:, None] & undone[None, :]  # [d, u]: undone d needs undone u
    dependents = needs.sum(0)
    # d is unlocked by u: d needs u, and every undone prerequisite v of d is u, needs u or is needed by u.
    on_chain = needs.T | needs | jnp.eye(T, dtype=bool)  # [u, v]
    blocked_elsewhere = needs[:, None, :] & ~on_chain[None]  # [d, u, v]
    unlocked = needs & ~blocked_elsewhere.any(-1)  # [d, u]
    unlocks = unlocked.sum(0)
    seat = jnp.arange(T) // K
    idle = ((state.running_slot < 0) & ~jnp.any(ready(state), -1))[seat]  # (T,): the seat of slot d is idle
    idle_unlocks = (unlocked & idle[:, None] & (seat[:, None] != seat[None, :])).sum(0)
    unlock_h = (unlocked * left_h[:, None]).sum(0)

    def longer(chain, _):  # chain[u]: work left on the longest chain from u (u, then what needs it)
        return left_h + jnp.max(jnp.where(t.deps & undone[:, None], chain[:, None], 0.0), 0), None

    chain, _ = jax.lax.scan(longer, left_h, None, length=T)
    feats = jnp.stack([dependents / T, unlocks / T, unlock_h / params.episode_hours,
                       chain / params.episode_hours, idle_unlocks / T], -1)
    return jnp.where(visible[:, None], feats, 0.0).reshape(A, K, DEPENDENCY_FEATURES).astype(jnp.float32)
