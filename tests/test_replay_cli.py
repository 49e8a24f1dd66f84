"""`python -m train.replay`: a saved run's policy in its seat or another, a policy without a run, bad input.

The run folder is written without training (conftest's `run_writer`: initial params, 4-step
episodes); bad input is checked before anything compiles. `python -m train` calls the same
`make_act` and `write_replay` for its replay.html.
"""
import json
import re

import pytest

import nexus_jax
from train import replay


def _data(path):
    return json.loads(re.search(r'id="replay-data">(.*?)</script>', path.read_text(), re.S).group(1))


@pytest.fixture(scope="module")
def run(tmp_path_factory, run_writer):
    root = tmp_path_factory.mktemp("runs") / "tiny"
    run_writer(root, ["name=tiny", "hidden_size=8", "num_layers=1"], 0.0, [0.0, 0.0])
    return root


def test_replay_of_a_run_writes_its_replay_html(run, capsys):
    assert replay.main([str(run)]) == 0
    assert str(run / "replay.html") in capsys.readouterr().out
    data = _data(run / "replay.html")
    assert data["kind"] == "nexus" and data["title"] == "tiny (trained) in seat(s) 0 vs NPCs in seat(s) 1, 2, 3"
    (ep,) = data["episodes"]
    assert len(ep["frames"]) == 4 + 1 and ep["seats"] == [0]
    assert all(f["actions"][0]["seat"] == 0 for f in ep["frames"][1:])


@pytest.mark.slow
def test_replay_puts_the_trained_policy_in_another_seat(run, tmp_path):
    out = tmp_path / "seat2.html"
    assert replay.main([str(run), "--seat", "2", "--episodes", "2", "--out", str(out)]) == 0
    data = _data(out)
    assert len(data["episodes"]) == 2 and data["episodes"][0]["seats"] == [2]
    assert "in seat(s) 2 vs NPCs in seat(s) 0, 1, 3" in data["title"]
    assert all(len(f["actions"]) == 1 and f["actions"][0]["seat"] == 2 for f in data["episodes"][1]["frames"][1:])


VALID = {"OK", "NONE"}  # the error name of a valid action in the nexus and crisis viewers' frames


def acted_validly(episode) -> bool:
    """Every acting seat's action in every step of a page's episode was valid (the seat's error after it)."""
    return all(f["seats"][a["seat"]]["error"] in VALID for f in episode["frames"][1:] for a in f["actions"])


@pytest.mark.parametrize("argv", [[], ["--env", "crisis-v0"]], ids=["default-env", "crisis-v0"])
def test_replay_without_a_run_plays_the_npc_heuristic(argv, tmp_path):
    """`--policy npc` on the default env (an NPC archetype in the learner seat: structured rows, though the env's
    own format is flat) and on crisis-v0 (its reference scheduler in every seat)."""
    out = tmp_path / "npc.html"
    assert replay.main(["--policy", "npc", "--out", str(out), *argv]) == 0
    (ep,) = _data(out)["episodes"]
    env = nexus_jax.make(argv[1] if argv else "nexus-v0")
    assert len(ep["frames"]) == int(env.default_params.max_steps) + 1  # the whole episode, nothing cut
    assert len(ep["seats"]) == len(env.agents) and acted_validly(ep)
    assert len({a["text"] for f in ep["frames"][1:] for a in f["actions"]}) > 3  # it plays, not one fixed move


@pytest.mark.parametrize("argv, needle", [
    ([], "RUN_DIR"),
    (["--policy", "trained"], "needs a RUN_DIR"),
    (["--policy", "random", "--env", "no-such-v0"], "no-such-v0"),
    (["--policy", "npc", "--archetype", "nobody"], "--archetype"),
    (["--policy", "random", "--seat", "9"], "0..3"),
    (["--policy", "random", "--env", "crisis-v0", "--seat", "1"], "every seat"),
    (["--policy", "dance"], "dance"),
    (["--policy", "edf"], "edf"),  # a crisis-v0 heuristic, not one of nexus-v0's: the message lists those
    (["--policy", "random", "--env", "crisis-v0", "--action-format", "compact"], "--action-format"),
    (["--policy", "npc", "--env", "nexus-selfplay-v0", "--archetype", "learner"], "--archetype"),
    (["--policy", "random", "--out", "/no/such/folder/replay.html"], "/no/such/folder"),
])
def test_replay_bad_input_is_one_line_and_exit_2(argv, needle, capsys):
    assert replay.main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1


def test_replay_of_a_missing_run_folder_names_it(tmp_path, capsys):
    assert replay.main([str(tmp_path / "nothing")]) == 2
    assert "nothing" in capsys.readouterr().err
