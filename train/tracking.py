"""Per-update scalars from inside a compiled training program to a `Logger` (train/loggers.py).

`DeviceFeed.emit(update_idx, metrics)` is called in the traced update step (train.ppo.update_step,
train.grpo's update loop) only when a logger is on: with `logger: none` no feed exists, nothing is
traced, and the compiled program is the one without tracking. When on, it stages ONE
`io_callback` per update, however many vmaps the step sits under: `emit` is a `custom_vmap` whose
batching rule re-emits with the batched arrays, so the host receives every run's metrics of the
update at once, with the run axes leading in the order of the vmaps (outermost first: (L, S) for
learning rates x seeds, (G, S) for a sweep's cells x seeds). The host side only copies the arrays
into a queue; a thread writes them to the logger, so the device never waits on a file or network.

`runs` names the runs with an array of the run axes' shape; run (i, j) of the metrics is logged as
`runs[i, j]` at step (update + 1) * steps_per_update (env steps done in that run).
"""
from __future__ import annotations

import queue
import sys
import threading

import jax
import jax.numpy as jnp
import numpy as np
from jax import custom_batching
from jax.experimental import io_callback

from train.loggers import Logger, NullLogger


def one_callback(host):
    """-> traced `emit(update_idx, metrics)` that calls `host(update_idx, metrics)` once per execution with
    the arrays batched over every enclosing vmap (unbatched arguments broadcast to the run axes)."""

    @custom_batching.custom_vmap
    def emit(update_idx, metrics):
        io_callback(host, None, update_idx, metrics, ordered=False)
        return jnp.zeros((), jnp.int32)  # custom_vmap needs an output; the callback is kept for its effect

    @emit.def_vmap
    def emit_batched(axis_size, in_batched, update_idx, metrics):
        grow = lambda x, batched: x if batched else jnp.broadcast_to(x, (axis_size,) + jnp.shape(x))  # noqa: E731
        update_idx, metrics = jax.tree.map(grow, (update_idx, metrics), tuple(in_batched))
        return emit(update_idx, metrics), False

    return emit


class DeviceFeed:
    """Receives each update's metrics from the device and writes them to `logger`, per run, on a thread."""

    def __init__(self, logger: Logger, runs: np.ndarray, steps_per_update: int):
        self.logger, self.runs, self.steps_per_update = logger, np.asarray(runs), steps_per_update
        self.emit = one_callback(self._receive)
        self._queue: queue.Queue = queue.Queue()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._drain, name="nexus-tracking", daemon=True)
        self._thread.start()

    def _receive(self, update_idx, metrics) -> None:
        """Host side of the callback: copy (XLA may reuse the buffers once it returns) and queue."""
        self._queue.put((np.array(update_idx), {k: np.array(v) for k, v in metrics.items()}))

    def _drain(self) -> None:
        while (item := self._queue.get()) is not None:
            if self._error is None:
                try:
                    self._write(*item)
                except Exception as e:  # noqa: BLE001  (kept for close(); training goes on)
                    self._error = e
                    print(f"experiment tracking stopped: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            self._queue.task_done()

    def _write(self, update_idx: np.ndarray, metrics: dict) -> None:
        log_update(self.logger, self.runs, update_idx, metrics, self.steps_per_update)

    def flush(self) -> None:
        """Wait until every update dispatched so far is written (the feed stays open)."""
        jax.effects_barrier()  # callbacks of a program still running (jit returns before it ends) arrive first
        self._queue.join()

    def close(self) -> None:
        """Wait until every update dispatched is written; raise the error that stopped the writing, if any."""
        jax.effects_barrier()  # without it, a program still running could call back after the feed closed
        self._queue.put(None)
        self._thread.join()
        if self._error is not None:
            raise RuntimeError(f"experiment tracking failed: {self._error}") from self._error


def log_update(logger: Logger, runs: np.ndarray, update_idx: np.ndarray, metrics: dict, steps_per_update: int):
    """One update of every run: `update_idx` and each metric with the run axes of `runs`."""
    if update_idx.shape != runs.shape:
        raise ValueError(f"the metrics have run axes {update_idx.shape}, the run names {runs.shape}")
    for index in np.ndindex(runs.shape):
        step = (int(update_idx[index]) + 1) * steps_per_update
        logger.log_scalars(str(runs[index]), step, {k: float(v[index]) for k, v in metrics.items()})


def device_feed(logger: Logger, runs: np.ndarray, steps_per_update: int) -> DeviceFeed | None:
    """A feed into `logger`, or None when tracking is off (then nothing is traced into the program) or the
    run spans several processes: a host callback in a program over several processes stalls them
    (measured: the coordination service's heartbeat ends the run), so there `log_history` writes the
    same scalars once training returns."""
    if type(logger) is NullLogger or jax.process_count() > 1:
        return None
    return DeviceFeed(logger, runs, steps_per_update)


def log_history(logger: Logger, feed: DeviceFeed | None, runs: np.ndarray, metrics: dict,
                steps_per_update: int) -> None:
    """After training, when no feed ran (a multi-process run): every update's metrics, (run axes..., updates),
    to `logger` at the steps a feed would have used. With a feed, or tracking off, nothing to do."""
    if feed is not None or type(logger) is NullLogger:
        return
    metrics = {k: np.asarray(v) for k, v in metrics.items()
               if np.ndim(v) == runs.ndim + 1 and np.shape(v)[:runs.ndim] == runs.shape}  # scalars per update
    at = lambda u: (slice(None),) * runs.ndim + (u,)  # noqa: E731
    for u in range(next(iter(metrics.values())).shape[-1]):
        log_update(logger, runs, np.full(runs.shape, u), {k: v[at(u)] for k, v in metrics.items()}, steps_per_update)


def run_name(**coords) -> str:
    """'lr=0.001,seed=0': a run's coordinates, as run folder and run name."""
    return ",".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in coords.items())


def ppo_runs(cfg) -> tuple[np.ndarray, dict]:
    """`python -m train`'s runs: names (L, S) (learning rates x seeds) and each run's config."""
    names = np.array([[run_name(lr=lr, seed=s) for s in range(cfg.num_seeds)] for lr in cfg.sweep_lrs], dtype=object)
    configs = {names[i, s]: {**cfg.to_dict(), "lr": lr, "seed_index": s}
               for i, lr in enumerate(cfg.sweep_lrs) for s in range(cfg.num_seeds)}
    return names, configs


def drain(feed: DeviceFeed | None) -> None:
    """Wait until `feed` (if any) has written every update it received; then it takes no more."""
    if feed is not None:
        feed.close()


def close_tracking(logger: Logger, feed: DeviceFeed | None) -> None:
    """End tracking early (an interrupted run): what the feed queued is written, then the logger closed."""
    try:
        drain(feed)
    finally:
        logger.close()


def log_epochs(logger: Logger, run: str, metrics: dict, epochs: int) -> None:
    """Host-side history (train.bc's per-epoch losses): each metric with `epochs` values, at steps 1..epochs."""
    series = {k: np.asarray(v) for k, v in metrics.items() if np.shape(v) == (epochs,)}
    for e in range(epochs):
        logger.log_scalars(run, e + 1, {k: float(v[e]) for k, v in series.items()})
