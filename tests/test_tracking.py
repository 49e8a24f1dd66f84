"""Experiment tracking: one host callback per update (none when off), per-run routing, and what TensorBoard and
wandb (offline) hold afterwards, read back with their own readers and compared with the run's metrics.jsonl."""
import json
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from train import __main__ as train_cli
from train.config import ConfigError, load_config, load_pipeline_config
from train.loggers import EVALUATION, Logger
from train.ppo import make_runs
from train.resume import sweep_keys
from train.tracking import DeviceFeed, drain, ppo_runs

TINY = ["name=tiny", "hidden_size=8", "num_layers=1", "num_envs=2", "num_steps=4", "total_timesteps=32",
        "num_minibatches=1", "update_epochs=1", "env.max_steps=4", "eval_episodes=2", "progress=false",
        "num_seeds=2", "lrs=[0.001,0.01]"]  # 4 updates x (2 lrs x 2 seeds)
CALLBACK = re.compile(r"custom_call @xla\w*python\w*callback")


class Recorder(Logger):
    """A logger that keeps what it is given (the routing test's double)."""

    def __init__(self, fail_on=None):
        self.scalars, self.fail_on = [], fail_on

    def log_scalars(self, run, step, values):
        if run == self.fail_on:
            raise OSError("disk full")
        self.scalars.append((run, step, dict(values)))


def callbacks(cfg, feed) -> int:
    return len(CALLBACK.findall(make_runs(cfg, None, feed=feed).lower(*sweep_keys(cfg)).as_text()))


@pytest.mark.slow
def test_logger_none_traces_nothing_and_a_logger_adds_one_callback_for_every_run():
    """Off: the program has no host callback at all (progress off too). On: one callback per update carries
    all 2 x 2 runs (the custom_vmap re-emits under each vmap instead of looping over the runs)."""
    cfg = load_config(overrides=TINY + ["checkpoint_every=0"])
    assert callbacks(cfg, None) == 0
    feed = DeviceFeed(Recorder(), ppo_runs(cfg)[0], 8)
    assert callbacks(cfg, feed) == 1
    drain(feed)


def test_the_feed_routes_each_run_and_step():
    """vmap(vmap(scan)) over 2 x 3 runs: each run's values reach its own name at (update + 1) * steps; one
    unvmapped run works too; a failing logger stops the writing and close() raises, training unharmed."""
    names = np.array([[f"r{i}{j}" for j in range(3)] for i in range(2)], dtype=object)
    rec = Recorder()
    feed = DeviceFeed(rec, names, steps_per_update=10)

    def train(a, b):
        def body(c, i):
            c = c + a * b
            feed.emit(i, {"x": c, "y": c * 2})
            return c, c
        return jax.lax.scan(body, 0.0, jnp.arange(4))[1]

    out = jax.jit(jax.vmap(jax.vmap(train, (0, None)), (None, 0)))(jnp.arange(3.0), jnp.array([1.0, 10.0]))
    drain(feed)
    assert len(rec.scalars) == 4 * 6
    got = {(run, step): v for run, step, v in rec.scalars}
    for i, j, u in np.ndindex(2, 3, 4):
        v = got[(f"r{i}{j}", (u + 1) * 10)]
        assert v == {"x": pytest.approx(float(out[i, j, u])), "y": pytest.approx(2 * float(out[i, j, u]))}

    single, failing = Recorder(), Recorder(fail_on="solo")
    for logger in (single, failing):
        feed = DeviceFeed(logger, np.array("solo", dtype=object), 1)

        def count(c, i, feed=feed):
            feed.emit(i, {"x": c})
            return c + 1.0, c

        jax.jit(lambda c0: jax.lax.scan(count, c0, jnp.arange(3)))(1.0)
        if logger is single:
            drain(feed)
        else:
            with pytest.raises(RuntimeError, match="disk full"):
                drain(feed)
    assert [(s, v["x"]) for _, s, v in single.scalars] == [(1, 1.0), (2, 2.0), (3, 3.0)]
    assert failing.scalars == []


@pytest.mark.parametrize("overrides, words", [
    (["logger=tb"], "'logger': must be one of"), (["logger=wandb", "wandb_mode=cloud"], "'wandb_mode'"),
])
def test_bad_logger_keys_are_named(overrides, words):
    with pytest.raises(ConfigError, match=words):
        load_config(overrides=TINY + overrides)


def test_a_missing_extra_is_one_error_naming_it(monkeypatch):
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(ConfigError, match=r"pip install 'nexus-jax\[wandb\]'"):
        load_config(overrides=TINY + ["logger=wandb"])
    with pytest.raises(ConfigError, match=r"'logger'.*nexus-jax\[wandb\]"):
        load_pipeline_config(overrides=["logger=wandb"])
    with pytest.raises(ConfigError, match="ppo.logger"):
        load_pipeline_config(overrides=["ppo.logger=tensorboard"])


