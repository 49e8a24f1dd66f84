"""Several real processes on 127.0.0.1 (jax.distributed, gloo CPU collectives, one CPU device each),
each result against the single-process run with the same global batch and seeds.

Every run is a real command (`python -m nexus_jax.launch --processes 2 -m train ...`, or two
`python -m nexus_jax.sharding` processes started here); the numbers are read back from the run
folders. One tiny config serves every PPO run, so the persistent compilation cache
(`NEXUS_JAX_TEST_CACHE`) compiles its programs once. Why a 2-process run is not bitwise the
single-process one: each process differentiates the loss on its half of every minibatch and the
gradients are summed across processes (an all-reduce), a different order of float additions than
one device's sum (measured: 4.5e-8 on these parameters).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from nexus_jax import DEFAULT_ENV, distributed, launch
from nexus_jax.xla_flags import FAST_COMPILE
from train.checkpoint import CHECKPOINT_DIR, load_run, read_meta
from train.config import load_config
from train.tracking import ppo_runs

pytestmark = [pytest.mark.multiprocess, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
TINY = ["num_envs=4", "num_steps=8", "total_timesteps=128", "num_minibatches=2", "update_epochs=1", "hidden_size=8",
        "num_layers=1", "env.max_steps=8", "eval_episodes=2", "progress=false", "snapshot_every=0",
        "checkpoint_every=1"]  # 4 updates, a checkpoint after each
SWEEP = ["--seeds", "2", "--episodes", "2", "--y", "vault_delay=1", "num_envs=4", "num_steps=8",
         "total_timesteps=64", "num_minibatches=2", "update_epochs=1", "hidden_size=8", "num_layers=1",
         "env.max_steps=8"]  # 2 cells (p_grid_failure 0.05, 0.25) x 2 seeds
HEARTBEAT = 10  # seconds; the kill test's bound is this plus the time to notice


def child_env() -> dict:
    """The children's environment: this checkout, CPU, the tests' XLA flags and compilation cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_COORDINATOR", "JAX_NUM_PROCESSES",
                                                                     "JAX_PROCESS_ID"))}
    env.update(PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu", XLA_FLAGS=FAST_COMPILE,
               NEXUS_JAX_CACHE=os.environ.get("NEXUS_JAX_TEST_CACHE", "/tmp/nexus_jax_xla_cache"))
    return env


def run(args: list[str], timeout: int = 900) -> subprocess.CompletedProcess:
    """`python ARGS` from the checkout root; the output as text."""
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=child_env(), capture_output=True, text=True,
                          timeout=timeout)


def launched(args: list[str], log_dir: Path, processes: int = 2) -> list[str]:
    return ["-m", "nexus_jax.launch", "--processes", str(processes), "--log-dir", str(log_dir),
            "--heartbeat-timeout", str(HEARTBEAT), *args]


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def wait_for(path: Path, text: str, proc: subprocess.Popen, timeout: float = 600) -> None:
    """Until `path` holds `text` (the process must still run)."""
    deadline = time.monotonic() + timeout
    while text not in (path.read_text() if path.exists() else ""):
        assert proc.poll() is None, f"exited with {proc.returncode} before printing {text!r}:\n{path.read_text()}"
        assert time.monotonic() < deadline, f"{text!r} not printed within {timeout} s"
        time.sleep(0.2)


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def params_of(run_dir: Path) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree.leaves(load_run(run_dir)[3])]


def max_diff(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    return max(float(np.abs(x - y).max()) for x, y in zip(a, b))


@pytest.fixture(scope="module")
def ppo(tmp_path_factory):
    """PPO runs of the tiny config: one process; two processes; two processes stopped by Ctrl-C after the
    first checkpoint and resumed on two processes, and (a copy) on one -> {name: run folder}."""
    root = tmp_path_factory.mktemp("mp_ppo")
    runs = {name: root / name for name in ("one", "two", "cut", "cut_on_one")}
    common = TINY + [f"run_dir={root}"]
    ok(run(["-m", "train", "name=one", "num_devices=1", *common]))
    ok(run(launched(["-m", "train", "name=two", "num_devices=0", "logger=tensorboard", *common], root / "logs_two")))

    out = root / "cut.out"
    with open(out, "w") as f:
        proc = subprocess.Popen([sys.executable, *launched(["-m", "train", "name=cut", "num_devices=0", *common],
                                                           root / "logs_cut")],
                                cwd=ROOT, env=child_env(), stdout=f, stderr=subprocess.STDOUT,
                                # as from a terminal: Ctrl-C reaches it even where CI runs with SIGINT ignored
                                preexec_fn=launch._default_sigint)
    wait_for(out, f"env {DEFAULT_ENV}", proc)  # printed before the chunk programs compile
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)  # Ctrl-C in the launcher's terminal
    assert proc.wait(timeout=600) == 130, out.read_text()[-3000:]
    runs["cut_output"] = out.read_text()
    runs["cut_step"] = read_meta(runs["cut"] / CHECKPOINT_DIR)["step"]
    shutil.copytree(runs["cut"], runs["cut_on_one"])
    ok(run(launched(["-m", "train", "--resume", str(runs["cut"])], root / "logs_resume")))
    ok(run(["-m", "train", "--resume", str(runs["cut_on_one"])]))  # the same checkpoint, another process count
    return runs


