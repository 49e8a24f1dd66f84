"""Adaptive curriculum: advance a level when completion, fairness and belief accuracy clear thresholds."""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from nexus_jax.envs.crisis.constants import NUM_LEVELS


@struct.dataclass
class CurriculumThresholds:
    completion: Any = 0.7  # mean episode completion rate to pass a level [ours]
    fairness: Any = 0.8  # mean Jain index [ours]
    belief_accuracy: Any = 0.5  # mean belief accuracy [ours]


def advance_level(level: jax.Array, completion: jax.Array, fairness: jax.Array, belief_accuracy: jax.Array,
                  thresholds: CurriculumThresholds = CurriculumThresholds()) -> jax.Array:
    """Pure and jittable: level + 1 (capped at 4) when every metric meets its threshold, else level.

    No skipping (the seed): one call advances at most one level. Metrics are usually means over
    a batch of episodes at the current level; pass the result as params.curriculum_level.
    """
    ok = ((completion >= thresholds.completion) & (fairness >= thresholds.fairness)
          & (belief_accuracy >= thresholds.belief_accuracy))
    return jnp.where(ok, jnp.minimum(level + 1, NUM_LEVELS - 1), level).astype(jnp.int32)
