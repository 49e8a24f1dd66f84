"""Experiment-tracking backends: TensorBoard event files or Weights & Biases runs, behind one `Logger` interface.

A logger holds named runs, declared when it opens (each with its config): the training runs of a
command (one per seed x learning rate, per grid cell x seed, per pipeline stage) and the
`EVALUATION` run that receives the evaluation table and the output files. `logger: none` (the
default) is the `NullLogger`. The backends are optional extras, imported only when chosen:
`pip install 'nexus-jax[tensorboard]'` or `'nexus-jax[wandb]'`.

TensorBoard writes through the `tensorboard` package's own event-file writer (one event per
update carrying every scalar), one sub-folder per run under RUN_DIR/tensorboard/:
`tensorboard --logdir runs/`. wandb opens one run per training run in one process
(`reinit="create_new"`), grouped by the config's `name`, under RUN_DIR/wandb/;
`wandb_mode: offline` keeps them local (`wandb sync` uploads them later).
"""
from __future__ import annotations

import importlib
import importlib.util
import struct
import time
from pathlib import Path
from typing import Mapping

import yaml

from nexus_jax.cli import UserInputError

LOGGERS = ("none", "tensorboard", "wandb")
WANDB_MODES = ("online", "offline")
EVALUATION = "evaluation"  # the run holding the evaluation table and the output files
_EXTRA = {"tensorboard": ("tensorboard", "tensorboard"), "wandb": ("wandb", "wandb")}  # logger -> (module, extra)


def missing_extra(logger: str) -> str | None:
    """Why `logger` cannot run here (its package is not installed), or None; checked when a config is read."""
    if logger == "none":
        return None
    module, extra = _EXTRA[logger]
    if importlib.util.find_spec(module) is None:
        return f"logger={logger} needs the {module!r} package: pip install 'nexus-jax[{extra}]'"
    return None


def _import(logger: str):
    problem = missing_extra(logger)
    if problem:
        raise UserInputError(problem)
    return importlib.import_module(_EXTRA[logger][0])


class Logger:
    """Where a command's numbers go: scalars per run and step, a table and files. The base class logs nothing
    (`logger: none`); `run` is one of the names the logger was opened with."""

    def log_scalars(self, run: str, step: int, values: Mapping[str, float]) -> None:
        """Every value of one update (`step`: env steps done in that run, or epochs for BC)."""

    def log_table(self, run: str, name: str, rows: list[dict]) -> None:
        """A table: one dict per row, the same keys (the columns) in each."""

    def log_artifact(self, run: str, path: Path) -> None:
        """An output file of the command (a plot, a JSON summary, a replay)."""

    def close(self) -> None:
        """Write everything out; the logger takes nothing after this."""


NullLogger = Logger


def _markdown(rows: list[dict]) -> str:
    cols = list(rows[0])
    fmt = lambda v: f"{v:.4g}" if isinstance(v, float) else str(v)  # noqa: E731
    return "\n".join([" | ".join(cols), " | ".join("---" for _ in cols)]
                     + [" | ".join(fmt(r[c]) for c in cols) for r in rows])


