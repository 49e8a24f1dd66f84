"""One shuffle of a dataset into minibatches, scanned: the loop PPO, GRPO and BC share."""
from __future__ import annotations

from collections.abc import Callable

import jax

from nexus_jax import sharding


def scan_shuffled(step: Callable, carry, data, key, num_minibatches: int, mesh=None):
    """`lax.scan(step, carry, minibatches)` over one shuffle of `data`'s leading axis -> (carry, stacked outputs).

    The samples are `jax.random.permutation(key, n)` cut into `num_minibatches` minibatches of
    n // num_minibatches (any remainder left out). Each minibatch is gathered inside the scan step
    from its slice of the permutation rather than from a shuffled copy of all of `data` made first:
    the same samples in the same order (the results are bit for bit those of the copy), without
    writing and re-reading the whole dataset once per epoch (PPO's update 1.07x on a 2-core CPU;
    docs/performance.md). `mesh` (optional): each minibatch is sharded
    over the mesh's data axis.
    """
    n = jax.tree.leaves(data)[0].shape[0]
    size = n // num_minibatches
    order = jax.random.permutation(key, n)[: size * num_minibatches].reshape(num_minibatches, size)

    def gathered(c, idx):
        return step(c, sharding.constrain_batch(jax.tree.map(lambda x: x[idx], data), mesh))

    return jax.lax.scan(gathered, carry, order)
