"""`python -m train.replay` over the grid a user can ask for: every policy (trained, random, npc, each heuristic the
env names) on one env of each family and every action format the env declares.

A family is a distinct set of capabilities (text protocol, action formats, NPC seats or every seat the caller's),
read from the registry, so a new id with new capabilities joins the grid by itself and no id is special. The quick tier
runs `--policy npc` on the default env and crisis-v0 and the bad input (tests/test_replay_cli.py); this is the
rest: about thirty replays of whole episodes.
"""
import dataclasses
import functools
import json
import re
import tempfile
from pathlib import Path

import pytest

import nexus_jax
from train import replay

pytestmark = pytest.mark.slow  # tens of compiles of whole episodes: the full tier


def _data(path):
    return json.loads(re.search(r'id="replay-data">(.*?)</script>', path.read_text(), re.S).group(1))


def families() -> list[str]:
    """One registered id of each distinct (text protocol, action formats, whether the caller drives every seat):
    the one with the fewest seats (the cheapest to compile), then the first by name."""
    pick = {}
    for env_id in nexus_jax.registered_envs():
        env = nexus_jax.make(env_id)
        n = int(env.default_params.num_agents)
        family = (env.spec.text_protocol, env.spec.action_formats, len(env.agents) == n)
        pick[family] = min(pick.get(family, (10**9, env_id)), (n, env_id))
    return sorted(env_id for _, env_id in pick.values())


FAMILIES = families()
VALID = {"OK", "NONE"}  # the error name of a valid action in the nexus and crisis viewers' frames


def grid():
    """(env id, policy, action format) for every format of every family: random and npc in each format, each
    named heuristic once in the env's default format (a heuristic's episode is the same in every format: checked
    for npc below)."""
    cells = []
    for env_id in FAMILIES:
        spec = nexus_jax.make(env_id).spec
        cells += [(env_id, p, fmt) for fmt in spec.action_formats for p in ("random", "npc")]
        cells += [(env_id, name, spec.action_formats[0]) for name in sorted(spec.heuristics)]
    return cells


def test_the_grid_covers_npcs_and_self_play_and_every_format():
    envs = [nexus_jax.make(i) for i in FAMILIES]
    assert {len(e.agents) < int(e.default_params.num_agents) for e in envs if e.spec.npc_seats} == {True, False}
    assert {f for e in envs for f in e.spec.action_formats} == {"flat", "compact", "structured"}


@functools.lru_cache(maxsize=None)
def page(env_id: str, policy: str, fmt: str) -> dict:
    """The page data `python -m train.replay --env ENV --policy P --action-format F` writes (one episode)."""
    out = Path(tempfile.mkdtemp(prefix="replay-grid-")) / "replay.html"
    assert replay.main(["--env", env_id, "--policy", policy, "--action-format", fmt, "--out", str(out)]) == 0
    return _data(out)


@pytest.mark.parametrize("env_id, policy, fmt", grid(), ids=lambda x: str(x))
def test_every_policy_plays_every_format(env_id, policy, fmt):
    data = page(env_id, policy, fmt)
    (ep,) = data["episodes"]
    env = nexus_jax.make(env_id)
    assert data["title"].startswith(f"{env_id} ({policy})") and ep["seats"] == replay.viz.acting_seats(env)
    assert len(ep["frames"]) >= 2
    valid = [f["seats"][a["seat"]]["error"] in VALID for f in ep["frames"][1:] for a in f["actions"]]
    # a heuristic never errs; random draws each head from its own mask, so a structured row can (WAIT + penalty)
    assert all(valid) if policy != "random" else sum(valid) > len(valid) / 2


@pytest.mark.parametrize("env_id", [i for i in FAMILIES if len(nexus_jax.make(i).spec.action_formats) > 1])
def test_a_heuristic_plays_the_same_episode_in_every_format(env_id):
    """The heuristic acts in the env's own layout (`spec.heuristic_format`), so `--action-format` changes
    nothing of its episode: the frames are equal, action texts included."""
    formats = nexus_jax.make(env_id).spec.action_formats
    first, *rest = [page(env_id, "npc", fmt)["episodes"][0]["frames"] for fmt in formats]
    assert all(frames == first for frames in rest)


def run_cells():
    """(env id, action format) of a saved run for every format of every family: a factored head acts in
    structured rows, a flat head in flat or compact indices."""
    return [(env_id, fmt) for env_id in FAMILIES for fmt in nexus_jax.make(env_id).spec.action_formats]


@pytest.mark.parametrize("env_id, fmt", run_cells(), ids=lambda x: str(x))
def test_a_run_replays_its_policy_and_a_heuristic_in_its_format(env_id, fmt, tmp_path, run_writer):
    """A run folder (written without training; 4-step episodes where the env has `max_steps`) in each format: its trained policy, and
    `--policy npc` on the same run (the env remade in the heuristics' format where the run's is another)."""
    head = ["action_head=factored"] if fmt == "structured" else ["action_head=flat"]
    fmt_key = [] if fmt == nexus_jax.make(env_id).spec.action_formats[0] else [f"env.action_format={fmt}"]
    run = tmp_path / "run"
    params = nexus_jax.make(env_id).default_params
    short = "max_steps" in {f.name for f in dataclasses.fields(params)}  # else the env's own length (crisis: 48)
    run_writer(run, ["name=grid", f"env_id={env_id}", "hidden_size=8", "num_layers=1", *head, *fmt_key], 0.0,
               [0.0, 0.0], 4 if short else None)
    steps = 4 if short else int(params.max_steps)
    for policy in ("trained", "npc"):
        out = tmp_path / f"{policy}.html"
        assert replay.main([str(run), "--policy", policy, "--out", str(out)]) == 0
        (ep,) = _data(out)["episodes"]
        assert len(ep["frames"]) == steps + 1 and all(a["text"] for f in ep["frames"][1:] for a in f["actions"])
