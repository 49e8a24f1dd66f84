"""Checkpoints with flax.serialization (msgpack): params plus the run's config.yaml beside them."""
from __future__ import annotations

from pathlib import Path

import jax
from flax import serialization

from train.config import load_config, save_config

CHECKPOINT = "checkpoint.msgpack"


def save_params(params, path: str | Path) -> None:
    Path(path).write_bytes(serialization.to_bytes(jax.device_get(params)))


def load_params(template, path: str | Path):
    """Restore params into the structure (and dtypes) of `template`."""
    return serialization.from_bytes(template, Path(path).read_bytes())


def param_template(cfg, env, policy):
    """Freshly initialised params of the right structure (the restore target)."""
    from train.ppo import env_reset

    obs, state = env_reset(env, jax.random.PRNGKey(0), 1)
    masks = jax.vmap(env.masks)(state)
    return policy.init(jax.random.PRNGKey(0), obs, masks)


def save_run(run_dir: str | Path, cfg, params) -> None:
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    save_config(cfg, run_dir / "config.yaml")
    save_params(params, run_dir / CHECKPOINT)


def load_run(run_dir: str | Path):
    """-> (cfg, env, policy, params) of a saved run."""
    from train.networks import ActorCritic
    from train.ppo import make_env

    run_dir = Path(run_dir)
    cfg = load_config(run_dir / "config.yaml")
    env = make_env(cfg)
    policy = ActorCritic.from_config(cfg, env)
    params = load_params(param_template(cfg, env, policy), run_dir / CHECKPOINT)
    return cfg, env, policy, params
