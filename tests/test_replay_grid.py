"""`python -m train.replay` over the grid a user can ask for: every policy (trained, random, npc, each heuristic the
env names) on one env of each family and every action format the env declares.

A family is a distinct set of capabilities (`env.spec`: text protocol, NPC seats, action formats), read from
the registry, so a new id with new capabilities joins the grid by itself and no id is special. The quick tier
runs `--policy npc` on the default env and crisis-v0 and the bad input (tests/test_replay_cli.py); this is the
rest: about thirty replays of whole episodes.
"""
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
    """The first registered id of each distinct (text protocol, NPC seats, action formats)."""
    first = {}
    for env_id in nexus_jax.registered_envs():
        spec = nexus_jax.make(env_id).spec
        first.setdefault((spec.text_protocol, spec.npc_seats, spec.action_formats), env_id)
    return sorted(first.values())


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


def test_the_grid_covers_npc_seats_and_none_and_every_format():
    specs = [nexus_jax.make(i).spec for i in FAMILIES]
    assert {s.npc_seats for s in specs} == {True, False}
    assert {f for s in specs for f in s.action_formats} == {"flat", "compact", "structured"}


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
    assert all(f["seats"][a["seat"]]["error"] in VALID for f in ep["frames"][1:] for a in f["actions"])


@pytest.mark.parametrize("env_id", [i for i in FAMILIES if len(nexus_jax.make(i).spec.action_formats) > 1])
def test_a_heuristic_plays_the_same_episode_in_every_format(env_id):
    """The heuristic acts in the env's own layout (`spec.heuristic_format`), so `--action-format` changes
    nothing of its episode: the frames are equal, action texts included."""
    formats = nexus_jax.make(env_id).spec.action_formats
    first, *rest = [page(env_id, "npc", fmt)["episodes"][0]["frames"] for fmt in formats]
    assert all(frames == first for frames in rest)
