"""The accelerator script runs end to end on the CPU at toy sizes: a broken device script would
only be found on a lent GPU, whose minutes are few (it once passed a tuple as the PRNG key)."""
import json

from bench import device


def test_device_sweep_writes_every_row_and_the_ppo_share(tmp_path, capsys):
    out = tmp_path / "device.json"
    assert device.main(["--agents", "4", "--log2-batches", "2", "--steps", "2", "--train-envs", "4",
                        "--train-updates", "1", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert {(r["kind"], r["batch"]) for r in result["rows"]} == {
        ("core", 4), ("env.step", 4), ("env.step, fast paths off", 4), ("env.step+masks", 4), ("ppo_train", 4),
        ("ppo_rollout", 4), ("ppo_update", 4)}  # on CPU the fast paths are the default: the other row is plain JAX
    assert all(r["env_steps_per_s"] > 0 for r in result["rows"]) and result["notes"] == []
    assert "of the env class's raw rate (env.step + masks) at the same batch" in capsys.readouterr().out