def metrics_by_run(run_dir) -> dict:
    """metrics.jsonl -> {run name: {metric: [(env steps, value) per update]}} (lists are lr-major: the (L, S) order)."""
    cfg = load_config(overrides=TINY)
    names = ppo_runs(cfg)[0].reshape(-1)
    rows = [json.loads(line) for line in open(run_dir / "metrics.jsonl")]
    keys = [k for k in rows[0] if k not in ("update", "env_steps")]
    return {name: {k: [(r["env_steps"], r[k][i]) for r in rows] for k in keys} for i, name in enumerate(names)}


@pytest.fixture(scope="module")
def tb_run(tmp_path_factory):
    """python -m train with logger=tensorboard, trained in chunks (checkpoint_every auto: 4 chunks)."""
    root = tmp_path_factory.mktemp("tb")
    assert train_cli.main(TINY + [f"run_dir={root}", "logger=tensorboard"]) == 0
    return root / "tiny"


def read_tb(folder) -> EventAccumulator:
    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0, "images": 0})
    acc.Reload()
    return acc


@pytest.mark.slow
def test_tensorboard_holds_every_runs_metrics_as_metrics_jsonl(tb_run):
    expected = metrics_by_run(tb_run)
    assert sorted(p.name for p in (tb_run / "tensorboard").iterdir()) == sorted([*expected, EVALUATION])
    for name, series in expected.items():
        acc = read_tb(tb_run / "tensorboard" / name)
        assert sorted(acc.Tags()["scalars"]) == sorted(series)
        for key, points in series.items():
            got = [(e.step, e.value) for e in acc.Scalars(key)]
            assert [s for s, _ in got] == [s for s, _ in points] == [8, 16, 24, 32]
            np.testing.assert_allclose([v for _, v in got], [v for _, v in points], rtol=1e-5, atol=1e-5)
        config = acc.Tensors("config")[0].tensor_proto.string_val[0].decode()
        assert f"lr: {float(name.split(',')[0][3:])}" in config and "seed_index: " + name[-1] in config


@pytest.mark.slow
def test_tensorboard_evaluation_run_has_the_table_and_the_plots(tb_run):
    acc = read_tb(tb_run / "tensorboard" / EVALUATION)
    table = acc.Tensors("evaluation")[0].tensor_proto.string_val[0].decode()
    assert table.splitlines()[0] == "policy | mean_return | ci95 | invalid_rate"
    trained = json.loads((tb_run / "eval.json").read_text())["eval"]["trained"]
    assert table.splitlines()[2].startswith(f"trained | {trained['mean']:.4g} | ")
    assert sorted(acc.Tags()["images"]) == ["eval_episode", "learning_curve"]
    png = acc.Images("learning_curve")[0]
    assert png.encoded_image_string == (tb_run / "learning_curve.png").read_bytes() and png.width > 0
    for name in ("eval.json", "replay.html"):  # TensorBoard holds no files: their paths, as text
        assert name in acc.Tensors(name.split(".")[0])[0].tensor_proto.string_val[0].decode()


def wandb_records(run_dir) -> dict:
    """Every offline run, read with wandb's own reader (`wandb leet inspect --json`): {name: (folder, [record])}."""
    out = {}
    for path in sorted((run_dir / "wandb").glob("offline-run-*/run-*.wandb")):
        text = subprocess.run([sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(path)], check=True,
                              capture_output=True, text=True, timeout=300).stdout
        records = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
        run = next(r["run"] for r in records if r["type"] == "run")
        out[run["display_name"]] = (path.parent, records)
    return out