def test_two_process_ppo_run_equals_the_single_process_run(ppo):
    one, two = params_of(ppo["one"]), params_of(ppo["two"])
    assert max_diff(one, two) < 1e-6  # the gradient all-reduce's summation order (module docstring)
    assert max(float(np.abs(x).max()) for x in one) > 0.1
    m_one = [json.loads(line) for line in (ppo["one"] / "metrics.jsonl").read_text().splitlines()]
    m_two = [json.loads(line) for line in (ppo["two"] / "metrics.jsonl").read_text().splitlines()]
    assert len(m_two) == 4 and [r["episode_return"] for r in m_one] == [r["episode_return"] for r in m_two]


def test_a_two_process_run_logs_every_update_to_tensorboard(ppo):
    """No host callback runs over two processes; process 0 logs the same per-update scalars after training."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # the tensorboard extra

    records = [json.loads(line) for line in (ppo["two"] / "metrics.jsonl").read_text().splitlines()]
    names = ppo_runs(load_config(overrides=TINY))[0].reshape(-1)  # lr-major, as metrics.jsonl's lists
    for i, name in enumerate(names):
        events = EventAccumulator(str(ppo["two"] / "tensorboard" / name))
        events.Reload()
        logged = events.Scalars("episode_return")
        assert [e.step for e in logged] == [r["env_steps"] for r in records]
        np.testing.assert_allclose([e.value for e in logged], [r["episode_return"][i] for r in records], atol=1e-4)


def test_only_process_zero_writes_the_run_folder(ppo):
    logs = ppo["two"].parent / "logs_two"
    log = (logs / "process_1.log").read_text()
    assert f"env {DEFAULT_ENV}" not in log and "Evaluation" not in log  # process 1 prints nothing of its own
    assert {p.name for p in ppo["two"].iterdir()} >= {"config.yaml", "metrics.jsonl", "eval.json", CHECKPOINT_DIR}
    assert not list(ppo["two"].glob("*.partial"))


def test_ctrl_c_stops_both_processes_after_the_same_checkpoint_and_resume_matches(ppo):
    assert 1 <= ppo["cut_step"] < 4, ppo["cut_output"][-2000:]
    assert "interrupted after" in ppo["cut_output"] and "--resume" in ppo["cut_output"]
    resumed, full = params_of(ppo["cut"]), params_of(ppo["two"])
    assert max_diff(resumed, full) == 0.0  # same programs on the same devices: bitwise
    assert read_meta(ppo["cut"] / CHECKPOINT_DIR)["step"] == 4


def test_a_two_process_checkpoint_resumes_on_one_process(ppo):
    """The checkpoint's arrays are sharded over 2 processes; one process reads all of them."""
    assert max_diff(params_of(ppo["cut_on_one"]), params_of(ppo["two"])) < 1e-6


def test_a_recurrent_policy_trains_over_two_processes_as_in_one(tmp_path):
    """memory=gru with 6-step episodes (memories run across the 8-step rollouts and the checkpointed chunks): the
    env batch and its memory split over the processes, each minibatch's env sequences too; evaluated after."""
    common = TINY + ["memory=gru", "memory_size=8", "env.max_steps=6", f"run_dir={tmp_path}"]
    ok(run(["-m", "train", "name=one", "num_devices=1", *common]))
    ok(run(launched(["-m", "train", "name=two", "num_devices=0", *common], tmp_path / "logs")))
    one, two = params_of(tmp_path / "one"), params_of(tmp_path / "two")
    assert max_diff(one, two) < 1e-6 and load_run(tmp_path / "two")[2].memory_size == 8
    m_one, m_two = ([json.loads(line) for line in (tmp_path / n / "metrics.jsonl").read_text().splitlines()]
                    for n in ("one", "two"))
    assert len(m_two) == 4 and [r["episode_return"] for r in m_one] == [r["episode_return"] for r in m_two]
    assert "trained" in json.loads((tmp_path / "two" / "eval.json").read_text())["eval"]


