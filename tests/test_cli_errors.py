"""Bad input to every command: one error line naming the file, key or value, exit code 2, nothing written.

Commands are called in-process (their `main(argv)`), which is what the shared
`nexus_jax.cli.entry_point` wrapper serves; one subprocess test checks the real exit code
and that stderr holds exactly one line.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nexus_jax import play, tournament
from train import __main__ as train_cli, evaluate, pipeline, report

ROOT = Path(__file__).resolve().parent.parent


def _fails(capsys, main, argv, *needles):
    """main(argv) returns 2 and prints one stderr line containing every needle."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    for n in needles:
        assert n in err[0], (n, err[0])
    return err[0]


def test_train_bad_config_file(tmp_path, capsys):
    runs = f"run_dir={tmp_path / 'runs'}"
    _fails(capsys, train_cli.main, ["--config", str(tmp_path / "nope.yaml"), runs], "nope.yaml", "not found")
    bad = tmp_path / "bad.yaml"
    bad.write_text("lr: [1, 2\nnum_envs: 4\n")
    _fails(capsys, train_cli.main, ["--config", str(bad), runs], "bad.yaml", "invalid YAML", "line")
    bad.write_text("- just\n- a list\n")
    _fails(capsys, train_cli.main, ["--config", str(bad), runs], "bad.yaml", "mapping")
    _fails(capsys, train_cli.main, ["--config", str(tmp_path), runs], "cannot be read")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("override, needles", [
    ("nonsense_key=1", ["'nonsense_key'", "unknown"]),
    ("env.wait_cost=[1, 2]", ["NexusParams.wait_cost", "scalar"]),  # a list for a scalar env param
    ("env.max_steps=true", ["NexusParams.max_steps", "bool"]),
    ("env.obs_scale=1e-37", ["NexusParams.obs_scale"]),
    ("lr=[oops", ["lr=", "invalid YAML"]),
    ("num_envs=-3", ["'num_envs'"]),
    ("name=..", ["'name'"]),
    ("checkpoint_every=-2", ["'checkpoint_every'"]),
])
def test_train_bad_override_creates_nothing(tmp_path, capsys, override, needles):
    _fails(capsys, train_cli.main, [f"run_dir={tmp_path / 'runs'}", override], *needles)
    assert not (tmp_path / "runs").exists()


def test_train_bad_argument(capsys):
    _fails(capsys, train_cli.main, ["--no-such-flag"], "--no-such-flag")


def test_evaluate_and_report_bad_run_folder(tmp_path, capsys):
    _fails(capsys, evaluate.main, [str(tmp_path / "missing")], "missing", "not found")
    (tmp_path / "empty").mkdir()
    _fails(capsys, evaluate.main, [str(tmp_path / "empty")], "empty", "no config.yaml")
    _fails(capsys, report.main, [str(tmp_path / "missing")], "missing", "not found")
    _fails(capsys, evaluate.main, [str(tmp_path / "empty"), "--episodes", "0"], "--episodes")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"] and not any((tmp_path / "empty").iterdir())


def test_pipeline_validates_before_writing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _fails(capsys, pipeline.main, ["--config", "nope.yaml"], "nope.yaml")
    _fails(capsys, pipeline.main, ["grpo.no_such=1"], "grpo.no_such")
    _fails(capsys, pipeline.main, ["env.upkeep=3"], "NexusParams.upkeep")
    assert list(tmp_path.iterdir()) == []


def test_play_and_tournament(tmp_path, capsys):
    _fails(capsys, play.main, ["--script", str(tmp_path / "none.txt")], "none.txt", "not found")
    _fails(capsys, play.main, ["--num-agents", "99"], "NexusParams.num_agents", "99")
    _fails(capsys, play.main, ["--steps", "0"], "--steps")
    _fails(capsys, tournament.main, ["--episodes", "many"], "--episodes", "many")
    _fails(capsys, tournament.main, ["--steps", str(2**31)], "--steps", "NexusParams.max_steps")


def test_exit_code_and_one_stderr_line_in_a_real_process(tmp_path):
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    r = subprocess.run([sys.executable, "-m", "train.evaluate", str(tmp_path / "no_run")], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [f"python -m train.evaluate: error: run folder "
                                             f"'{tmp_path / 'no_run'}': not found"]
    assert r.stdout == ""


def test_unhandled_ctrl_c_is_one_line_and_130(capsys):
    from nexus_jax.cli import entry_point

    @entry_point("python -m some.command")
    def main(argv=None):
        raise KeyboardInterrupt

    assert main([]) == 130
    assert capsys.readouterr().err.strip().splitlines() == ["python -m some.command: interrupted"]
