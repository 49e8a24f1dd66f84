"""Resume: a run interrupted after k updates and resumed ends bitwise where an uninterrupted one does.

Tiny sizes (2 envs x 4 steps, 4 updates in chunks of 2, 8 hidden units). The chunk program is
compiled once per `make_chunks`; the persistent XLA cache (conftest) serves the repeats.
"""
import json
import signal

import jax
import numpy as np
import pytest

from train import __main__ as train_cli
from train.checkpoint import CHECKPOINT_DIR, CheckpointError, load_run, read_meta, save_run
from train.config import resolve_checkpoint_every, load_config, save_config
from train.ppo import make_chunks, make_env, make_sweep
from train.resume import Interrupted, sigint_deferred, sweep_keys, train_resumable

TINY = ["name=tiny", "hidden_size=8", "num_layers=1", "num_envs=2", "num_steps=4", "total_timesteps=32",
        "num_minibatches=1", "update_epochs=1", "env.max_steps=4", "snapshot_every=1", "checkpoint_every=2",
        "progress=false"]


def _equal(a, b):
    return all(jax.tree.leaves(jax.tree.map(lambda x, y: bool(np.array_equal(np.asarray(x), np.asarray(y))), a, b)))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("resume")
    cfg = load_config(overrides=TINY)
    env = make_env(cfg)
    chunks = make_chunks(cfg, env=env, snapshot_every=1)  # one compilation for the three runs
    full = train_resumable(cfg, env, root / "full", snapshot_every=1, chunks=chunks)

    def ctrl_c(step):
        if step == 2:
            raise KeyboardInterrupt

    with pytest.raises(Interrupted, match="after 2 update"):
        train_resumable(cfg, env, root / "cut", snapshot_every=1, chunk_done=ctrl_c, chunks=chunks)
    meta_at_cut = read_meta(root / "cut" / CHECKPOINT_DIR)
    save_config(cfg, root / "cut" / "config.yaml")  # as python -m train writes it before training
    with pytest.raises(CheckpointError, match="stopped at update 2 of 4.*--resume"):
        load_run(root / "cut")  # train.evaluate on an interrupted run says what to do
    resumed = train_resumable(cfg, env, root / "cut", snapshot_every=1, resume=True, chunks=chunks)
    return cfg, full, resumed, meta_at_cut


@pytest.mark.slow
def test_resumed_run_equals_uninterrupted_bitwise(runs):
    cfg, full, resumed, meta = runs
    assert meta["step"] == 2 and meta["items"] == ["train"]
    assert _equal(full["params"], resumed["params"])
    assert _equal(full["snapshots"], resumed["snapshots"])
    assert _equal(full["train"]["carry"], resumed["train"]["carry"])  # optimiser state, RNG keys, env states
    for k in full["metrics"]:
        assert full["metrics"][k].shape[-1] == cfg.num_updates
        np.testing.assert_array_equal(full["metrics"][k], resumed["metrics"][k])
    # and it trained: the params moved away from the initialisation (snapshot slot 0)
    assert not _equal(jax.tree.map(lambda s: s[:, :, 0], full["snapshots"]), full["params"])


@pytest.fixture(scope="module")
def recurrent_runs(tmp_path_factory):
    """A recurrent policy (memory=gru) with 3-step episodes, so episodes and memories run across the chunk
    boundaries, and a minibatch of one env's sequence: uninterrupted in chunks, interrupted and resumed, and
    as one compiled program (run twice)."""
    root = tmp_path_factory.mktemp("resume-gru")
    cfg = load_config(overrides=TINY + ["name=tiny-gru", "memory=gru", "memory_size=8", "env.max_steps=3",
                                        "num_minibatches=2"])
    env = make_env(cfg)
    chunks = make_chunks(cfg, env=env, snapshot_every=1)
    full = train_resumable(cfg, env, root / "full", snapshot_every=1, chunks=chunks)
    with pytest.raises(Interrupted):
        train_resumable(cfg, env, root / "cut", snapshot_every=1, chunks=chunks,
                        chunk_done=lambda step: (_ for _ in ()).throw(KeyboardInterrupt) if step == 2 else None)
    resumed = train_resumable(cfg, env, root / "cut", snapshot_every=1, resume=True, chunks=chunks)
    program = make_sweep(cfg, env=env, snapshot_every=1)
    return full, resumed, program(*sweep_keys(cfg)), program(*sweep_keys(cfg))


