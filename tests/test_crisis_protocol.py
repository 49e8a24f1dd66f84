"""crisis-v0's text seat: the JSON action parser (never raises, error codes, round trip), the prompt, and a
scripted text agent playing a whole episode through `nexus_jax.play` with the same trajectory as env.step."""
import json

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from nexus_jax.envs.crisis import Error, avail_actions
from nexus_jax.play import edf_others, main, make_env, play, play_keys, script_policy
from nexus_jax.protocol.crisis import (INVALID_FLAT, CrisisParseError as E, format_action, parse, render,
                                       seat_demands, task_names)

LOADER = ["load_raw_batch_1", "load_raw_batch_2", "load_raw_batch_3", "urgent_hotfix_batch"]


@pytest.fixture(scope="module")
def env():
    return make_env(env_id="crisis-v0")  # default tasks and crises, every seat external, full info


def test_format_then_parse_is_the_identity_on_every_index():
    for names in (None, LOADER):
        for a in range(12):
            text = format_action(a, 4, names)
            res = parse(text, 4, names)
            assert res.ok and res.flat == a, (a, text, res)
            assert json.loads(text)["action_type"] in ("wait", "release_resource", "request_resource")
    assert format_action(12, 4) == "INVALID(flat index 12)" and parse(format_action(12, 4)).error == E.NO_JSON


DEMAND = np.array([[2, 4, 0], [2, 4, 0], [2, 4, 0], [4, 8, 1]], np.float64)
CASES = [
    ('{"action_type": "request_resource", "task_id": "load_raw_batch_2", "negotiation": "yield"}', E.OK, 7),
    ('Sure! ```json\n{"action": "REQUEST", "task": 0, "cpu": 2, "memory": 4, "gpu": 0}\n```', E.OK, 4),
    ('{"action_type": "request_resource", "task_id": "slot_3", "yield": false}', E.OK, 10),
    ('{"action_type": "request_resource", "task_id": "TASK 1", "yield": true}', E.OK, 7),
    ('{"action_type": "release_resource", "reasoning": "free the GPU"}', E.OK, 2),
    ('{"note": 1} then {"action_type": "wait", "negotiation": "yield"}', E.OK, 1),
    (None, E.EMPTY, None), ("   ", E.EMPTY, None), ("x" * 20000, E.TOO_LONG, None),
    ("wait", E.NO_JSON, None), ('{"action_type": "wait"', E.BAD_JSON, None), ('{"task_id": 1}', E.MISSING_ACTION_TYPE, None),
    ('{"action_type": "grab"}', E.UNKNOWN_ACTION_TYPE, None), ('{"action_type": 3}', E.UNKNOWN_ACTION_TYPE, None),
    ('{"action_type": "request_resource"}', E.MISSING_TASK, None),
    ('{"action_type": "request_resource", "task_id": "clean_batch_1"}', E.UNKNOWN_TASK, None),
    ('{"action_type": "request_resource", "task_id": 4}', E.UNKNOWN_TASK, None),
    ('{"action_type": "request_resource", "task_id": 1.0}', E.UNKNOWN_TASK, None),
    ('{"action_type": "request_resource", "task_id": true}', E.UNKNOWN_TASK, None),
    ('{"action_type": "wait", "negotiation": "maybe"}', E.BAD_NEGOTIATION, None),
    ('{"action_type": "wait", "yield": "yes"}', E.BAD_NEGOTIATION, None),
    ('{"action_type": "wait", "yield": true, "negotiation": "hold"}', E.BAD_NEGOTIATION, None),
    ('{"action_type": "request_resource", "task_id": 0, "cpu": -1}', E.BAD_AMOUNT, None),
    ('{"action_type": "request_resource", "task_id": 0, "gpu": NaN}', E.BAD_AMOUNT, None),
    ('{"action_type": "request_resource", "task_id": 0, "cpu": 3}', E.DEMAND_MISMATCH, None),
    ('{"action_type": "request_resource", "task_id": 3, "gpu": 0}', E.DEMAND_MISMATCH, None),
    ("[" * 5000 + "{", E.BAD_JSON, None),
]


@pytest.mark.parametrize("text,error,flat", CASES)
def test_parse_cases(text, error, flat):
    res = parse(text, 4, LOADER, DEMAND)
    assert res.error == error, res
    assert res.flat == (flat if error == E.OK else INVALID_FLAT) and res.message


def test_parse_says_what_it_assumed_or_ignored():
    res = parse('{"action_type": "wait", "task_id": 2, "mood": "calm"}', 4, LOADER)
    assert res.ok and "task_id ignored" in res.message and "no negotiation given: hold" in res.message
    assert "mood" in res.message


_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 6), st.floats(allow_nan=True), st.text(max_size=12),
                    st.sampled_from(["wait", "release_resource", "request_resource", "request", "hold", "yield",
                                     "load_raw_batch_1", "slot_2", "task_9", "REQUEST"]))
_KEYS = st.sampled_from(["action_type", "action", "task_id", "task", "slot", "negotiation", "yield", "cpu", "memory",
                         "gpu", "reasoning", "Action_Type", "x"])
_OBJECTS = st.recursive(st.dictionaries(_KEYS, _VALUES, max_size=6),
                        lambda inner: st.dictionaries(_KEYS, st.one_of(_VALUES, inner, st.lists(inner, max_size=2)),
                                                      max_size=4), max_leaves=12)


