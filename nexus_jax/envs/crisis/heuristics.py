"""Hand-written crisis-v0 policies (not learners): references for evaluation and the other seats of a text seat."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from nexus_jax.envs.crisis.constants import Base, Nego
from nexus_jax.envs.crisis.negotiation import encode


def edf_actions(state, masks: jax.Array, max_tasks: int) -> jax.Array:
    """Earliest deadline first: request the valid ready task with the earliest deadline, HOLD, never
    release, WAIT while a task runs (or nothing is requestable).

    Any leading batch shape: `masks` (..., A, n) from `avail_actions`, `state.tasks.deadline_h`
    (..., A, K). Returns flat indices (..., A) int32.
    """
    first = encode(Base.REQUEST, Nego.HOLD, 0)  # REQUEST slot k with HOLD is first + 2 k
    req = masks[..., first:first + 2 * max_tasks:2]  # (..., A, K)
    pick = jnp.argmin(jnp.where(req, state.tasks.deadline_h, jnp.inf), -1)
    return jnp.where(req.any(-1), first + 2 * pick, encode(Base.WAIT, Nego.HOLD)).astype(jnp.int32)
