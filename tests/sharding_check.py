"""Run by tests/test_sharding.py in a fresh process with forced CPU devices (XLA_FLAGS must be set before JAX starts).

    XLA_FLAGS=--xla_force_host_platform_device_count=4 JAX_PLATFORMS=cpu python tests/sharding_check.py [rollout|ppo]...

Prints one JSON line per check (the test asserts on them; the checks also assert here, so a
failure carries its traceback):
- rollout: nexus-v0 env steps sharded over 4 devices (2 env chunks per device) give the same
  trajectories as the unsharded rollout.
- ppo: a PPO `update` with the batch sharded over 4 devices and parameters replicated gives the
  same parameters as the single-device update on the same batch; its compiled program all-reduces.
- bc_grpo: a BC stage (collection + 2 epochs) and 2 GRPO updates with the env batch and minibatches
  sharded over 4 devices give the same parameters as on one device.
- sweep: `make_sweep` with a mesh (2 learning rates x 1 seed on 4 devices: the runs over 2 groups
  of 2 devices, each run's env batch over its group's 2) gives the same trained parameters as the
  single-device sweep, with the outputs over the 4 devices.
- selfplay_entity: self-play (nexus-selfplay-v0, every seat a learner) with the entity network, 2 PPO
  updates with the env batch (an `EntityObs` pytree) sharded over 4 devices, gives the same parameters
  as on one device, replicated on every device.
- memory: a recurrent policy (memory=gru) on 2 devices (run with 2 forced devices): PPO with one run's env
  batch (and the memory) sharded, 2 seeds over the devices in resumable chunks, and BC + GRPO with their
  batches sharded give the same parameters as on one device.
"""
from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import nexus_jax  # noqa: E402
from nexus_jax import rollout, sharding  # noqa: E402


def check_rollout(env_id: str = "nexus-v0", num_envs: int = 8, num_steps: int = 5) -> dict:
    t0 = time.time()
    env = nexus_jax.make(env_id)
    mesh = sharding.data_mesh(4)
    key = jax.random.PRNGKey(7)
    ref = rollout.make_rollout(env, num_envs, num_steps)(key)
    out = rollout.make_rollout(env, num_envs, num_steps, mesh=mesh, env_chunks=2)(key)
    assert out.reward.sharding.spec == jax.sharding.PartitionSpec(None, "data"), out.reward.sharding
    assert len(out.reward.sharding.device_set) == 4
    np.testing.assert_array_equal(np.asarray(ref.action), np.asarray(out.action))
    np.testing.assert_array_equal(np.asarray(ref.done), np.asarray(out.done))
    # Float results may differ in the last bit: the two programs vectorise different batch sizes.
    np.testing.assert_allclose(np.asarray(ref.obs), np.asarray(out.obs), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(ref.reward), np.asarray(out.reward), rtol=1e-5, atol=1e-5)
    # Summary-only mode keeps per-env sums of the same trajectories.
    summ = rollout.make_rollout(env, num_envs, num_steps, mesh=mesh, trajectory=False)(key)
    np.testing.assert_allclose(np.asarray(summ.return_sum), np.asarray(ref.reward).sum(0), rtol=1e-5, atol=1e-4)
    return {"check": "rollout", "env": env_id, "shape": list(ref.obs.shape), "ok": True,
            "reward_sum": float(ref.reward.sum()), "seconds": round(time.time() - t0, 1)}


