"""Scale past one device with JAX's own machinery: a 1-D data mesh, sharded env batches, sharded rollouts.

Everything here is a thin layer over `jax.sharding` (`Mesh`, `NamedSharding`,
`PartitionSpec`), `jax.shard_map` and `jax.distributed`:

- `data_mesh()` builds a 1-D mesh (axis `"data"`) over every device JAX sees; after
  `jax.distributed.initialize()` that is every device of every host, so the same script
  scales from one CPU to a TPU pod slice.
- `shard_batch` / `replicate` place a pytree (env batch on its leading axis / parameters);
  `constrain_batch` / `constrain_replicated` are the in-`jit` versions
  (`with_sharding_constraint`), no-ops when `mesh is None` so single-device code is unchanged.
- `make_rollout(env, ...)` is a jitted rollout of many envs: the env batch is split over the
  data axis with `shard_map` (each device steps its own envs, no communication), and inside
  a device optionally in `env_chunks` sequential chunks (`lax.map`) so peak memory is set by
  the chunk, not the batch. With `trajectory=False` only per-env summaries are kept (the
  scan carries running sums), so memory does not grow with the number of steps either.

Randomness is keyed per env (`split(key, num_envs)`, then `fold_in(env_key, t)` per step),
so a rollout gives the same trajectories whatever the number of devices or chunks.

Multi-host: `python -m nexus_jax.sharding -m my_script ARGS...` calls
`jax.distributed.initialize()` (cluster auto-detection on TPU pods, SLURM, Open MPI; or the
`JAX_COORDINATOR_ADDRESS`/`JAX_NUM_PROCESSES`/`JAX_PROCESS_ID` environment variables) and
then runs the module as `python -m` would. See docs/scaling.md.
"""
from __future__ import annotations

import os
import sys
from typing import Callable, NamedTuple

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


# ---- sharded, chunked env rollout -----------------------------------------------------------

class Trajectory(NamedTuple):
    """Every step of a rollout, time-major: (T, E, A, ...) with E envs, A agents the caller drives."""

    obs: jnp.ndarray  # (T, E, A, D) the observation the action was taken on
    action: jnp.ndarray  # (T, E, A, ...)
    reward: jnp.ndarray  # (T, E, A)
    done: jnp.ndarray  # (T, E) this step ended the episode (the next obs is a fresh episode's)


class Summary(NamedTuple):
    """What a summary-only rollout keeps: per env, O(E) memory whatever the number of steps."""

    return_sum: jnp.ndarray  # (E, A) summed reward over all steps
    episodes: jnp.ndarray  # (E,) finished episodes
    final_obs: jnp.ndarray  # (E, A, D) observation after the last step
    reward_sq_sum: jnp.ndarray  # (E, A) summed squared reward (a cheap checksum of the whole trajectory)


def random_valid_action(key, obs, avail):
    """A uniformly random valid flat action per agent: avail (A, n) bool -> (A,) int32."""
    del obs
    logits = jnp.where(avail, 0.0, -jnp.inf)
    return jax.random.categorical(key, logits, axis=-1).astype(jnp.int32)


def uniform_action_fn(num_actions: int):
    """-> act_fn drawing a uniform flat action in [0, num_actions) per agent, no mask (invalid ones become WAIT)."""
    def act(key, obs, avail):
        del avail
        return jax.random.randint(key, obs.shape[:1], 0, num_actions, jnp.int32)
    return act


def _env_keys(key, num_envs: int):
    return jax.random.split(key, num_envs)


