"""`bash bench/device.sh` runs end to end on the CPU at toy sizes, in a clean venv that has only jax and the
wheels of bench/device-requirements.txt, installed offline (`--no-index --no-deps`): what a GPU host without
internet gets. A broken device script or an incomplete wheel list would otherwise only be found on a lent GPU,
whose minutes are few. The wheels are downloaded once (PyPI) into NEXUS_JAX_DEVICE_WHEELS (default
/tmp/nexus_jax_device_wheels) by bench/device_wheels.sh; a folder already complete needs no index."""
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOY = ["--agents", "4", "--log2-batches", "2", "--steps", "2", "--train-envs", "4", "--train-updates", "1",
       "--compile-threads", "2", "--budget-s", "3600"]


def run(*cmd, **kw):
    out = subprocess.run([str(c) for c in cmd], cwd=ROOT, capture_output=True, text=True, **kw)
    assert out.returncode == 0, f"{' '.join(map(str, cmd))}: exit {out.returncode}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
def clean_venv(tmp_path_factory):
    """A fresh venv: this machine's jax (the host's stand-in), then the device list, both from the wheel folder only."""
    wheels = Path(os.environ.get("NEXUS_JAX_DEVICE_WHEELS", "/tmp/nexus_jax_device_wheels"))
    run("bash", "bench/device_wheels.sh", "--dest", wheels, "--with-jax")
    venv = tmp_path_factory.mktemp("device") / "venv"
    run(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    host = [f"{d}=={importlib.metadata.version(d)}" for d in ("jax", "jaxlib")]
    run(python, "-m", "pip", "install", "--quiet", "--no-index", "--find-links", wheels, *host)
    run(python, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--find-links", wheels,
        "-r", "bench/device-requirements.txt")
    return venv


@pytest.mark.slow
def test_device_script_runs_offline_in_a_clean_venv_with_every_row(clean_venv, tmp_path):
    out = tmp_path / "device.json"
    env = {**os.environ, "PATH": f"{clean_venv / 'bin'}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": "",
           "NEXUS_DEVICE_ALLOW_CPU": "1",
           "JAX_COMPILATION_CACHE_DIR": os.environ.get("NEXUS_JAX_TEST_CACHE", "/tmp/nexus_jax_xla_cache")}
    printed = run("bash", "bench/device.sh", *TOY, "--out", out, env=env, timeout=3000).stdout
    result = json.loads(out.read_text())
    assert {(r["kind"], r["batch"]) for r in result["rows"]} == {
        ("core", 4), ("env.step", 4), ("env.step, fast paths flipped", 4), ("env.step+masks", 4), ("MPE_simple_spread_v3", 4),
        ("ppo_train", 4), ("ppo_rollout", 4), ("ppo_update", 4)}  # env.step+masks at 4 twice: the sweep and PPO's
    assert all(r["env_steps_per_s"] > 0 and r["compile_s"] > 0 for r in result["rows"]) and result["notes"] == []
    assert set(result["ratios"]) == {"as shipped (fast) / flipped, env.step N=4 B=4", "env.step / MPE, N=4 B=4"}
    assert "of the env class's raw rate (env.step + masks) at the same batch" in printed
    assert result["machine"]["backend"] == "cpu"


@pytest.mark.slow
def test_device_script_refuses_a_cpu_backend_unless_asked(tmp_path):
    """Without an accelerator (and without NEXUS_DEVICE_ALLOW_CPU) the script stops before any compile."""
    env = {k: v for k, v in os.environ.items() if k != "NEXUS_DEVICE_ALLOW_CPU"}
    out = subprocess.run(["bash", "bench/device.sh", "--out", str(tmp_path / "x.json")], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 2 and "no accelerator" in out.stderr and not (tmp_path / "x.json").exists()
