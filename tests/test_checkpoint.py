"""Checkpoints: a round trip is exact; every kind of damage is a CheckpointError naming the file.

A tiny run folder is written once (freshly initialised params, no training); each test copies
it and damages the copy: 64 bytes flipped in any file, a file truncated or removed, an empty
folder, random bytes, a foreign checkpoint, a config.yaml that no longer matches, and the
old msgpack format (refused as unverifiable until converted; the conversion still checks what it can).
"""
import dataclasses
import json
import shutil

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from train import evaluate
from train.checkpoint import (CHECKPOINT_DIR, LEGACY_CHECKPOINT, CheckpointError, config_changes, convert_legacy,
                              load_run, param_shapes, restore_checkpoint, load_params, save_params, save_run)
from train.config import load_config, save_config
from train.ppo import make_env
from train.networks import ActorCritic

TINY = ["name=tiny", "hidden_size=8", "num_layers=1", "num_envs=2", "num_steps=4", "total_timesteps=8",
        "num_minibatches=1", "env.max_steps=4"]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("ckpt")
    cfg = load_config(overrides=TINY)
    env = make_env(cfg)
    rng = np.random.default_rng(0)
    params = jax.tree.map(lambda s: rng.normal(size=s.shape).astype(s.dtype),
                          param_shapes(cfg, env, ActorCritic.from_config(cfg, env)))
    save_run(root / "run", cfg, params)
    return root / "run", cfg, params


@pytest.fixture
def run(saved, tmp_path):
    src, _, _ = saved
    dst = tmp_path / "run"
    shutil.copytree(src, dst)
    return dst


def _files(run):
    return sorted(p for p in (run / CHECKPOINT_DIR).rglob("*") if p.is_file())


def test_round_trip_is_exact(saved):
    run, cfg, params = saved
    cfg2, _, _, restored = load_run(run)
    assert cfg2 == cfg
    jax.tree.map(lambda a, b: np.testing.assert_array_equal(np.asarray(a), np.asarray(b)), params, restored)