def _png_size(data: bytes) -> tuple[int, int]:
    """(height, width) from a PNG's IHDR chunk."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG file")
    width, height = struct.unpack(">II", data[16:24])
    return height, width


class TensorBoardLogger(Logger):
    """One event-file folder per run under `directory`; each run's config as a text summary at step 0."""

    def __init__(self, directory: Path, runs: Mapping[str, dict]):
        _import("tensorboard")
        from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2
        from tensorboard.plugins.text import metadata as text_metadata
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self._pb = (event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2)
        self._text_metadata = text_metadata.create_summary_metadata(display_name=None, description=None)
        self._writers = {name: EventFileWriter(str(Path(directory) / name), max_queue_size=1000, flush_secs=10)
                         for name in runs}
        for name, config in runs.items():
            self._text(name, "config", f"```yaml\n{yaml.safe_dump(config, sort_keys=False)}```")
        print(f"tensorboard: {len(runs)} runs in {directory}/ (view: tensorboard --logdir {directory})", flush=True)

    def _event(self, run: str, step: int, values: list) -> None:
        event_pb2, summary_pb2 = self._pb[:2]
        self._writers[run].add_event(event_pb2.Event(wall_time=time.time(), step=step,
                                                     summary=summary_pb2.Summary(value=values)))

    def _text(self, run: str, tag: str, text: str) -> None:
        _, summary_pb2, tensor_pb2, shape_pb2 = self._pb
        tensor = tensor_pb2.TensorProto(dtype="DT_STRING", string_val=[text.encode()],
                                        tensor_shape=shape_pb2.TensorShapeProto(dim=[shape_pb2.TensorShapeProto.Dim(size=1)]))
        self._event(run, 0, [summary_pb2.Summary.Value(tag=tag, metadata=self._text_metadata, tensor=tensor)])

    def log_scalars(self, run, step, values):
        value = self._pb[1].Summary.Value
        self._event(run, step, [value(tag=k, simple_value=v) for k, v in values.items()])

    def log_table(self, run, name, rows):
        self._text(run, name, _markdown(rows))

    def log_artifact(self, run, path):
        """A PNG becomes an image summary; TensorBoard cannot hold other files, so their path is logged as text."""
        path = Path(path)
        if path.suffix.lower() != ".png":
            self._text(run, path.stem, f"file: `{path}`")
            return
        data = path.read_bytes()
        height, width = _png_size(data)
        summary_pb2 = self._pb[1]
        image = summary_pb2.Summary.Image(height=height, width=width, colorspace=4, encoded_image_string=data)
        self._event(run, 0, [summary_pb2.Summary.Value(tag=path.stem, image=image)])

    def close(self):
        for writer in self._writers.values():
            writer.close()


class WandbLogger(Logger):
    """One wandb run per run name, all in `group` of `project`, their files under `directory`/wandb/."""

    def __init__(self, directory: Path, runs: Mapping[str, dict], group: str, project: str, mode: str):
        self._wandb = wandb = _import("wandb")
        settings = wandb.Settings(console="off", silent=True)  # the command's output stays its own; one line below
        self._group = group
        self._runs = {}
        for name, config in runs.items():
            try:
                self._runs[name] = wandb.init(dir=str(directory), project=project, group=group, name=name,
                                              config=config, mode=mode, reinit="create_new", settings=settings)
            except Exception as e:  # e.g. online without `wandb login`: one line, not wandb's traceback
                self.close()
                raise UserInputError(f"logger=wandb: wandb.init failed ({type(e).__name__}: {e}); log in with "
                                     f"`wandb login` or set wandb_mode=offline") from None
        where = next(iter(self._runs.values())).url if mode == "online" else f"{directory}/wandb/ (`wandb sync` uploads)"
        print(f"wandb: {len(runs)} runs in project {project}, group {group}, {mode}: {where}", flush=True)

    def log_scalars(self, run, step, values):
        self._runs[run].log(dict(values), step=step)

    def log_table(self, run, name, rows):
        cols = list(rows[0])
        self._runs[run].log({name: self._wandb.Table(columns=cols, data=[[r[c] for c in cols] for r in rows])})

    def log_artifact(self, run, path):
        """The file as a wandb artifact (type "output"); a PNG also as an image in the run's media."""
        path = Path(path)
        if path.suffix.lower() == ".png":
            self._runs[run].log({path.stem: self._wandb.Image(str(path))})
        self._runs[run].log_artifact(str(path), name=f"{self._group}-{path.stem}", type="output")

    def close(self):
        for run in self._runs.values():
            run.finish()
        self._runs = {}


def open_logger(cfg, run_dir: Path, runs: Mapping[str, dict], writer: bool = True) -> Logger:
    """The logger `cfg.logger` names (a PPOConfig or PipelineConfig), writing under `run_dir`, with these runs.

    wandb groups the runs by `cfg.name` in `cfg.wandb_project`, mode `cfg.wandb_mode`. `writer` False (a
    process other than 0 of a multi-process run): a `NullLogger`, process 0 logs."""
    if not writer:
        return NullLogger()
    if cfg.logger == "tensorboard":
        return TensorBoardLogger(Path(run_dir) / "tensorboard", runs)
    if cfg.logger == "wandb":
        return WandbLogger(Path(run_dir), runs, cfg.name, cfg.wandb_project, cfg.wandb_mode)
    return NullLogger()
