"""Checkpoints on orbax-checkpoint, verified at restore; the run folder's config.yaml beside them.

A checkpoint is a folder holding one orbax item per entry (`params`, and for a resumable
run `train`: optimiser state, update step, RNG keys, env state, metrics so far) plus
`meta.json`: the format tag, the update step, the run's config and its SHA-256, the SHA-256
of every file orbax wrote and of the saved arrays, and a SHA-256 of the metadata itself.
`restore_checkpoint` checks all of it before and after orbax reads the arrays, so a damaged
(bytes flipped), truncated, empty, random or foreign checkpoint is a `CheckpointError` naming
the file and what is wrong, never silently different weights. Saves go to a fresh folder
that replaces the old one only once complete (an interrupted save leaves the last good one).

Run folders written before this format hold `checkpoint.msgpack` (flax msgpack, params only, no
digest). Nothing can verify those bytes (a flipped byte inside an array loads as a different weight), so
`load_run` refuses one, saying so and how to convert it: `python -m train.evaluate RUN --convert-legacy`
(`convert_legacy`) reads it into the run's network (structure, dtypes and finite values checked), on the caller's word that
the file is intact, and writes a verified `checkpoint/` beside it, which every later load checks.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
import yaml
from flax import serialization
from jax.sharding import NamedSharding

from nexus_jax import distributed, sharding
from nexus_jax.cli import UserInputError, one_line
from train.config import load_config, save_config
from train.learner_env import LearnerEnv
from train.models import make_learner_env, make_policy
from train.networks import ActorCritic

FORMAT = "nexus_jax-checkpoint/1"
CHECKPOINT_DIR = "checkpoint"  # inside a run folder
LEGACY_CHECKPOINT = "checkpoint.msgpack"  # run folders from before orbax checkpoints
META = "meta.json"


class CheckpointError(UserInputError):
    """A checkpoint is missing, damaged, truncated, foreign or does not fit the run; names the file."""


# ---- digests -------------------------------------------------------------------------------

def tree_digest(tree) -> str:
    """SHA-256 over every leaf's path, dtype, shape and bytes (host order), in tree order.

    Arrays sharded over several processes are gathered first (every process calls it)."""
    h = hashlib.sha256()
    for path, leaf in jax.tree_util.tree_flatten_with_path(sharding.tree_to_host(tree))[0]:
        arr = np.ascontiguousarray(np.asarray(leaf))
        h.update(f"{jax.tree_util.keystr(path)}|{arr.dtype.str}|{arr.shape}|".encode())
        h.update(arr.tobytes())
    return h.hexdigest()


def config_digest(cfg) -> str:
    """SHA-256 of the config's canonical YAML (sorted keys): same config, same digest."""
    return hashlib.sha256(yaml.safe_dump(cfg.to_dict(), sort_keys=True).encode()).hexdigest()


def config_changes(meta: dict, cfg) -> list[str]:
    """The config keys where `cfg` differs from the config a checkpoint was written with (empty: the same run).

    A key the checkpoint's config lacks was added to the config since it was written: it counts as the
    same while `cfg` holds its default (a run folder from before `memory` existed loads as memory=none)."""
    if meta["config_sha256"] == config_digest(cfg):
        return []
    saved, now, default = meta["config"], cfg.to_dict(), type(cfg)().to_dict()
    return sorted(k for k in set(saved) | set(now) if saved.get(k, default.get(k)) != now.get(k))


def _file_digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != META}