def check_ppo() -> dict:
    from train.config import validate
    from train.ppo import compute_gae, init_runner, make_env, rollout, update
    from train.networks import ActorCritic

    t0 = time.time()
    cfg = validate({"env_id": "nexus-v0", "action_head": "flat", "num_envs": 8, "num_steps": 4, "num_minibatches": 2,
                    "update_epochs": 2, "hidden_size": 16, "num_layers": 1, "total_timesteps": 32, "progress": False,
                    "anneal_lr": False})
    env = make_env(cfg)
    policy = ActorCritic.from_config(cfg, env)

    @jax.jit
    def batch(rng):
        runner = init_runner(rng, cfg.lr, cfg, env, policy)
        runner, traj = rollout(runner, env, policy, cfg.num_steps)
        last_value = policy.value(runner.train_state.params, runner.obs)
        adv, tgt = compute_gae(traj.reward * cfg.reward_scale, traj.value, traj.done, last_value, cfg.gamma,
                               cfg.gae_lambda)
        return runner.train_state, traj, adv, tgt

    ts, traj, adv, tgt = batch(jax.random.PRNGKey(0))
    k_upd = jax.random.PRNGKey(1)
    upd = lambda mesh: jax.jit(lambda ts, tr, a, t, k: update(ts, tr, a, t, k, policy, cfg, mesh))  # noqa: E731
    ts1, aux1 = upd(None)(ts, traj, adv, tgt, k_upd)

    mesh = sharding.data_mesh(4)
    ts_r = sharding.replicate(ts, mesh)
    traj_s, adv_s, tgt_s = sharding.shard_batch((traj, adv, tgt), mesh, batch_axis=1)  # (T, E, ...): E over devices
    f = upd(mesh)
    hlo = f.lower(ts_r, traj_s, adv_s, tgt_s, k_upd).compile().as_text()
    ts4, aux4 = f(ts_r, traj_s, adv_s, tgt_s, k_upd)

    leaves1, leaves4 = jax.tree.leaves(ts1.params), jax.tree.leaves(ts4.params)
    assert all(x.sharding.is_fully_replicated for x in leaves4)
    for a, b in zip(leaves1, leaves4):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)
    moved = max(float(jnp.abs(a - b).max()) for a, b in zip(leaves1, jax.tree.leaves(ts.params)))
    assert moved > 1e-6, "the update did not change the parameters"
    diff = max(float(jnp.abs(a - b).max()) for a, b in zip(leaves1, leaves4))
    np.testing.assert_allclose(float(aux1["value_loss"]), float(aux4["value_loss"]), rtol=1e-4)
    return {"check": "ppo", "ok": True, "all_reduce": "all-reduce" in hlo, "max_param_diff": diff,
            "max_param_change": moved, "seconds": round(time.time() - t0, 1)}


def check_bc_grpo() -> dict:
    from train.bc import make_bc_train
    from train.config import BCConfig, GRPOConfig
    from train.learner_env import LearnerEnv
    from train.grpo import make_grpo_train
    from train.networks import ActorCritic

    t0 = time.time()
    env = LearnerEnv.make("nexus-v0", {"max_steps": 6}, "flat")
    policy = ActorCritic(env.num_learners, env.obs_dim, "flat", num_actions=env.num_actions, hidden=8, layers=1)
    obs, state = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(0), 2))
    params0 = policy.init(jax.random.PRNGKey(1), obs, jax.vmap(env.masks)(state))
    bc = BCConfig(num_envs=8, num_steps=4, epochs=2, num_minibatches=2)
    grpo = GRPOConfig(group_size=2, num_groups=4, num_updates=2, update_epochs=1, num_minibatches=1)
    mesh = sharding.data_mesh(4)
    out = {}
    for name, m in (("one", None), ("four", mesh)):
        bc_train = jax.jit(make_bc_train(bc, env, policy, mesh=m))
        grpo_train = jax.jit(make_grpo_train(grpo, env, policy, mesh=m))
        p_bc, _ = bc_train(jax.random.PRNGKey(2), params0)
        p_grpo, _ = grpo_train(jax.random.PRNGKey(3), p_bc)
        out[name] = (p_bc, p_grpo)
    diff = max(float(jnp.abs(a - b).max()) for a, b in zip(jax.tree.leaves(out["one"]), jax.tree.leaves(out["four"])))
    moved = max(float(jnp.abs(a - b).max()) for a, b in zip(jax.tree.leaves(out["one"][1]), jax.tree.leaves(params0)))
    assert diff < 1e-4 < moved, (diff, moved)
    return {"check": "bc_grpo", "ok": True, "max_param_diff": diff, "max_param_change": moved,
            "seconds": round(time.time() - t0, 1)}