def test_two_process_sweep_splits_the_cells_and_equals_the_single_process_sweep(tmp_path):
    ok(run(["-m", "train.sweep", *SWEEP, "name=one", f"run_dir={tmp_path}"]))
    proc = ok(run(launched(["-m", "train.sweep", *SWEEP, "name=two", "num_devices=0", f"run_dir={tmp_path}"],
                           tmp_path / "logs")))
    assert "'cells': 2, 'seeds': 1, 'data': 1" in proc.stdout  # one cell (both seeds) per process
    one, two = (np.load(tmp_path / n / "sweep_episodes.npz") for n in ("one", "two"))
    assert sorted(one.files) == sorted(two.files) and one["trained.return"].shape == (2, 2, 2)
    for k in one.files:
        np.testing.assert_allclose(two[k], one[k], rtol=1e-5, atol=1e-5, err_msg=k)
    assert not np.array_equal(one["trained.return"][0], one["trained.return"][1])  # the cells differ


def test_a_killed_process_stops_the_other_with_a_clear_error_within_60_s(tmp_path):
    """Process 1 is killed (SIGKILL) once training has started; process 0 must exit non-zero with a line
    naming the lost process within the heartbeat timeout, not hang."""
    port = launch.free_port()
    logs = [tmp_path / f"process_{i}.log" for i in range(2)]
    procs = []
    for i in range(2):
        env = {**child_env(), distributed.ENV_COORDINATOR: f"127.0.0.1:{port}", distributed.ENV_NUM_PROCESSES: "2",
               distributed.ENV_PROCESS_ID: str(i), "JAX_NUM_CPU_DEVICES": "1"}
        with open(logs[i], "w") as f:
            procs.append(subprocess.Popen([sys.executable, "-m", "nexus_jax.sharding", "--heartbeat-timeout",
                                           str(HEARTBEAT), "-m", "train", "name=kill", "num_devices=0", *TINY,
                                           f"run_dir={tmp_path}"], cwd=ROOT, env=env, stdout=f,
                                          stderr=subprocess.STDOUT))
    try:
        wait_for(logs[0], f"env {DEFAULT_ENV}", procs[0])
        time.sleep(2.0)
        procs[1].kill()
        t0 = time.monotonic()
        code = procs[0].wait(timeout=120)
        waited = time.monotonic() - t0
    finally:
        for p in procs:
            p.kill()
    out = logs[0].read_text()
    assert code != 0 and waited < 60, (code, waited, out[-3000:])
    assert "lost contact with another process" in out or "another task died" in out, out[-3000:]


def test_launcher_stops_on_the_first_failure_with_one_line(tmp_path):
    """num_devices=1 over 2 processes is a config error on both; the launcher names the process and exits 2."""
    proc = run(launched(["-m", "train", "name=bad", "num_devices=1", *TINY, f"run_dir={tmp_path}"],
                        tmp_path / "logs"), timeout=300)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "num_devices=1: a run over 2 processes" in proc.stderr
    assert "python -m nexus_jax.launch: process" in proc.stderr and "exited with code 2" in proc.stderr
    assert not (tmp_path / "bad").exists()


def test_a_process_that_never_joins_ends_the_other_with_one_line():
    start = time.monotonic()
    proc = run(["-m", "nexus_jax.sharding", "--coordinator", f"127.0.0.1:{launch.free_port()}", "--num-processes",
                "2", "--process-id", "0", "--init-timeout", "3", "-m", "train"], timeout=120)
    assert proc.returncode == 1 and time.monotonic() - start < 60, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert "process 0 of 2: not every process joined within 3 s (coordinator 127.0.0.1:" in last, last


def test_launcher_check_reaches_every_device_of_two_processes(tmp_path):
    proc = ok(run(launched(["--devices-per-process", "2", "--check"], tmp_path), timeout=300))
    lines = [proc.stdout.strip().splitlines()[-1], (tmp_path / "process_1.log").read_text().strip().splitlines()[-1]]
    for i, line in enumerate(lines):
        assert f"process {i} of 2: 2 local / 4 global cpu devices" in line and "reached every device" in line, line