def _check(res):
    assert isinstance(res.error, E) and res.error != E.INTERNAL, res
    assert res.ok == (res.flat != INVALID_FLAT) and (res.ok or res.flat == INVALID_FLAT)
    if res.ok:
        assert 0 <= res.flat < 12 and parse(format_action(res.flat, 4, LOADER), 4, LOADER).flat == res.flat


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=300), st.binary(max_size=100), st.integers(), st.none()))
def test_parse_never_raises_on_any_text(text):
    _check(parse(text, 4, LOADER, DEMAND))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_OBJECTS, st.text(max_size=20), st.text(max_size=20), st.booleans())
def test_parse_never_raises_on_json_like_replies(obj, before, after, break_it):
    text = before + json.dumps(obj, allow_nan=True) + after
    if break_it:
        text = text[:-1 - len(after)] + after  # drop the closing brace
    _check(parse(text, 4, LOADER, DEMAND))


def test_render_lists_tasks_and_valid_actions_that_parse(env):
    p = env.default_params
    _, s = env.reset(jax.random.PRNGKey(0))
    names = task_names(p)
    assert names[0] == LOADER and names[2][:3] == ["train_baseline_model", "train_advanced_model", "validate_models"]
    for seat in range(3):
        text = render(s, seat, p, feedback="read as WAIT")
        assert "Your last reply: read as WAIT" in text and "Valid actions now" in text
        assert all(n in text for n in names[seat][:3])
        valid = text.split("Valid actions now")[1].split("\n")[0].split(": ", 1)[1].split(" | ")
        mask = np.asarray(avail_actions(s, p))[seat]
        flats = [parse(v, 4, names[seat], seat_demands(s, seat)).flat for v in valid]
        assert flats == [a for a in range(12) if mask[a] and a % 2 == 0]
    assert "load_raw_batch_1: ready" in render(s, 0, p) and "clean_batch_1: waiting for dependencies" in render(s, 1, p)


def _replies(n):
    """Seat 0's replies: canonical and sloppy JSON, unreadable text, invalid requests, releases."""
    cycle = [
        '{"action_type": "request_resource", "task_id": "load_raw_batch_1", "negotiation": "hold"}',
        "I'll wait for now.",  # NO_JSON: an invalid action
        '```json\n{"action": "request", "task": "load_raw_batch_2", "cpu": 2, "memory": 4, "gpu": 0}\n```',
        '{"action_type": "release_resource"}',
        '{"action_type": "request_resource", "task_id": "urgent_hotfix_batch", "yield": true}',  # not released yet
        '{"action_type": "request_resource", "task_id": 2, "cpu": 9}',  # DEMAND_MISMATCH
        '{"action_type": "wait"}',
        '{"action_type": "request_resource", "task_id": "slot_2"}',
    ]
    return [cycle[t % len(cycle)] for t in range(n)]


def test_scripted_text_agent_plays_a_crisis_episode_like_env_step(env):
    seed, steps = 5, 48
    replies = _replies(steps)
    result = play(script_policy(replies), env=env, seat=0, seed=seed, other_policy=edf_others, record_states=True)
    assert result.steps == steps and result.done and result.actions.shape == (steps, 3, 1)
    p = env.default_params
    names = task_names(p)[0]
    k_reset, keys = play_keys(seed, steps)
    _, state = env.reset(k_reset)
    n_invalid = 0
    for t, (k_others, k_step) in enumerate(keys):
        jax.tree.map(np.testing.assert_array_equal, result.states[t], state)
        flat = parse(replies[t], 4, names, seat_demands(state, 0)).flat
        actions = edf_others(k_others, state, env)[:, 0]
        actions[0] = flat
        np.testing.assert_array_equal(result.actions[t, :, 0], actions)
        _, state, reward, dones, info = env.step(k_step, state, {a: actions[i] for i, a in enumerate(env.agents)})
        np.testing.assert_array_equal(result.rewards[t], np.array([reward[a] for a in env.agents]))
        np.testing.assert_array_equal(result.env_errors[t], np.asarray(info["error_code"]))
        n_invalid += int(np.asarray(info["invalid"])[0])
        if flat == INVALID_FLAT:  # unreadable text is an invalid action, with the env's error code
            assert result.env_errors[t, 0] == Error.OUT_OF_RANGE and bool(np.asarray(info["invalid"])[0])
        assert bool(dones["__all__"]) == (t == steps - 1)
    assert n_invalid == int((result.env_errors[:, 0] != 0).sum()) > 0
    n_parse = sum(e != E.OK for e in result.parse_errors)
    assert n_parse == 12 and (result.env_errors[:, 0] == Error.OUT_OF_RANGE).sum() == n_parse
    assert (result.env_errors[:, 0] == Error.TASK_NOT_READY).sum() > 0  # the urgent task before its crisis
    bad = [t for t in range(steps - 1) if result.parse_errors[t] != E.OK]
    assert all("could not be read" in result.prompts[t + 1] and "invalid" in result.prompts[t + 1] for t in bad)
    assert result.utility[-1, 0] > 0 and result.utility[-1, 2] > 0  # seat completion rates of the terminal step


def test_play_cli_on_crisis(env, tmp_path, capsys):
    script = tmp_path / "moves.txt"
    script.write_text("\n".join(" ".join(r.splitlines()) for r in _replies(6)) + "\n")  # one reply per line
    assert main(["--env", "crisis-v0", "--script", str(script), "--quiet"], env=env) == 0
    out = capsys.readouterr().out
    assert "played 6 step(s)" in out and "parse errors 2" in out
    assert main(["--env", "crisis-v0", "--others", "npc", "--script", str(script)], env=env) == 2  # no NPCs
    assert "crisis-v0 has no NPCs" in capsys.readouterr().err