def _meta_digest(meta: dict) -> str:
    body = {k: v for k, v in meta.items() if k != "meta_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


# ---- save / restore ------------------------------------------------------------------------

def save_checkpoint(path: str | Path, items: dict[str, Any], cfg, step: int) -> None:
    """Write `items` (name -> pytree) as orbax items under `path`, with verified metadata; atomic swap.

    In a multi-process run every process calls it: orbax writes each process's shards of the
    arrays (so a checkpoint restores onto any number of processes), process 0 the folders and
    the metadata, with barriers between.
    """
    path = Path(path).absolute()
    tmp = path.with_name(path.name + ".partial")
    writer = distributed.is_main_process()
    if writer:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    distributed.barrier("checkpoint folder")
    host = {name: sharding.tree_to_host(tree) for name, tree in items.items()}
    with ocp.StandardCheckpointer() as ckptr:
        for name in host:
            ckptr.save(tmp / name, items[name] if jax.process_count() > 1 else host[name])
        ckptr.wait_until_finished()
    if writer:
        meta = {"format": FORMAT, "step": int(step), "items": sorted(host),
                "arrays_sha256": {name: tree_digest(tree) for name, tree in host.items()},
                "config": cfg.to_dict(), "config_sha256": config_digest(cfg), "files": _file_digests(tmp)}
        meta["meta_sha256"] = _meta_digest(meta)
        (tmp / META).write_text(json.dumps(meta, indent=1, sort_keys=True))
        old = path.with_name(path.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if path.exists():
            os.replace(path, old)
        os.replace(tmp, path)
        shutil.rmtree(old, ignore_errors=True)
    distributed.barrier("checkpoint written")


def read_meta(path: str | Path) -> dict:
    """The checkpoint's metadata after checking it, its format and every file's SHA-256."""
    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"checkpoint {str(path)!r}: " + ("is not a folder" if path.exists() else "not found"))
    meta_path = path / META
    try:
        meta = json.loads(meta_path.read_text())
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {str(path)!r}: no {META}: not a nexus_jax checkpoint, or truncated") \
            from None
    except (ValueError, UnicodeDecodeError) as e:
        raise CheckpointError(f"checkpoint file {str(meta_path)!r}: damaged ({one_line(e)})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        got = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise CheckpointError(f"checkpoint {str(path)!r}: format {got!r}, expected {FORMAT!r} (a foreign checkpoint)")
    if meta.get("meta_sha256") != _meta_digest(meta):
        raise CheckpointError(f"checkpoint file {str(meta_path)!r}: damaged (its SHA-256 does not match)")
    on_disk = _file_digests(path)
    for name, digest in meta["files"].items():
        if name not in on_disk:
            raise CheckpointError(f"checkpoint file {str(path / name)!r}: missing (truncated checkpoint)")
        if on_disk[name] != digest:
            raise CheckpointError(f"checkpoint file {str(path / name)!r}: damaged (SHA-256 differs from the one "
                                  f"recorded at save)")
    extra = sorted(set(on_disk) - set(meta["files"]))
    if extra:
        raise CheckpointError(f"checkpoint file {str(path / extra[0])!r}: not written by the save (foreign file)")
    return meta


def _restore_target(x) -> jax.ShapeDtypeStruct:
    """Shape and dtype of a template leaf, and its layout over a mesh if it has one (a multi-process run's)."""
    layout = getattr(x, "sharding", None)
    return jax.ShapeDtypeStruct(np.shape(x), x.dtype, sharding=layout if isinstance(layout, NamedSharding) else None)


def restore_checkpoint(path: str | Path, templates: dict[str, Any]) -> tuple[dict[str, Any], dict]:
    """-> ({name: pytree shaped like templates[name]}, meta), verified; CheckpointError otherwise.

    Template leaves with a `NamedSharding` come back as arrays with that layout, each process
    reading its shards (any number of processes, whichever number wrote the checkpoint)."""
    path = Path(path).absolute()
    meta = read_meta(path)
    missing = sorted(set(templates) - set(meta["items"]))
    if missing:
        raise CheckpointError(f"checkpoint {str(path)!r}: holds no {missing[0]!r} (items: {meta['items']})")
    out = {}
    with ocp.StandardCheckpointer() as ckptr:
        for name, template in templates.items():
            target = jax.tree.map(_restore_target, template)
            try:
                out[name] = ckptr.restore(path / name, target)
            except Exception as e:  # orbax/tensorstore raise many kinds; all mean "does not fit"
                raise CheckpointError(f"checkpoint {str(path / name)!r}: does not fit this run's structure "
                                      f"({one_line(e)[:200]})") from None
            if tree_digest(out[name]) != meta["arrays_sha256"].get(name):
                raise CheckpointError(f"checkpoint {str(path / name)!r}: restored arrays differ from those saved "
                                      f"(SHA-256 mismatch)")
    return out, meta


# ---- run folders ---------------------------------------------------------------------------

def _digest_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def save_params(params, path: str | Path) -> None:
    """Params alone as flax msgpack (seeds/ and snapshots/ of a run folder), with `<file>.sha256` beside it."""
    path = Path(path)
    data = serialization.to_bytes(jax.device_get(params))
    path.write_bytes(data)
    _digest_path(path).write_text(hashlib.sha256(data).hexdigest() + "\n")


def load_params(template, path: str | Path):
    """Restore msgpack params into the structure (and dtypes) of `template`; CheckpointError names the file.

    The bytes are checked against `<file>.sha256` when it exists (files written before it existed
    load unverified, as before)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise CheckpointError(f"params file {str(path)!r}: cannot be read ({type(e).__name__})") from None
    if not data:
        raise CheckpointError(f"params file {str(path)!r}: empty")
    digest = _digest_path(path)
    if digest.exists() and digest.read_text().strip() != hashlib.sha256(data).hexdigest():
        raise CheckpointError(f"params file {str(path)!r}: damaged (SHA-256 differs from {digest.name})")
    try:
        params = serialization.from_bytes(template, data)
    except Exception as e:  # msgpack raises several kinds on truncated or random bytes
        raise CheckpointError(f"params file {str(path)!r}: not this run's params ({one_line(e)[:160]})") from None
    if jax.tree.structure(params) != jax.tree.structure(template):
        raise CheckpointError(f"params file {str(path)!r}: structure differs from this run's network")
    for (p, a), b in zip(jax.tree_util.tree_flatten_with_path(template)[0], jax.tree.leaves(params)):
        if np.shape(a) != np.shape(b) or np.dtype(a.dtype) != np.asarray(b).dtype:
            raise CheckpointError(f"params file {str(path)!r}: {jax.tree_util.keystr(p)} is {np.asarray(b).dtype}"
                                  f"{np.shape(b)}, this run's network needs {np.dtype(a.dtype)}{np.shape(a)}")
        if not np.all(np.isfinite(np.asarray(b))):
            raise CheckpointError(f"params file {str(path)!r}: {jax.tree_util.keystr(p)} holds NaN or inf")
    return params


def param_template(cfg, env: LearnerEnv, policy: ActorCritic):
    """Freshly initialised params of the right structure."""
    obs, state = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(0), 1))
    masks = jax.vmap(env.masks)(state)
    return policy.init(jax.random.PRNGKey(0), obs, masks)


def param_shapes(cfg, env: LearnerEnv, policy: ActorCritic):
    """The params' shapes and dtypes (`jax.ShapeDtypeStruct` leaves): a restore target that compiles nothing."""
    return jax.eval_shape(lambda: param_template(cfg, env, policy))


def save_run(run_dir: str | Path, cfg, params, train: Any = None, step: int | None = None) -> None:
    """config.yaml and the verified checkpoint (params; `train`: the resumable training state).

    Multi-process: every process calls it (`save_checkpoint`); process 0 writes config.yaml."""
    run_dir = Path(run_dir)
    if distributed.is_main_process():
        run_dir.mkdir(parents=True, exist_ok=True)
        save_config(cfg, run_dir / "config.yaml")
    items = {"params": params} if train is None else {"params": params, "train": train}
    save_checkpoint(run_dir / CHECKPOINT_DIR, items, cfg, cfg.num_updates if step is None else step)


def load_run_config(run_dir: str | Path):
    """The run folder's config, or UserInputError naming the folder or file."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UserInputError(f"run folder {str(run_dir)!r}: " + ("is not a folder" if run_dir.exists()
                                                                 else "not found"))
    if not (run_dir / "config.yaml").is_file():
        raise UserInputError(f"run folder {str(run_dir)!r}: no config.yaml (not a run folder written by "
                             f"python -m train)")
    return load_config(run_dir / "config.yaml")


def load_run(run_dir: str | Path):
    """-> (cfg, env, policy, params) of a saved run, verified; UserInputError/CheckpointError otherwise."""
    run_dir = Path(run_dir)
    cfg = load_run_config(run_dir)
    env = make_learner_env(cfg)
    policy = make_policy(cfg, env)
    template = param_shapes(cfg, env, policy)
    ckpt = run_dir / CHECKPOINT_DIR
    if ckpt.exists() or not (run_dir / LEGACY_CHECKPOINT).exists():
        meta = read_meta(ckpt)
        if "params" not in meta["items"]:
            raise CheckpointError(f"run folder {str(run_dir)!r}: training stopped at update {meta['step']} of "
                                  f"{cfg.num_updates}, no final params yet; continue with: python -m train --resume "
                                  f"{run_dir}")
        restored, meta = restore_checkpoint(ckpt, {"params": template})
        changed = config_changes(meta, cfg)
        if changed:
            raise CheckpointError(f"{str(run_dir / 'config.yaml')!r}: differs from the config the checkpoint was "
                                  f"trained with (keys: {', '.join(changed)})")
        return cfg, env, policy, restored["params"]
    legacy = run_dir / LEGACY_CHECKPOINT
    if not _digest_path(legacy).exists():
        raise CheckpointError(f"run folder {str(run_dir)!r}: {LEGACY_CHECKPOINT} predates verified checkpoints (no "
                              f"digest), so it cannot be verified: a damaged byte in it would load as a different "
                              f"weight. If you trust the file, convert it once into a verified {CHECKPOINT_DIR}/: "
                              f"python -m train.evaluate {run_dir} --convert-legacy")
    return cfg, env, policy, load_params(template, legacy)


def convert_legacy(run_dir: str | Path) -> Path:
    """A run folder's `checkpoint.msgpack` -> a verified `checkpoint/` beside it (the legacy file is kept).

    Its bytes are taken on the caller's word (nothing recorded them); what can be checked is: it reads into this
    run's network, with the network's structure and dtypes, and every value finite."""
    run_dir = Path(run_dir)
    cfg = load_run_config(run_dir)
    if (run_dir / CHECKPOINT_DIR).exists():
        raise CheckpointError(f"run folder {str(run_dir)!r}: already has {CHECKPOINT_DIR}/ (nothing to convert)")
    legacy = run_dir / LEGACY_CHECKPOINT
    if not legacy.is_file():
        raise CheckpointError(f"run folder {str(run_dir)!r}: no {LEGACY_CHECKPOINT} to convert")
    env = make_learner_env(cfg)
    params = load_params(param_shapes(cfg, env, make_policy(cfg, env)), legacy)
    save_checkpoint(run_dir / CHECKPOINT_DIR, {"params": params}, cfg, cfg.num_updates)
    return run_dir / CHECKPOINT_DIR

