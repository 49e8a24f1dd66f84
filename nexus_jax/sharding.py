"""Scale past one device with JAX's own machinery: a 1-D data mesh, sharded env batches, sharded rollouts.

Everything here is a thin layer over `jax.sharding` (`Mesh`, `NamedSharding`,
`PartitionSpec`), `jax.shard_map` and `jax.distributed`:

- `data_mesh()` builds a 1-D mesh (axis `"data"`) over every device JAX sees; after
  `jax.distributed.initialize()` that is every device of every host, so the same script
  scales from one CPU to a TPU pod slice.
- `shard_batch` / `replicate` place a pytree (env batch on its leading axis / parameters);
  `constrain_batch` / `constrain_replicated` are the in-`jit` versions
  (`with_sharding_constraint`), no-ops when `mesh is None` so single-device code is unchanged.
- The sharded, chunked rollout of many envs (`nexus_jax.rollout.make_rollout`) is built
  on these: the env batch is split over the data axis with `shard_map`.

Several processes: `python -m nexus_jax.sharding [FLAGS] -m MODULE ARGS...` joins the other
processes (`nexus_jax.distributed`: flags, `JAX_COORDINATOR_ADDRESS`/`JAX_NUM_PROCESSES`/
`JAX_PROCESS_ID`, or the cluster's own settings) and then runs the module as `python -m` would;
`python -m nexus_jax.launch` starts such processes on one machine. See docs/scaling.md.
"""
from __future__ import annotations

import math
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from nexus_jax import distributed
from nexus_jax.cli import UserInputError

DATA_AXIS = "data"


# ---- mesh and placement --------------------------------------------------------------------

def data_mesh(num_devices: int | None = None, devices=None, axis: str = DATA_AXIS) -> Mesh:
    """A 1-D mesh over `devices` (default: all of `jax.devices()`, every host's), or the first `num_devices`.

    In a multi-process run every process calls it at the same point, and the first call connects the
    processes' collectives (`distributed.connect_collectives`)."""
    distributed.connect_collectives()
    devs = list(jax.devices() if devices is None else devices)
    if num_devices:
        if num_devices > len(devs):
            raise ValueError(f"asked for {num_devices} devices, only {len(devs)} available ({devs[0].platform})")
        devs = devs[:num_devices]
    return Mesh(np.asarray(devs), (axis,))


def mesh_for(num_devices: int) -> Mesh | None:
    """The data mesh a `num_devices` setting asks for: None (one device, no sharding) for 1, every device
    of every process for 0, the first n for n.

    A run over several processes is one program over all their devices, so there only 0 (or the
    global device count) is accepted; anything else is a UserInputError naming the fix.
    """
    if jax.process_count() > 1 and num_devices not in (0, jax.device_count()):
        raise UserInputError(f"num_devices={num_devices}: a run over {jax.process_count()} processes spans every "
                             f"device of every process; set num_devices=0 (all {jax.device_count()})")
    if num_devices == 1:
        return None
    return data_mesh(num_devices or None)


def grid_mesh(run_axes: dict[str, int], devices) -> Mesh:
    """A mesh for a grid of independent runs: one axis per run axis, then the data axis.

    `run_axes` maps axis names to run counts (outer first, e.g. {"cells": 4, "seeds": 2}); each
    axis gets gcd(count, devices not yet used) devices and the data axis the rest, so runs are
    spread first and each run's env batch is split over what remains (both at once when there
    are more devices than runs). `devices` in order (`jax.devices()` lists each process's devices
    together, so a run's data-axis devices sit in as few processes as possible).
    """
    devs = np.asarray(list(devices))
    left, shape = devs.size, []
    for count in run_axes.values():
        shape.append(math.gcd(count, left))
        left //= shape[-1]
    return Mesh(devs.reshape(*shape, left), (*run_axes, DATA_AXIS))


def mesh_size(mesh: Mesh | None, axis: str = DATA_AXIS) -> int:
    return 1 if mesh is None else int(mesh.shape[axis])


def batch_spec(ndim: int, batch_axis: int = 0, axis: str = DATA_AXIS) -> P:
    """PartitionSpec sharding dimension `batch_axis` over `axis` (replicated if the array is too small)."""
    if ndim <= batch_axis:
        return P()
    return P(*([None] * batch_axis), axis)


def batch_sharding(mesh: Mesh, ndim: int = 1, batch_axis: int = 0, axis: str = DATA_AXIS) -> NamedSharding:
    return NamedSharding(mesh, batch_spec(ndim, batch_axis, axis))


def replicated_sharding(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P())


def check_divisible(n: int, mesh: Mesh | None, what: str = "num_envs", axis: str = DATA_AXIS) -> None:
    d = mesh_size(mesh, axis)
    if n % d:
        raise ValueError(f"{what}={n} must be a multiple of the number of devices on the '{axis}' axis ({d})")


def shard_batch(tree, mesh: Mesh, batch_axis: int = 0, axis: str = DATA_AXIS):
    """Place every array of `tree` with dimension `batch_axis` split over the mesh's data axis.

    Single process: `jax.device_put`. Multi-process: each process passes its own slice of the
    batch (`jax.make_array_from_process_local_data` assembles the global array).
    """
    def put(x):
        x = jnp.asarray(x) if not isinstance(x, (jax.Array, np.ndarray)) else x
        sh = batch_sharding(mesh, x.ndim, batch_axis, axis)
        if jax.process_count() > 1:
            return jax.make_array_from_process_local_data(sh, np.asarray(x))
        if x.ndim > batch_axis:
            check_divisible(x.shape[batch_axis], mesh, f"batch dimension {batch_axis}", axis)
        return jax.device_put(x, sh)

    return jax.tree.map(put, tree)


def replicate(tree, mesh: Mesh):
    """Place every array of `tree` in full on every device of the mesh (parameters, optimiser state)."""
    return jax.device_put(tree, replicated_sharding(mesh))


def constrain_batch(tree, mesh: Mesh | None, batch_axis: int = 0, axis: str = DATA_AXIS):
    """Inside `jit`: shard dimension `batch_axis` of every array over the data axis (no-op without a mesh)."""
    if mesh is None:
        return tree
    return jax.tree.map(
        lambda x: jax.lax.with_sharding_constraint(x, NamedSharding(mesh, batch_spec(jnp.ndim(x), batch_axis, axis))),
        tree)


def constrain_replicated(tree, mesh: Mesh | None):
    """Inside `jit`: keep every array of `tree` replicated (no-op without a mesh)."""
    if mesh is None:
        return tree
    return jax.tree.map(lambda x: jax.lax.with_sharding_constraint(x, NamedSharding(mesh, P())), tree)


def to_host(x):
    """A (possibly multi-process, sharded) array as one NumPy array on this process.

    An array sharded over several processes is gathered (`process_allgather`): a collective, so
    every process must call it for the same arrays in the same order.
    """
    if isinstance(x, jax.Array) and not x.is_fully_addressable and not x.is_fully_replicated:
        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)


def tree_to_host(tree):
    """The whole pytree as NumPy arrays on this process: `jax.device_get` in a single-process run, `to_host`
    on every leaf in a multi-process one (a collective there: every process calls it)."""
    if jax.process_count() == 1:
        return jax.device_get(tree)
    return jax.tree.map(to_host, tree)


if __name__ == "__main__":  # python -m nexus_jax.sharding [FLAGS] -m MODULE [ARGS...]
    sys.exit(distributed.main())