def check_sweep() -> dict:
    from train.config import validate
    from train.ppo import make_env, make_sweep

    t0 = time.time()
    cfg = validate({"env_id": "nexus-v0", "action_head": "flat", "num_envs": 4, "num_steps": 4, "num_minibatches": 2,
                    "update_epochs": 1, "hidden_size": 8, "num_layers": 1, "total_timesteps": 32, "progress": False,
                    "num_seeds": 1, "lrs": [1e-3, 3e-3]})
    env = make_env(cfg)
    rngs, lrs = jax.random.split(jax.random.PRNGKey(3), cfg.num_seeds), jnp.asarray(cfg.lrs)
    ref = make_sweep(cfg, env=env)(rngs, lrs)
    sweep = make_sweep(cfg, env=env, mesh=sharding.data_mesh(4))
    out = sweep(rngs, lrs)
    leaf = jax.tree.leaves(out["params"])[0]
    assert leaf.shape[:2] == (2, 1) and len(leaf.sharding.device_set) == 4, leaf.sharding
    mesh = leaf.sharding.mesh
    assert dict(mesh.shape) == {"lrs": 2, "seeds": 1, "data": 2}, mesh  # runs and env batches at once
    hlo = sweep.lower(rngs, lrs).compile().as_text()
    diff = max(float(jnp.abs(a - b).max()) for a, b in zip(jax.tree.leaves(ref), jax.tree.leaves(out)))
    for a, b in zip(jax.tree.leaves(ref), jax.tree.leaves(out)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)
    spread = float(jnp.abs(leaf[0] - leaf[1]).max())  # the two learning rates train different params
    assert spread > 1e-6
    return {"check": "sweep", "ok": True, "max_diff": diff, "lr_spread": spread, "all_reduce": "all-reduce" in hlo,
            "seconds": round(time.time() - t0, 1)}


def check_selfplay_entity() -> dict:
    from train.config import load_config
    from train.ppo import make_env, make_train

    t0 = time.time()
    cfg = load_config(overrides=["env_id=nexus-selfplay-v0", "env.num_agents=3", "env.max_steps=4", "network=entity",
                                 "hidden_size=8", "num_envs=8", "num_steps=4", "num_minibatches=2", "update_epochs=1",
                                 "total_timesteps=64", "progress=false", "anneal_lr=false"])
    env = make_env(cfg)
    rng, lr = jax.random.PRNGKey(5), jnp.float32(cfg.lr)
    single = jax.jit(make_train(cfg, env=env))
    one = single(rng, lr)
    four = jax.jit(make_train(cfg, env=env, mesh=sharding.data_mesh(4)))(rng, lr)
    leaves4 = jax.tree.leaves(four["params"])
    assert all(len(x.sharding.device_set) == 4 and x.sharding.is_fully_replicated for x in leaves4)
    diff = max(float(jnp.abs(a - b).max()) for a, b in zip(jax.tree.leaves(one["params"]), leaves4))
    init = single(rng, jnp.float32(0.0))["params"]  # lr 0 (traced: the same program): the initial params
    moved = max(float(jnp.abs(a - b).max()) for a, b in zip(jax.tree.leaves(one["params"]), jax.tree.leaves(init)))
    assert diff < 1e-4 < moved, (diff, moved)
    np.testing.assert_allclose(np.asarray(one["metrics"]["episode_return"]),
                               np.asarray(four["metrics"]["episode_return"]), rtol=1e-4, atol=1e-4)
    return {"check": "selfplay_entity", "ok": True, "learners": env.num_learners, "max_param_diff": diff,
            "max_param_change": moved, "seconds": round(time.time() - t0, 1)}


