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

Multi-host: `python -m nexus_jax.sharding -m my_script ARGS...` calls
`jax.distributed.initialize()` (cluster auto-detection on TPU pods, SLURM, Open MPI; or the
`JAX_COORDINATOR_ADDRESS`/`JAX_NUM_PROCESSES`/`JAX_PROCESS_ID` environment variables) and
then runs the module as `python -m` would. See docs/scaling.md.
"""
from __future__ import annotations

import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

DATA_AXIS = "data"


# ---- mesh and placement --------------------------------------------------------------------

def data_mesh(num_devices: int | None = None, devices=None, axis: str = DATA_AXIS) -> Mesh:
    """A 1-D mesh over `devices` (default: all of `jax.devices()`, every host's), or the first `num_devices`."""
    devs = list(jax.devices() if devices is None else devices)
    if num_devices:
        if num_devices > len(devs):
            raise ValueError(f"asked for {num_devices} devices, only {len(devs)} available ({devs[0].platform})")
        devs = devs[:num_devices]
    return Mesh(np.asarray(devs), (axis,))


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
    """A (possibly multi-host, sharded) array as one NumPy array on this host."""
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        from jax.experimental import multihost_utils
        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)


# ---- multi-host launcher --------------------------------------------------------------------

def initialize_distributed(**kwargs) -> None:
    """`jax.distributed.initialize(**kwargs)`: auto-detects TPU pods / SLURM / Open MPI, or reads
    JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, JAX_PROCESS_ID. Call before any other JAX use."""
    jax.distributed.initialize(**kwargs)


def _main(argv: list[str]) -> None:
    """`python -m nexus_jax.sharding -m MODULE ARGS...`: initialise jax.distributed, then run MODULE as `python -m`."""
    import runpy

    if len(argv) < 2 or argv[0] != "-m":
        print("usage: python -m nexus_jax.sharding -m MODULE [ARGS...]   (e.g. -m my_train)", file=sys.stderr)
        raise SystemExit(2)
    if os.environ.get("NEXUS_JAX_NO_DISTRIBUTED") != "1":
        initialize_distributed()
    print(f"[nexus_jax.sharding] process {jax.process_index()}/{jax.process_count()}, "
          f"{jax.local_device_count()} local / {jax.device_count()} global devices", file=sys.stderr)
    sys.argv = [argv[1]] + argv[2:]
    runpy.run_module(argv[1], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    _main(sys.argv[1:])
