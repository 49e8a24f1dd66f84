"""Process-wide test settings for tests/ and experiments/ (XLA's fast-compile flags, a persistent compile cache) and
the one fixture both use: `run_writer`, a saved run folder written without training."""
import json
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Tests are compile-bound: XLA's fast-compile CPU options (nexus_jax/xla_flags.py) cost run time that
# small test shapes do not feel. Benchmarks and users keep XLA's defaults.
from nexus_jax.xla_flags import FAST_COMPILE, add  # noqa: E402  (imports no JAX backend)

add(FAST_COMPILE)

import jax  # noqa: E402

# Compilation dominates the suite's time. A persistent cache lets identical programs built by
# different tests (or a re-run) compile once; it holds nothing but XLA executables.
jax.config.update("jax_compilation_cache_dir", os.environ.get("NEXUS_JAX_TEST_CACHE", "/tmp/nexus_jax_xla_cache"))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
import numpy as np  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(scope="session")
def run_writer():
    """`write_run`, for module-scoped fixtures that need a saved run folder."""
    return write_run


def write_run(run, overrides: list, spread: float, invalid: list, episode_steps: int | None = 4):
    """A saved run folder as `python -m train` writes one, without training: config, params of 2 seeds
    (the template scaled by 1 + spread * seed), 3 snapshot slots each, and a metrics.jsonl. -> (cfg, env).
    `episode_steps`: the env's `max_steps` (None: the env's own length, for an env without that field)."""
    from train.checkpoint import param_template, save_run
    from train.config import load_config
    from train.models import make_policy
    from train.ppo import make_env
    from train.snapshots import save_policies

    short = [f"env.max_steps={episode_steps}"] if episode_steps else []
    cfg = load_config(overrides=overrides + ["num_envs=2", "num_steps=4", "total_timesteps=16", "num_minibatches=1",
                                             "num_seeds=2", "snapshot_every=1", *short])
    env = make_env(cfg)
    p = param_template(cfg, env, make_policy(cfg, env))
    save_run(run, cfg, p)
    stack = lambda k: jax.tree.map(lambda x: np.stack([x * (1 + spread * i) for i in range(k)]), p)  # noqa: E731
    params = jax.tree.map(lambda x: x[None], stack(2))  # (L=1, S=2, ...)
    snaps = jax.tree.map(lambda x: np.stack([x, x])[None], stack(3))  # (1, 2, 3 slots, ...)
    save_policies(run, cfg, {"params": params, "snapshots": snaps}, 0)
    with open(run / "metrics.jsonl", "w") as f:
        for u in range(cfg.num_updates):
            f.write(json.dumps({"update": u, "env_steps": (u + 1) * 8, "episode_return": [-3.0 + u, -2.5 + u],
                                "invalid_rate": invalid}) + "\n")
    return cfg, env


@pytest.fixture(scope="session")
def selfplay_run(tmp_path_factory, run_writer):
    """A nexus-selfplay-v0 run folder (3 seats, every one a learner, entity network): 2 seeds, 3 snapshots."""
    run = tmp_path_factory.mktemp("runs") / "selfplay"
    _, env = run_writer(run, ["name=selfplay", "env_id=nexus-selfplay-v0", "env.num_agents=3", "network=entity",
                              "hidden_size=8"], spread=0.5, invalid=[0.0, 0.0])
    assert env.num_learners == 3
    return run


def pytest_terminal_summary(terminalreporter):
    """Print the verdicts tests record with `record_property("verdict", ...)` (e.g. tests/test_xla_check.py's
    reading of the installed jax), also from xdist workers: a measurement of the machine, not a pass/fail."""
    lines = [f"{r.nodeid}: {value}" for reports in terminalreporter.stats.values() for r in reports
             if getattr(r, "when", None) == "call" for key, value in r.user_properties if key == "verdict"]
    if lines:
        terminalreporter.section("verdicts")
        for line in lines:
            terminalreporter.write_line(line)