def check_memory() -> dict:
    from train.bc import make_bc_train
    from train.config import BCConfig, GRPOConfig, load_config
    from train.grpo import make_grpo_train
    from train.models import make_policy
    from train.ppo import make_chunks, make_env, make_train
    from train.resume import sweep_keys

    t0 = time.time()
    mesh = sharding.data_mesh(2)
    cfg = load_config(overrides=["memory=gru", "memory_size=8", "hidden_size=8", "num_layers=1", "num_envs=4",
                                 "num_steps=4", "env.max_steps=3", "num_minibatches=2", "update_epochs=1",
                                 "total_timesteps=32", "progress=false", "anneal_lr=false"])
    env = make_env(cfg)
    rng, lr = jax.random.PRNGKey(5), jnp.float32(cfg.lr)
    diffs = {}

    def diff(name, a, b):
        diffs[name] = max(float(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64)).max())
                          for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))

    one = jax.jit(make_train(cfg, env=env))(rng, lr)
    two = jax.jit(make_train(cfg, env=env, mesh=mesh))(rng, lr)
    assert all(len(x.sharding.device_set) == 2 for x in jax.tree.leaves(two["params"]))
    diff("ppo", one["params"], two["params"])
    init = jax.jit(make_train(cfg, env=env))(rng, jnp.float32(0.0))["params"]  # lr 0: the initial params
    diff("ppo_moved", one["params"], init)

    seeds = load_config(overrides=["num_seeds=2"] + [f"{k}={v}" for k, v in [("memory", "gru"), ("memory_size", 8),
                        ("hidden_size", 8), ("num_layers", 1), ("num_envs", 4), ("num_steps", 4), ("env.max_steps", 3),
                        ("num_minibatches", 2), ("update_epochs", 1), ("total_timesteps", 32), ("progress", "false")]])
    rngs, lrs = sweep_keys(seeds)
    carries = []
    for m in (None, mesh):
        init_c, run_c = make_chunks(seeds, env=env, mesh=m)
        carry = init_c(rngs, lrs)
        for start in (0, 1):
            carry, _ = run_c(carry, lrs, start * 1, 1)
        carries.append(carry)
    assert carries[1]["memory"]["actor"].shape[:3] == (1, 2, 4)  # (lrs, seeds, envs): the memory is in the carry
    diff("chunks", carries[0], carries[1])

    policy = make_policy(cfg, env)
    obs, state = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(0), 2))
    params0 = policy.init(jax.random.PRNGKey(1), obs, jax.vmap(env.masks)(state))
    bc = BCConfig(num_envs=4, num_steps=4, epochs=2, num_minibatches=2)
    grpo = GRPOConfig(group_size=2, num_groups=2, num_updates=2, update_epochs=1, num_minibatches=1)
    out = []
    for m in (None, mesh):
        p_bc, _ = jax.jit(make_bc_train(bc, env, policy, mesh=m))(jax.random.PRNGKey(2), params0)
        p_grpo, _ = jax.jit(make_grpo_train(grpo, env, policy, mesh=m))(jax.random.PRNGKey(3), p_bc)
        out.append((p_bc, p_grpo))
    diff("bc_grpo", out[0], out[1])
    diff("bc_grpo_moved", out[0][1], params0)
    assert max(diffs[k] for k in ("ppo", "chunks", "bc_grpo")) < 1e-4 < min(diffs["ppo_moved"], diffs["bc_grpo_moved"]), \
        diffs
    return {"check": "memory", "ok": True, "devices": 2, **{f"max_diff_{k}": v for k, v in diffs.items()},
            "seconds": round(time.time() - t0, 1)}


if __name__ == "__main__":
    checks = {"rollout": check_rollout, "ppo": check_ppo, "bc_grpo": check_bc_grpo, "sweep": check_sweep,
              "selfplay_entity": check_selfplay_entity, "memory": check_memory}
    names = sys.argv[1:] or list(checks)
    need = 2 if names == ["memory"] else 4
    assert jax.device_count() == need, f"expected {need} forced CPU devices, got {jax.devices()}"
    for name in names:
        print(json.dumps(checks[name]()), flush=True)
