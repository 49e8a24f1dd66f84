"""Resumable training: run PPO in chunks of `checkpoint_every` updates, checkpointing between chunks.

`train_resumable` is what `python -m train` runs when `checkpoint_every` > 0: after every
chunk it writes RUN_DIR/checkpoint/ with the item `train` (the whole sweep's carry:
params, optimiser state, optimiser step, env states, observations, running returns, RNG
keys, snapshot buffer; and the metrics so far), the update count and the config. Ctrl-C
stops after saving the last finished chunk (if it was not saved yet) and raises
`Interrupted`; `python -m train --resume RUN_DIR` restores the carry and runs the remaining
chunks. In a multi-process run (every process runs it) Ctrl-C is noted on each process and
they agree after each chunk whether to stop, so all stop after the same checkpoint. Chunks
always start at multiples of `checkpoint_every`, so a resumed run executes
the same compiled programs on the same inputs as an uninterrupted one and ends with
bitwise-identical parameters on CPU (tests/test_resume.py).

With `checkpoint_every: 0` (the default) training is the single compiled program of
`make_runs`, unchanged, and only the final params are checkpointed.
"""
from __future__ import annotations

import contextlib
import signal
import threading
from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from nexus_jax import distributed, sharding
from nexus_jax.cli import UserInputError
from train.checkpoint import CHECKPOINT_DIR, CheckpointError, config_changes, read_meta, restore_checkpoint, \
    save_checkpoint
from train.config import PPOConfig
from train.learner_env import LearnerEnv
from train.ppo import make_chunks
from train.tracking import DeviceFeed


class Interrupted(Exception):
    """Training stopped by Ctrl-C; `step` updates are in the run folder's checkpoint."""

    def __init__(self, step: int, run_dir: Path):
        super().__init__(f"interrupted after {step} update(s); checkpoint in {run_dir / CHECKPOINT_DIR}; "
                         f"continue with: python -m train --resume {run_dir}")
        self.step = step


def sweep_keys(cfg: PPOConfig):
    """(rngs (S,), lrs (L,)): the same inputs `python -m train` gives `make_runs`."""
    return jax.random.split(jax.random.PRNGKey(cfg.seed), cfg.num_seeds), jnp.asarray(cfg.sweep_lrs)


def resume_step(run_dir: Path, cfg: PPOConfig) -> int:
    """Updates done in RUN_DIR's resumable checkpoint (verified, and written with this config)."""
    meta = read_meta(run_dir / CHECKPOINT_DIR)
    if config_changes(meta, cfg):
        raise CheckpointError(f"{str(run_dir / 'config.yaml')!r}: differs from the config the checkpoint was "
                              f"written with; a resumed run must keep its config")
    if "train" not in meta["items"]:
        raise UserInputError(f"run folder {str(run_dir)!r}: its checkpoint has no training state to resume "
                             f"(trained with checkpoint_every=0)")
    if meta["step"] >= cfg.num_updates:
        raise UserInputError(f"run folder {str(run_dir)!r}: already trained all {cfg.num_updates} updates")
    return int(meta["step"])


@contextlib.contextmanager
def sigint_noted():
    """Note Ctrl-C instead of raising it while the block runs: yields a list that holds the signal once one came."""
    caught: list = []
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        yield caught  # not ours to handle, or ignored already (nohup): a SIGINT must not stop this run
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield caught
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def sigint_deferred():
    """Hold Ctrl-C until the block ends, then raise it: a checkpoint save is never cut in half (orbax
    writes from background threads, which a KeyboardInterrupt in the main thread would orphan)."""
    with sigint_noted() as caught:
        yield
    if caught:
        raise KeyboardInterrupt


def _save(run_dir: Path, carry, parts: list[dict], cfg: PPOConfig, done: int, guard: bool = True) -> None:
    with sigint_deferred() if guard else contextlib.nullcontext():
        save_checkpoint(run_dir / CHECKPOINT_DIR, {"train": {"carry": carry, "metrics": _concat(parts)}}, cfg, done)


def _concat(parts: list[dict]) -> dict:
    """Per-chunk metrics (L, S, length) joined along the update axis."""
    return {k: np.concatenate([np.asarray(c[k]) for c in parts], -1) for k in parts[0]}


def train_resumable(cfg: PPOConfig, env: LearnerEnv, run_dir: Path, snapshot_every: int,
                    progress: Callable | None = None, resume: bool = False, chunk_done: Callable | None = None,
                    chunks: tuple | None = None, mesh=None, feed: DeviceFeed | None = None) -> dict:
    """Train in chunks, checkpointing after each -> {"params", "metrics", ["snapshots"], "train"} with (L, S) axes.

    `resume`: continue from RUN_DIR's checkpoint. `chunk_done(step)` (tests) is called after
    each chunk's checkpoint is written. `chunks`: the (init, run) of `make_chunks` for these
    arguments, to reuse their compilation (tests); default: made here, over `mesh` (`make_chunks`).
    `feed`: every update's metrics to the experiment logger (train/tracking.py).
    In a multi-process run every process calls it; the carry it returns is spread over them.
    """
    together = jax.process_count() > 1  # several processes: Ctrl-C is noted, and they agree after each chunk
    with sigint_noted() if together else contextlib.nullcontext([]) as caught:
        init, run = chunks or make_chunks(cfg, progress, env, snapshot_every, mesh, feed)
        rngs, lrs = sweep_keys(cfg)
        k, total = cfg.checkpoint_every, cfg.num_updates
        if resume:
            done = resume_step(run_dir, cfg)
            template = {"carry": jax.eval_shape(init, rngs, lrs),
                        "metrics": jax.eval_shape(lambda c: run(c, lrs, 0, done)[1], jax.eval_shape(init, rngs, lrs))}
            restored, _ = restore_checkpoint(run_dir / CHECKPOINT_DIR, {"train": template})
            carry, parts = restored["train"]["carry"], [sharding.tree_to_host(restored["train"]["metrics"])]
        else:
            done, carry, parts = 0, init(rngs, lrs), []
        saved = done
        try:
            while done < total:
                length = min(k, total - done)
                carry, metrics = jax.block_until_ready(run(carry, lrs, done, length))
                parts.append(sharding.tree_to_host(metrics))
                done += length
                _save(run_dir, carry, parts, cfg, done, guard=not together)
                saved = done
                if chunk_done is not None:
                    chunk_done(done)
                if together and done < total and distributed.any_process(bool(caught)):
                    raise Interrupted(done, run_dir)
        except KeyboardInterrupt:
            if saved < done:  # Ctrl-C after a chunk finished but before its checkpoint was started
                _save(run_dir, carry, parts, cfg, done)
            raise Interrupted(done, run_dir) from None
    metrics = _concat(parts)
    out = {"params": carry["params"], "metrics": metrics, "train": {"carry": carry, "metrics": metrics}}
    if snapshot_every:
        out["snapshots"] = carry["snapshots"]
    return out