def test_every_file_is_covered_by_the_integrity_check(run):
    """64 bytes flipped in any file of the checkpoint (metadata included) is detected."""
    files = _files(run)
    assert len(files) >= 5
    for f in files:
        data = bytearray(f.read_bytes())
        original = bytes(data)
        start = max(0, len(data) // 2 - 32)
        for i in range(start, min(len(data), start + 64)):
            data[i] ^= 0xFF
        f.write_bytes(bytes(data))
        with pytest.raises(CheckpointError, match="damaged|differs|format"):
            load_run(run)
        f.write_bytes(original)
    load_run(run)  # restored: loads again


@pytest.mark.parametrize("damage, message", [
    ("remove_file", "missing"),
    ("truncate_file", "damaged"),
    ("empty_folder", "no meta.json"),
    ("no_folder", "not found"),
    ("random_bytes", "damaged|no meta.json"),
    ("checkpoint_is_a_file", "not a folder"),
    ("extra_file", "foreign file"),
])
def test_damage_is_named(run, damage, message):
    ckpt = run / CHECKPOINT_DIR
    files = _files(run)
    big = max(files, key=lambda p: p.stat().st_size if p.name != "meta.json" else -1)
    if damage == "remove_file":
        big.unlink()
    elif damage == "truncate_file":
        big.write_bytes(big.read_bytes()[: big.stat().st_size // 2])
    elif damage in ("empty_folder", "no_folder", "checkpoint_is_a_file"):
        shutil.rmtree(ckpt)
        if damage == "empty_folder":
            ckpt.mkdir()
        elif damage == "checkpoint_is_a_file":
            ckpt.write_bytes(b"")
    elif damage == "random_bytes":
        rng = np.random.default_rng(0)
        for f in files:
            f.write_bytes(rng.integers(0, 256, f.stat().st_size, dtype=np.uint8).tobytes())
    elif damage == "extra_file":
        (ckpt / "params" / "stray.bin").write_bytes(b"x")
    with pytest.raises(CheckpointError, match=message):
        load_run(run)


def test_foreign_checkpoints(run, saved):
    _, cfg, params = saved
    ckpt = run / CHECKPOINT_DIR
    meta = json.loads((ckpt / "meta.json").read_text())
    meta["format"] = "someone-else/3"
    (ckpt / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="foreign"):
        load_run(run)
    shutil.rmtree(ckpt)
    with ocp.StandardCheckpointer() as ck:  # an orbax checkpoint we did not write
        ck.save((ckpt / "params").absolute(), params)
    with pytest.raises(CheckpointError, match="not a nexus_jax checkpoint"):
        load_run(run)
    # A well-formed checkpoint of a different network does not fit this run's structure.
    with pytest.raises(CheckpointError, match="does not fit|holds no"):
        restore_checkpoint(saved[0] / CHECKPOINT_DIR, {"params": {"w": np.zeros((3, 3), np.float32)}})


def test_config_changed_after_the_save(run, saved):
    cfg = load_config(run / "config.yaml")
    save_config(type(cfg)(**{**cfg.__dict__, "ent_coef": 0.5}), run / "config.yaml")
    with pytest.raises(CheckpointError, match=r"config.yaml.*ent_coef"):
        load_run(run)


def test_a_config_key_added_since_the_save_counts_as_the_same_while_at_its_default(saved):
    """A run folder written before `memory` existed loads (as memory=none); any other difference is named."""
    _, cfg, _ = saved
    before = {k: v for k, v in cfg.to_dict().items() if k not in ("memory", "memory_size")}
    meta = {"config_sha256": "the digest of a config without the memory keys", "config": before}
    assert config_changes(meta, cfg) == []
    assert config_changes(meta, dataclasses.replace(cfg, memory="gru")) == ["memory"]
    assert config_changes({**meta, "config": {**before, "removed_key": 1}}, cfg) == ["removed_key"]


def test_legacy_msgpack_is_refused_as_unverifiable_until_converted(run, saved, capsys):
    _, _, params = saved
    shutil.rmtree(run / CHECKPOINT_DIR)
    save_params(params, run / LEGACY_CHECKPOINT)
    (run / (LEGACY_CHECKPOINT + ".sha256")).unlink()  # as written before digests existed
    with pytest.raises(CheckpointError, match=rf"cannot be verified.*python -m train.evaluate {run} --convert-legacy"):
        load_run(run)
    data = (run / LEGACY_CHECKPOINT).read_bytes()
    for bad, message in ((data[: len(data) // 2], "not this run's params"), (b"", "empty"),
                         (np.random.default_rng(1).integers(0, 256, 500, dtype=np.uint8).tobytes(), "params file")):
        (run / LEGACY_CHECKPOINT).write_bytes(bad)
        with pytest.raises(CheckpointError, match=message):  # what can be checked still is, at conversion
            convert_legacy(run)
        assert not (run / CHECKPOINT_DIR).exists()
    assert evaluate.main([str(run), "--convert-legacy"]) == 2  # the CLI: one error line, nothing evaluated
    assert "params file" in capsys.readouterr().err
    (run / LEGACY_CHECKPOINT).write_bytes(data)
    convert_legacy(run)
    _, _, _, restored = load_run(run)
    jax.tree.map(lambda a, b: np.testing.assert_array_equal(np.asarray(a), np.asarray(b)), params, restored)
    with pytest.raises(CheckpointError, match="nothing to convert"):
        convert_legacy(run)


def test_seed_and_snapshot_files_are_verified(saved, tmp_path):
    _, _, params = saved
    path = tmp_path / "seed_0.msgpack"
    save_params(params, path)
    data = bytearray(path.read_bytes())
    data[-70:-6] = bytes(b ^ 0xFF for b in data[-70:-6])  # 64 bytes flipped inside the last array
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="seed_0.msgpack.*damaged"):
        load_params(params, path)


def test_evaluate_reports_a_damaged_checkpoint_in_one_line(run, capsys):
    f = max(_files(run), key=lambda p: p.stat().st_size)
    data = bytearray(f.read_bytes())
    data[:64] = bytes(b ^ 0x5A for b in data[:64])
    f.write_bytes(bytes(data))
    assert evaluate.main([str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "damaged" in err[0] and str(f) in err[0]