def test_the_slurm_command_joins_from_slurm_variables_alone(tmp_path):
    """`srun ... python -m nexus_jax.sharding ...` as docs/scaling.md has it: no JAX_* variables, only the
    ones SLURM sets for each task (jax derives the coordinator from the node list and the job id)."""
    job = next(j for j in range(os.getpid(), os.getpid() + 4096) if port_free(61440 + j % 4096))  # jax's port rule
    procs = []
    for i in range(2):
        env = {**child_env(), "SLURM_JOB_ID": str(job), "SLURM_STEP_NODELIST": "localhost", "SLURM_NTASKS": "2",
               "SLURM_PROCID": str(i), "SLURM_LOCALID": str(i), "SLURM_STEP_NUM_NODES": "1", "JAX_NUM_CPU_DEVICES": "1"}
        procs.append(subprocess.Popen([sys.executable, "-m", "nexus_jax.sharding", "--check"], cwd=ROOT, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=300)[0] for p in procs]
    for i, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0 and f"process {i} of 2: 1 local / 2 global" in out, out[-2000:]


# ---- settings: one error line, exit 2, before joining (in-process, nothing starts) --------------------

@pytest.mark.parametrize("argv, needle", [
    (["--coordinator", "127.0.0.1:99999", "--num-processes", "2", "--process-id", "0"], "port in 1..65535"),
    (["--coordinator", "nohost.invalid:1234", "--num-processes", "2", "--process-id", "0"], "does not resolve"),
    (["--coordinator", "127.0.0.1", "--num-processes", "2", "--process-id", "0"], "expected HOST:PORT"),
    (["--coordinator", "127.0.0.1:1234", "--num-processes", "2", "--process-id", "2"], "must lie in 0..1"),
    (["--coordinator", "127.0.0.1:1234", "--num-processes", "0", "--process-id", "0"], "must be >= 1"),
    (["--coordinator", "127.0.0.1:1234", "--num-processes", "2"], "no --process-id"),
])
def test_bad_settings_are_one_line_exit_2(monkeypatch, capsys, argv, needle):
    for var in (distributed.ENV_COORDINATOR, distributed.ENV_NUM_PROCESSES, distributed.ENV_PROCESS_ID,
                *distributed.CLUSTER_MARKERS):
        monkeypatch.delenv(var, raising=False)
    assert distributed.main([*argv, "-m", "train"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err


def test_settings_come_from_the_environment_and_flags_win():
    env = {distributed.ENV_COORDINATOR: "127.0.0.1:1234", distributed.ENV_NUM_PROCESSES: "4",
           distributed.ENV_PROCESS_ID: "3"}
    assert distributed.resolve(environ=env) == distributed.Settings("127.0.0.1:1234", 4, 3)
    assert distributed.resolve(process_id=1, environ=env).process_id == 1
    with pytest.raises(distributed.UserInputError, match="JAX_PROCESS_ID"):
        distributed.resolve(environ={**env, distributed.ENV_PROCESS_ID: "abc"})
    slurm = distributed.resolve(environ={"SLURM_JOB_ID": "7"})  # jax fills the rest from SLURM's variables
    assert slurm.coordinator is None and slurm.num_processes is None


def test_module_and_launcher_errors_are_one_line(capsys):
    args = ["--coordinator", "127.0.0.1:1234", "--num-processes", "1", "--process-id", "0"]
    assert distributed.main([*args, "-m", "no_such_module"]) == 2
    assert "no module named 'no_such_module'" in capsys.readouterr().err
    assert distributed.main(args) == 2
    assert "expected -m MODULE" in capsys.readouterr().err
    assert launch.main(["--processes", "0", "-m", "train"]) == 2
    assert "--processes" in capsys.readouterr().err


def test_launcher_gives_each_process_its_settings_and_devices():
    env = launch.process_env(1, 2, 3, 4321, {"KEEP": "1"})
    assert env[distributed.ENV_COORDINATOR] == "127.0.0.1:4321" and env["KEEP"] == "1"
    assert (env[distributed.ENV_NUM_PROCESSES], env[distributed.ENV_PROCESS_ID]) == ("2", "1")
    assert env["JAX_NUM_CPU_DEVICES"] == "3" and env["JAX_LOCAL_DEVICE_IDS"] == "3,4,5"
    assert port_free(launch.free_port())
