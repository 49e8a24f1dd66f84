"""The accelerator script runs end to end on the CPU at toy sizes: a broken device script would
only be found on a lent GPU, whose minutes are few (it once passed a tuple as the PRNG key)."""
import json

from bench import device


def test_device_sweep_writes_every_row(tmp_path):
    out = tmp_path / "device.json"
    assert device.main(["--agents", "4", "--log2-batches", "2", "--steps", "2", "--train-envs", "0",
                        "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert {(r["kind"], r["batch"]) for r in result["rows"]} == {("core", 4), ("env.step", 4)}
    assert all(r["env_steps_per_s"] > 0 for r in result["rows"]) and result["notes"] == []


def test_device_ppo_rows_and_the_share_of_the_raw_rate(tmp_path, capsys):
    out = tmp_path / "device.json"
    assert device.main(["--agents", "4", "--log2-batches", "2", "--steps", "2", "--train-envs", "4",
                        "--train-updates", "1", "--out", str(out)]) == 0
    kinds = {r["kind"] for r in json.loads(out.read_text())["rows"]}
    assert {"env.step+masks", "ppo_train", "ppo_rollout", "ppo_update"} <= kinds
    assert "of the env class's raw rate (env.step + masks) at the same batch" in capsys.readouterr().out