@pytest.mark.slow
def test_wandb_offline_runs_hold_every_runs_metrics_as_metrics_jsonl(tmp_path, monkeypatch):
    """One program (checkpoint_every=0); wandb offline: one run per lr x seed in the group `name`, plus evaluation
    with the table (its file) and the outputs as artifacts."""
    monkeypatch.setenv("WANDB_DATA_DIR", str(tmp_path / "wandb-data"))  # artifact staging, not ~/.local
    monkeypatch.setenv("WANDB_CACHE_DIR", str(tmp_path / "wandb-cache"))
    assert train_cli.main(TINY + [f"run_dir={tmp_path}", "logger=wandb", "wandb_mode=offline",
                                  "checkpoint_every=0"]) == 0
    run_dir = tmp_path / "tiny"
    expected = metrics_by_run(run_dir)
    runs = wandb_records(run_dir)
    assert sorted(runs) == sorted([*expected, EVALUATION])
    for name, (_, recs) in runs.items():
        run = next(r["run"] for r in recs if r["type"] == "run")
        assert run["run_group"] == "tiny" and run["project"] == "nexus_jax"
        if name == EVALUATION:
            continue
        assert run["config"]["update"]["lr"] == pytest.approx(float(name.split(",")[0][3:]))
        history = [r["history"]["item"] for r in recs if r["type"] == "history"]
        assert [h["_step"] for h in history] == [8, 16, 24, 32]
        for key, points in expected[name].items():
            np.testing.assert_allclose([h[key] for h in history], [v for _, v in points], rtol=1e-5, atol=1e-5)
    folder, recs = runs[EVALUATION]
    (table_file,) = (folder / "files" / "media" / "table").glob("evaluation_*.table.json")
    table = json.loads(table_file.read_text())
    trained = json.loads((run_dir / "eval.json").read_text())["eval"]["trained"]
    assert table["columns"] == ["policy", "mean_return", "ci95", "invalid_rate"]
    assert table["data"][0][:2] == ["trained", pytest.approx(trained["mean"])]
    artifacts = {r["artifact"]["name"]: r["artifact"] for r in recs if r["type"] == "artifact"}
    for name, file in (("learning_curve", "learning_curve.png"), ("eval_episode", "eval_episode.png"),
                       ("eval", "eval.json"), ("replay", "replay.html")):
        assert [c["path"] for c in artifacts[f"tiny-{name}"]["manifest"]["contents"]] == [file]


@pytest.mark.slow
def test_a_sweep_emits_one_callback_per_update_for_every_cell_and_seed():
    """train.sweep: the feed sits under the (cells, seeds) vmaps and still stages one callback; the run names
    follow the grid's y-major cell order."""
    from train import sweep as S

    cfg = load_config(S.SWEEP_CONFIG, ["num_envs=2", "num_steps=10", "total_timesteps=20", "hidden_size=8",
                                       "num_layers=1", "num_minibatches=1", "update_epochs=1", "env.max_steps=10"])
    x, y = ("p_grid_failure", (0.05, 0.25)), ("vault_delay", (1, 6))
    base, grid = S.grid_params(cfg, x, y)
    names, configs = S.grid_runs(cfg, x, y, seeds=2)
    assert names.shape == (4, 2) and names[1, 0] == "vault_delay=1,p_grid_failure=0.25,seed=0"
    assert configs[names[2, 1]]["env"]["vault_delay"] == 6 and configs[names[2, 1]]["seed_index"] == 1
    feed = DeviceFeed(Recorder(), names, cfg.num_envs * cfg.num_steps)
    rngs = jax.random.split(jax.random.PRNGKey(0), 2)
    assert len(CALLBACK.findall(S.make_sweep(cfg, base, 2, feed=feed).lower(rngs, grid).as_text())) == 1
    drain(feed)


PIPELINE_TINY = ["name=pl", "env.max_steps=4", "hidden_size=8", "num_layers=1", "eval_episodes=2", "bc.num_envs=2",
                 "bc.num_steps=4", "bc.epochs=3", "bc.num_minibatches=1", "grpo.group_size=2", "grpo.num_groups=2",
                 "grpo.num_updates=3", "grpo.update_epochs=1", "grpo.num_minibatches=1", "ppo.num_envs=2",
                 "ppo.num_steps=4", "ppo.update_epochs=1", "ppo.num_minibatches=1"]


@pytest.mark.slow
def test_pipeline_stages_are_runs_holding_their_metrics_files(tmp_path):
    """train.pipeline with logger=tensorboard: runs BC (per epoch), GRPO and PPO (per update, from the device)
    equal metrics_{bc,grpo,ppo}.jsonl; the evaluation run holds the stage table and the plot."""
    from train import pipeline

    assert pipeline.main(PIPELINE_TINY + [f"run_dir={tmp_path}", "logger=tensorboard"]) == 0
    out = tmp_path / "pl"
    steps = {"BC": [1, 2, 3], "GRPO": [16, 32, 48], "PPO": [8 * u for u in range(1, 7)]}  # epochs; env steps
    for run, expected_steps in steps.items():
        acc = read_tb(out / "tensorboard" / run)
        rows = [json.loads(line) for line in open(out / f"metrics_{run.lower()}.jsonl")]
        assert sorted(acc.Tags()["scalars"]) == sorted(rows[0])
        for key in rows[0]:
            got = acc.Scalars(key)
            assert [e.step for e in got] == expected_steps
            np.testing.assert_allclose([e.value for e in got], [r[key] for r in rows], rtol=1e-5, atol=1e-5)
    acc = read_tb(out / "tensorboard" / EVALUATION)
    table = acc.Tensors("pipeline")[0].tensor_proto.string_val[0].decode().splitlines()
    assert [line.split(" | ")[0] for line in table[2:]] == ["random", "BC", "GRPO", "PPO"]
    assert acc.Tags()["images"] == ["pipeline"]