def _local_rollout(env, params, keys, num_steps: int, act_fn: Callable, trajectory: bool, use_masks: bool = True):
    """Roll the envs of `keys` (E,) for `num_steps` with the env's own auto-reset (`step_arrays`) -> Trajectory
    or Summary."""
    reset = jax.vmap(env.reset_env, (0, None))
    step = jax.vmap(env.step_arrays, (0, 0, 0, None))
    avail_fn = jax.vmap(env.avail_actions_array, (0, None))

    pair = jax.vmap(jax.random.split)(keys)  # per env: (key of the first reset, root of the step keys)
    obs, state = reset(pair[:, 0], params)
    keys = pair[:, 1]

    def body(carry, t):
        state, obs, acc = carry
        k = jax.vmap(lambda kk: jax.random.split(jax.random.fold_in(kk, t)))(keys)
        avail = avail_fn(state, params) if use_masks else None
        action = jax.vmap(act_fn, (0, 0, 0 if use_masks else None))(k[:, 0], obs, avail)
        next_obs, state, reward, done, _ = step(k[:, 1], state, action, params)
        reward = reward.astype(jnp.float32)
        if trajectory:
            return (state, next_obs, acc), Trajectory(obs, action, reward, done)
        ret, eps, sq = acc
        return (state, next_obs, (ret + reward, eps + done.astype(jnp.int32), sq + reward * reward)), None

    num_agents = obs.shape[1]
    zeros = jnp.zeros((keys.shape[0], num_agents), jnp.float32)
    acc0 = (zeros, jnp.zeros(keys.shape[0], jnp.int32), zeros)
    (state, obs, acc), traj = jax.lax.scan(body, (state, obs, acc0), jnp.arange(num_steps))
    if trajectory:
        return traj
    return Summary(acc[0], acc[1], obs, acc[2])


def make_rollout(env, num_envs: int, num_steps: int, *, mesh: Mesh | None = None, act_fn: Callable | None = None,
                 env_chunks: int = 1, trajectory: bool = True, use_masks: bool = True, axis: str = DATA_AXIS):
    """-> jitted `rollout(key, params)`: `num_envs` envs of `env` for `num_steps` steps, with auto-reset.

    `env` is any nexus_jax env (array-level `reset_env`/`step_arrays`/`avail_actions_array`).
    `act_fn(key, obs (A, D), avail (A, n)) -> (A,)` picks the actions of one env (default: a
    uniformly random valid action). `mesh`: shard the env batch over its `axis` (each device
    runs `num_envs / devices` envs; params replicated). `env_chunks`: each device runs its envs
    in that many sequential chunks (peak memory / env_chunks). `trajectory`: keep every step
    (Trajectory, time-major) or only per-env sums (Summary: memory independent of `num_steps`).
    `use_masks=False` skips computing action masks (`avail` is None; the default action is then
    a uniform flat action, invalid ones become WAIT as the env's rules say): for throughput or
    memory runs where mask checks would dominate the step.
    The result does not depend on `mesh` or `env_chunks`.
    """
    if act_fn is None:
        act_fn = random_valid_action if use_masks else uniform_action_fn(int(env.action_space(env.agents[0]).n))
    devices = mesh_size(mesh, axis)
    check_divisible(num_envs, mesh, "num_envs", axis)
    local = num_envs // devices
    if local % env_chunks:
        raise ValueError(f"envs per device ({local}) must be a multiple of env_chunks ({env_chunks})")

    def per_device(keys, params):
        if env_chunks == 1:
            return _local_rollout(env, params, keys, num_steps, act_fn, trajectory, use_masks)
        chunks = keys.reshape((env_chunks, -1) + keys.shape[1:])
        out = jax.lax.map(lambda k: _local_rollout(env, params, k, num_steps, act_fn, trajectory, use_masks), chunks)
        if trajectory:  # (C, T, Ec, ...) -> (T, C*Ec, ...)
            return jax.tree.map(lambda x: jnp.moveaxis(x, 0, 1).reshape((x.shape[1], -1) + x.shape[3:]), out)
        return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), out)

    env_axis = 1 if trajectory else 0
    if mesh is not None:
        out_spec = jax.tree.map(lambda _: P(*([None] * env_axis), axis),
                                (Trajectory if trajectory else Summary)(*([0] * 4)))
        per_device = jax.shard_map(per_device, mesh=mesh, in_specs=(P(axis), P()), out_specs=out_spec,
                                   check_vma=False)

    def rollout(key, params=None):
        params = env.default_params if params is None else params
        keys = constrain_batch(_env_keys(key, num_envs), mesh, 0, axis)
        return per_device(keys, params)

    return jax.jit(rollout)


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
