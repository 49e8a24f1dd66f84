"""Self-play snapshots: parameters kept every k updates inside the jitted training scan, saved per seed.

`scan_with_snapshots` is the only piece that runs inside `make_train` (train/ppo.py calls it
when `snapshot_every > 0`); the rest is host-side bookkeeping for `python -m train`
(`save_policies`: every seed's final params and its snapshots) and for the evaluation suite
(`load_policies`). Slot 0 holds the freshly initialised params (update 0), slot s the params
after s x k updates.

Run-folder layout written by `save_policies`:
  seeds/seed_<s>.msgpack                  final params of seed s (at the kept learning rate)
  snapshots/seed<s>_update<u:05d>.msgpack params of seed s after u updates (u = 0, k, 2k, ...)
  snapshots/index.json                    [{"seed", "update", "env_steps", "path"}, ...]
"""
from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp

from nexus_jax.cli import one_line
from train.checkpoint import CheckpointError, load_params, save_params


def resolve_every(snapshot_every: int, num_updates: int) -> int:
    """-1 (auto): about 5 snapshots evenly spaced; 0: none; k: every k updates (capped at num_updates)."""
    if snapshot_every < 0:
        return max(1, num_updates // 5)
    return min(snapshot_every, num_updates)


def snapshot_updates(num_updates: int, every: int) -> list[int]:
    """Update counts of the snapshot slots: [0, k, 2k, ...] (empty when every == 0)."""
    if every <= 0:
        return []
    return [s * every for s in range(num_updates // every + 1)]


def snapshot_buffer(params, num_updates: int, every: int):
    """The (1 + num_updates // every)-slot params buffer, slot 0 holding `params` (the initialisation)."""
    n_slots = num_updates // every + 1
    return jax.tree.map(lambda x: jnp.zeros((n_slots,) + x.shape, x.dtype).at[0].set(x), params)


def scan_into_snapshots(body, runner, snaps, indices, every: int, params_of):
    """`lax.scan(body, runner, indices)` that writes the params after update u into slot u / every
    whenever u is a multiple of `every` -> ((runner, snaps), metrics). `indices` are global update
    indices, so a run trained in chunks fills the same slots as one scan. `body(runner, i, snaps)` sees
    the slots filled so far (the pool of past partners, train/past_partners.py)."""

    def step(carry, i):
        r, s = carry
        r, m = body(r, i, s)
        done = i + 1
        slot = jnp.where(done % every == 0, done // every, 0)  # slot 0 is rewritten with itself otherwise
        s = jax.tree.map(lambda buf, p: buf.at[slot].set(jnp.where(slot > 0, p, buf[0])), s, params_of(r))
        return (r, s), m

    return jax.lax.scan(step, (runner, snaps), indices)


def scan_with_snapshots(body, runner, num_updates: int, every: int, params_of):
    """`lax.scan(body, runner, arange(num_updates))` that also returns params every `every` updates.

    -> (runner, metrics, snapshots) where snapshots is the params pytree with a leading
    axis of len(snapshot_updates(num_updates, every)).
    """
    snaps = snapshot_buffer(params_of(runner), num_updates, every)
    (runner, snaps), metrics = scan_into_snapshots(body, runner, snaps, jnp.arange(num_updates), every, params_of)
    return runner, metrics, snaps


def save_policies(run_dir, cfg, out: dict, lr_index: int) -> dict:
    """Write every seed's final params and snapshots (sweep outputs are (L, S, ...)); -> the index."""

    run_dir = Path(run_dir)
    steps_per_update = cfg.num_envs * cfg.num_steps
    (run_dir / "seeds").mkdir(parents=True, exist_ok=True)
    for s in range(cfg.num_seeds):
        save_params(jax.tree.map(lambda x: x[lr_index, s], out["params"]), run_dir / "seeds" / f"seed_{s}.msgpack")
    index = []
    if "snapshots" in out:
        every = resolve_every(cfg.snapshot_every, cfg.num_updates)
        (run_dir / "snapshots").mkdir(exist_ok=True)
        for s in range(cfg.num_seeds):
            for slot, u in enumerate(snapshot_updates(cfg.num_updates, every)):
                path = f"snapshots/seed{s}_update{u:05d}.msgpack"
                save_params(jax.tree.map(lambda x: x[lr_index, s, slot], out["snapshots"]), run_dir / path)
                index.append({"seed": s, "update": u, "env_steps": u * steps_per_update, "path": path})
        (run_dir / "snapshots" / "index.json").write_text(json.dumps(index, indent=1))
    return {"seeds": cfg.num_seeds, "snapshots": index}


def load_policies(run_dir, template) -> dict:
    """-> {"seeds": [params per seed], "snapshots": [(seed, update, env_steps, params)]} (empty if absent)."""
    run_dir = Path(run_dir)
    seeds = [load_params(template, p) for p in sorted((run_dir / "seeds").glob("seed_*.msgpack"),
                                                       key=lambda p: int(p.stem.split("_")[1]))]
    snaps = []
    idx = run_dir / "snapshots" / "index.json"
    if idx.exists():
        try:
            entries = json.loads(idx.read_text())
            entries = [(int(e["seed"]), int(e["update"]), int(e["env_steps"]), str(e["path"])) for e in entries]
        except (ValueError, TypeError, KeyError, UnicodeDecodeError) as e:
            raise CheckpointError(f"snapshot index {str(idx)!r}: damaged ({one_line(e)})") from None
        for seed, update, env_steps, path in entries:
            snaps.append((seed, update, env_steps, load_params(template, run_dir / path)))
    return {"seeds": seeds, "snapshots": snaps}
