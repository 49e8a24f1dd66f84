"""Sharding over 4 forced CPU devices: same trajectories and same PPO update as on one device.

`--xla_force_host_platform_device_count` must be set before JAX starts, and this pytest
process has already started JAX with one device, so the checks run in a fresh process
(`tests/sharding_check.py`) with its own XLA_FLAGS. Helpers that need no devices are tested here.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import pytest

from nexus_jax import sharding
from nexus_jax.xla_flags import FAST_COMPILE

ROOT = Path(__file__).resolve().parent.parent


def run_checks(*checks: str, devices: int = 4) -> dict:
    """tests/sharding_check.py's `checks` in a fresh process with `devices` forced CPU devices -> {check: result}."""
    env = dict(os.environ)
    env.update(XLA_FLAGS=f"--xla_force_host_platform_device_count={devices} {FAST_COMPILE}", JAX_PLATFORMS="cpu",
               JAX_COMPILATION_CACHE_DIR=os.environ.get("NEXUS_JAX_TEST_CACHE", "/tmp/nexus_jax_xla_cache"),
               PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "sharding_check.py"), *checks], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    return {r["check"]: r for r in map(json.loads, proc.stdout.strip().splitlines())}


@pytest.fixture(scope="module")
def forced_devices_run():
    return run_checks("rollout", "ppo", "bc_grpo", "sweep")


@pytest.mark.slow
def test_sharded_env_rollout_matches_unsharded(forced_devices_run):
    r = forced_devices_run["rollout"]
    assert r["ok"] and r["env"] == "nexus-v0" and r["shape"][:2] == [5, 8]


@pytest.mark.slow
def test_sharded_ppo_update_matches_single_device(forced_devices_run):
    r = forced_devices_run["ppo"]
    assert r["ok"] and r["max_param_diff"] < 1e-5 < r["max_param_change"]
    assert r["all_reduce"], "the sharded update should all-reduce gradients across devices"


@pytest.mark.slow
def test_sharded_bc_and_grpo_match_single_device(forced_devices_run):
    r = forced_devices_run["bc_grpo"]
    assert r["ok"] and r["max_param_diff"] < 1e-4 < r["max_param_change"]


@pytest.mark.slow
def test_sharded_sweep_matches_single_device_sweep(forced_devices_run):
    """Runs and each run's env batch sharded at once (2 runs on 4 devices): the env shards all-reduce."""
    r = forced_devices_run["sweep"]
    assert r["ok"] and r["max_diff"] < 1e-4 and r["lr_spread"] > 1e-6 and r["all_reduce"]


@pytest.mark.slow
def test_sharded_selfplay_with_the_entity_network_matches_single_device():
    r = run_checks("selfplay_entity")["selfplay_entity"]
    assert r["ok"] and r["learners"] == 3 and r["max_param_diff"] < 1e-4 < r["max_param_change"]


@pytest.mark.slow
def test_a_recurrent_policy_trains_on_two_devices_as_on_one():
    """memory=gru with XLA_FLAGS=--xla_force_host_platform_device_count=2: PPO (env batch and memory sharded; seeds
    over the devices in resumable chunks), BC and GRPO."""
    r = run_checks("memory", devices=2)["memory"]
    assert r["ok"] and r["devices"] == 2 and r["max_diff_ppo"] < 1e-4 < r["max_diff_ppo_moved"]
    assert r["max_diff_chunks"] < 1e-4 and r["max_diff_bc_grpo"] < 1e-4 < r["max_diff_bc_grpo_moved"]


def test_single_device_helpers_are_no_ops():
    x = jax.numpy.ones((4, 3))
    assert sharding.constrain_batch(x, None) is x and sharding.constrain_replicated(x, None) is x
    assert sharding.mesh_size(None) == 1
    mesh = sharding.data_mesh()
    assert mesh.axis_names == ("data",) and mesh.size == jax.device_count()
    assert sharding.batch_spec(3, 1) == jax.sharding.PartitionSpec(None, "data")
    assert sharding.batch_spec(0) == jax.sharding.PartitionSpec()


def test_divisibility_and_device_count_errors_name_the_problem():
    with pytest.raises(ValueError, match="num_envs=6"):
        sharding.check_divisible(6, _FakeMesh())
    sharding.check_divisible(8, _FakeMesh())
    with pytest.raises(ValueError, match="devices"):
        sharding.data_mesh(jax.device_count() + 1)


class _FakeMesh:
    shape = {"data": 4}