@pytest.mark.slow
def test_recurrent_training_is_deterministic_and_resumes_bitwise(recurrent_runs):
    full, resumed, one, again = recurrent_runs
    memory = full["train"]["carry"]["memory"]
    assert np.abs(np.asarray(memory["actor"])).sum() > 0  # the carry holds the memory mid-episode
    assert _equal(full["train"]["carry"], resumed["train"]["carry"])  # params, optimiser, envs, memory, keys
    assert _equal(full["metrics"], resumed["metrics"])
    assert _equal(one, again)  # the same program twice: bit for bit
    # Chunks and one scan over every update are two compiled programs: XLA fuses them differently, so they agree
    # to the last bits of float32 (measured 3e-8, as the feedforward policy's 1.5e-8), not bitwise.
    for a, b in zip(jax.tree.leaves((full["params"], full["metrics"])), jax.tree.leaves((one["params"],
                                                                                        one["metrics"]))):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_resume_cli_refuses_what_it_cannot_continue(runs, tmp_path, capsys):
    cfg, full, _, _ = runs
    run = tmp_path / "done"
    params = jax.tree.map(lambda x: x[0, 0], full["params"])
    save_run(run, cfg, params, train=full["train"])  # a finished run
    assert train_cli.main(["--resume", str(run)]) == 2
    assert "already trained all 4 updates" in capsys.readouterr().err
    assert train_cli.main(["--resume", str(run), "lr=0.1"]) == 2
    assert "no --config or key=value overrides" in capsys.readouterr().err
    assert train_cli.main(["--resume", str(tmp_path / "nothing")]) == 2
    assert "not found" in capsys.readouterr().err
    cfg0 = load_config(overrides=TINY[:-2] + ["checkpoint_every=0"])  # one program: params only, nothing to resume
    save_run(tmp_path / "mono", cfg0, params)
    assert train_cli.main(["--resume", str(tmp_path / "mono")]) == 2
    assert "no training state to resume" in capsys.readouterr().err
    save_config(load_config(overrides=TINY + ["ent_coef=0.5"]), run / "config.yaml")  # config edited after save
    with pytest.raises(CheckpointError, match="config.yaml"):
        load_run(run)
    assert train_cli.main(["--resume", str(run)]) == 2


def test_ctrl_c_exits_130_with_one_line(monkeypatch, tmp_path, capsys):
    def interrupted(cfg, env, run_dir, *a, **k):
        raise Interrupted(3, run_dir)

    monkeypatch.setattr(train_cli, "train_resumable", interrupted)
    assert train_cli.main([f"run_dir={tmp_path}"] + TINY) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"python -m train: interrupted after 3 update(s); checkpoint in {tmp_path / 'tiny' / 'checkpoint'}; "
                       f"continue with: python -m train --resume {tmp_path / 'tiny'}")
    assert json.loads(json.dumps(load_config(tmp_path / "tiny" / "config.yaml").to_dict()))["checkpoint_every"] == 2


@pytest.fixture
def sigint_handler():
    """Set SIGINT's handler for one test (the suite may run under nohup, which ignores SIGINT); restore it after."""
    before = signal.getsignal(signal.SIGINT)
    yield lambda handler: signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGINT, before)


def test_ctrl_c_during_a_save_waits_for_the_save(sigint_handler):
    """SIGINT inside `sigint_deferred` is held until the block ends, then raised; the handler is put back."""
    sigint_handler(signal.default_int_handler)
    finished = []
    with pytest.raises(KeyboardInterrupt):
        with sigint_deferred():
            signal.raise_signal(signal.SIGINT)  # to this thread, at once (a kill may land in another thread later)
            finished.append(True)  # still running: the save would complete
    assert finished == [True]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is restored


def test_a_run_that_ignores_ctrl_c_keeps_ignoring_it_during_a_save(sigint_handler):
    """Under nohup SIGINT is ignored: a save must not turn one into a KeyboardInterrupt."""
    sigint_handler(signal.SIG_IGN)
    with sigint_deferred():
        signal.raise_signal(signal.SIGINT)  # to this thread, at once (a kill may land in another thread later)
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_auto_checkpointing_is_four_chunks_on_one_device_and_on_several():
    cfg = resolve_checkpoint_every(load_config(overrides=TINY[:-2] + ["checkpoint_every=-1", "total_timesteps=64"]))
    assert cfg.num_updates == 8 and cfg.checkpoint_every == 2
    several = resolve_checkpoint_every(load_config(overrides=TINY[:-2] + ["checkpoint_every=-1", "num_devices=0",
                                                                          "total_timesteps=64"]))
    assert several.checkpoint_every == 2
    assert load_config().checkpoint_every == -1  # configs/ppo.yaml: python -m train checkpoints by default
    assert resolve_checkpoint_every(load_config(overrides=TINY)).checkpoint_every == 2  # explicit values stay
