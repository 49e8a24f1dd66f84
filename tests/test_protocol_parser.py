"""Text protocol parser: fuzzing (never raises), round trips, the seed's examples, snapping, errors."""
import string

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nexus_jax.envs.nexus.actions import action_table
from nexus_jax.envs.nexus.constants import ActionType as T
from nexus_jax.envs.nexus.params import NexusParams
from nexus_jax.protocol import (
    DEFAULT_AMOUNT_GRID,
    ParseError,
    canonical,
    format_action,
    parse,
    snap_amount,
)
from nexus_jax import protocol

FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GRID = DEFAULT_AMOUNT_GRID
LVL = {v: i for i, v in enumerate(GRID)}  # amount -> level index


def act(kind, target=0, a1=0, a2=0, res=0):
    return np.array([int(kind), target, a1, a2, res], np.int32)


def assert_parses(text, expected, **kw):
    r = parse(text, **kw)
    assert r.error == ParseError.OK, (text, r)
    assert r.action.dtype == np.int32 and r.action.shape == (5,)
    np.testing.assert_array_equal(r.action, expected, err_msg=f"{text!r}: {r.message}")


# ---- never raises --------------------------------------------------------------------------
def _check_result(r, num_agents=4, grid=GRID):
    assert isinstance(r.error, ParseError)
    assert r.error != ParseError.INTERNAL, r.message
    assert isinstance(r.message, str) and r.message
    assert r.action.dtype == np.int32 and r.action.shape == (5,)
    if r.ok:
        kind, target, a1, a2, res = (int(x) for x in r.action)
        assert 0 <= kind < len(T) and 0 <= target < num_agents
        assert 0 <= a1 < len(grid) and 0 <= a2 < len(grid) and res in (0, 1)
        np.testing.assert_array_equal(canonical(r.action), r.action)
        # whatever was read, its canonical text reads back to the same action
        np.testing.assert_array_equal(parse(format_action(r.action), num_agents, grid).action, r.action)
    else:
        np.testing.assert_array_equal(r.action, np.zeros(5, np.int32))


@FUZZ
@given(st.text())
def test_arbitrary_text_never_raises(text):
    _check_result(parse(text))


_WORDS = ["PROPOSE", "propose", "Accept", "REJECT", "wait", "WORK", "VAULT", "unvault", "SIGNAL",
          "PROPOSE_C", "work-e", "E", "c", "energy", "Compute", "en", "comp", "agent_", "offer_E=",
          "request_C=", "for", "target", "I think", "\n", ".", ",", ":", "-", "_", "=", " ", "(", "**"]


@FUZZ
@given(st.lists(st.one_of(st.sampled_from(_WORDS), st.from_regex(r"[0-9]{1,25}(\.[0-9]{1,3})?", fullmatch=True),
                          st.text(string.printable, max_size=3)), max_size=12),
       st.sampled_from([2, 4, 9]))
def test_command_like_text_never_raises(parts, n):
    _check_result(parse(" ".join(parts), num_agents=n), num_agents=n)
    _check_result(parse("".join(parts), num_agents=n), num_agents=n)


@pytest.mark.parametrize("obj", [None, b"PROPOSE 2 10 5", b"\xff\xfe", 12, 3.5, ["ACCEPT 1"], object()])
def test_non_strings_do_not_raise(obj):
    _check_result(parse(obj))


# ---- round trips -----------------------------------------------------------------------------
@pytest.mark.parametrize("n, grid", [(2, GRID), (4, GRID), (5, GRID), (3, (0.0, 0.5, 2.5, 3.0, 100.0))])
def test_every_flat_action_round_trips(n, grid):
    table = action_table(n, len(grid))
    canon = np.stack([canonical(row) for row in table])
    np.testing.assert_array_equal(canon, table)  # table rows are canonical already
    texts = [format_action(row, grid) for row in table]
    assert [format_action(i, grid, num_agents=n) for i in range(len(table))] == texts
    results = [parse(t, n, grid, snap=False) for t in texts]
    bad = [(t, r) for t, r in zip(texts, results) if not r.ok]
    assert not bad, bad[:3]
    np.testing.assert_array_equal(np.stack([r.action for r in results]), table)
    assert [r.flat(n, len(grid)) for r in results] == list(range(len(table)))  # = actions.encode's index


@FUZZ
@given(st.integers(0, len(action_table(4, 7)) - 1),
       st.sampled_from(["{}", "{}.", "Action: {}", "I think I'll {} now.", "**{}**", "`{}`",
                        "Sure!\n{}\nBecause trust matters.", "lower: {}", "{}\n\nReasoning: 3 agents, 50 energy"]),
       st.booleans())
def test_canonical_text_inside_prose_round_trips(idx, template, lower):
    row = action_table(4, 7)[idx]
    cmd = format_action(row)
    if template.startswith("lower"):
        cmd = cmd.lower()
    text = template.format(cmd.lower() if lower else cmd)
    assert_parses(text, row)


def test_format_ignores_unused_fields_and_marks_invalid():
    assert format_action(act(T.ACCEPT, 2, 5, 6, 1)) == "ACCEPT 2"
    assert format_action(act(T.WAIT, 3, 1, 1, 1)) == "WAIT"
    np.testing.assert_array_equal(canonical(act(T.VAULT, 3, 2, 6, 1)), act(T.VAULT, 0, 2, 0, 1))
    for bad in (act(9), act(-1), act(T.PROPOSE, 1, 7, 0), act(T.WORK, res=2)):
        text = format_action(bad)
        assert text.startswith("INVALID")
        assert parse(text).error == ParseError.UNKNOWN_COMMAND
    assert format_action(10**6).startswith("INVALID")


# ---- the seed's syntax and the documented forms ---------------------------------------------
E, C = 0, 1


@pytest.mark.parametrize("text, expected", [
    # seed: PROPOSE target_id offer_E request_C
    ("PROPOSE 2 10 5", act(T.PROPOSE, 2, LVL[10], LVL[5], E)),
    ("I think I'll ACCEPT 1.", act(T.ACCEPT, 1)),
    ("propose 3 10E, 20C", act(T.PROPOSE, 3, LVL[10], LVL[20], E)),
    ("PROPOSE target_id=2 offer_E=10 request_C=5", act(T.PROPOSE, 2, LVL[10], LVL[5], E)),
    ("PROPOSE agent_2 10 energy for 5 compute", act(T.PROPOSE, 2, LVL[10], LVL[5], E)),
    # the reverse direction: give Compute, want Energy
    ("PROPOSE 2 10C 5E", act(T.PROPOSE, 2, LVL[10], LVL[5], C)),
    ("PROPOSE 1 offer_C=20 request_E=10", act(T.PROPOSE, 1, LVL[20], LVL[10], C)),
    ("PROPOSE_C 2 10 5", act(T.PROPOSE, 2, LVL[10], LVL[5], C)),
    ("propose-c 2 10 5", act(T.PROPOSE, 2, LVL[10], LVL[5], C)),
    ("PROPOSE 2 10 5C", act(T.PROPOSE, 2, LVL[10], LVL[5], E)),  # want C -> give E
    ("PROPOSE 2 10 5E", act(T.PROPOSE, 2, LVL[10], LVL[5], C)),  # want E -> give C
    ("PROPOSE 2 C 10 5", act(T.PROPOSE, 2, LVL[10], LVL[5], C)),  # target never takes a tag
    ("PROPOSE 2 E:10 C:5", act(T.PROPOSE, 2, LVL[10], LVL[5], E)),
    ("PROPOSE 2 compute 10 energy 5", act(T.PROPOSE, 2, LVL[10], LVL[5], C)),
    ("Propose to agent 1: 10 units of compute for 5 energy.", act(T.PROPOSE, 1, LVL[10], LVL[5], C)),
    ("PROPOSE 2 10 5 (a fair trade, e.g. for both)", act(T.PROPOSE, 2, LVL[10], LVL[5], E)),
    ("PROPOSE 2 10 5\nEnergy is what I have most of.", act(T.PROPOSE, 2, LVL[10], LVL[5], E)),
    # ACCEPT / REJECT
    ("ACCEPT 3", act(T.ACCEPT, 3)),
    ("accept agent_2's offer", act(T.ACCEPT, 2)),
    ("REJECT 1!", act(T.REJECT, 1)),
    ("reject #3, too low", act(T.REJECT, 3)),
    ("ACCEPT\n2", act(T.ACCEPT, 2)),  # arguments may follow on the next line when the first has none
    # WAIT
    ("WAIT", act(T.WAIT)),
    ("wait.", act(T.WAIT)),
    ("I'll WAIT this turn; agent 2 has 40 E", act(T.WAIT)),
    # WORK offer_E | offer_C
    ("WORK offer_E", act(T.WORK, res=E)),
    ("WORK offer_C", act(T.WORK, res=C)),
    ("WORK E", act(T.WORK, res=E)),
    ("work c", act(T.WORK, res=C)),
    ("WORK_C", act(T.WORK, res=C)),
    ("WORK: turn compute into energy", act(T.WORK, res=C)),
    ("WORK", act(T.WORK, res=E)),  # no resource named: Energy
    # VAULT / UNVAULT
    ("VAULT E 10", act(T.VAULT, 0, LVL[10], 0, E)),
    ("VAULT 10 E", act(T.VAULT, 0, LVL[10], 0, E)),
    ("vault 10C", act(T.VAULT, 0, LVL[10], 0, C)),
    ("VAULT offer_C 20", act(T.VAULT, 0, LVL[20], 0, C)),
    ("VAULT_C 5", act(T.VAULT, 0, LVL[5], 0, C)),
    ("VAULT 40 compute", act(T.VAULT, 0, LVL[40], 0, C)),
    ("VAULT 2", act(T.VAULT, 0, LVL[2], 0, E)),
    ("UNVAULT 5c", act(T.UNVAULT, 0, LVL[5], 0, C)),
    ("UNVAULT energy: 20", act(T.UNVAULT, 0, LVL[20], 0, E)),
    # SIGNAL target_id signal_offer_E signal_request_C
    ("SIGNAL 1 20 10", act(T.SIGNAL, 1, LVL[20], LVL[10], E)),
    ("SIGNAL 3 20C 10E", act(T.SIGNAL, 3, LVL[20], LVL[10], C)),
    ("signal_c 0 1 2", act(T.SIGNAL, 0, LVL[1], LVL[2], C)),
    # keyword choice: the first ALL-CAPS keyword wins, else the first keyword
    ("let me wait and think... ACCEPT 2", act(T.ACCEPT, 2)),
    ("I accept nothing. Action: REJECT 1", act(T.REJECT, 1)),
    ("accept 1 then propose 2 10 5", act(T.ACCEPT, 1)),
    ("ACCEPT 1 PROPOSE 2 10 5", act(T.ACCEPT, 1)),
    # words that merely contain a keyword are not keywords
    ("I proposed earlier, the waiting is over. WORK C", act(T.WORK, res=C)),
])
def test_seed_and_documented_forms(text, expected):
    assert_parses(text, expected)


def test_arguments_stop_at_the_next_keyword():
    r = parse("PROPOSE 2 10 ACCEPT 1")  # PROPOSE is missing its want; ACCEPT's 1 is not borrowed
    assert r.error == ParseError.MISSING_ARGUMENT


# ---- snapping ------------------------------------------------------------------------------
@pytest.mark.parametrize("value, level_value", [
    (0, 0), (1, 1), (3, 2), (3.5, 2), (3.6, 5), (4, 5), (7.5, 5), (8, 10), (15, 10), (16, 20), (30, 20), (31, 40),
    (40, 40), (41, 40), (1000, 40), (0.4, 0), (0.5, 0), (0.6, 1), (1.5, 1), (2.0, 2),
])
def test_snap_nearest_ties_down(value, level_value):
    assert GRID[snap_amount(value)] == level_value


def test_snapped_amounts_are_reported():
    r = parse("PROPOSE 2 30 15")
    assert r.ok
    np.testing.assert_array_equal(r.action, act(T.PROPOSE, 2, LVL[20], LVL[10], E))
    assert "snapped" in r.message and "30" in r.message
    assert parse("PROPOSE 2 10.0 5").message == "PROPOSE 2 10E 5C"  # on the grid: no note


def test_snap_false_rejects_off_grid():
    r = parse("VAULT 7 E", snap=False)
    assert r.error == ParseError.AMOUNT_OFF_GRID and "7" in r.message
    assert parse("VAULT 10 E", snap=False).ok


def test_digits_are_greedy_and_signs_ignored():
    assert_parses("PROPOSE 2 10E, 5C.", act(T.PROPOSE, 2, LVL[10], LVL[5], E))
    assert_parses("PROPOSE 2 -10 +5", act(T.PROPOSE, 2, LVL[10], LVL[5], E))
    assert_parses("PROPOSE 2 10x 5units", act(T.PROPOSE, 2, LVL[10], LVL[5], E))
    assert_parses("VAULT 12.7E", act(T.VAULT, 0, LVL[10], 0, E))


# ---- errors --------------------------------------------------------------------------------
@pytest.mark.parametrize("text, error", [
    ("", ParseError.EMPTY),
    ("   \n\t", ParseError.EMPTY),
    (None, ParseError.EMPTY),
    ("hello there", ParseError.UNKNOWN_COMMAND),
    ("10 E 5 C", ParseError.UNKNOWN_COMMAND),
    ("PROPOSAL 2 10 5", ParseError.UNKNOWN_COMMAND),
    ("ACCEPT", ParseError.MISSING_ARGUMENT),
    ("REJECT the offer", ParseError.MISSING_ARGUMENT),
    ("PROPOSE 2 10", ParseError.MISSING_ARGUMENT),
    ("SIGNAL", ParseError.MISSING_ARGUMENT),
    ("VAULT E", ParseError.MISSING_ARGUMENT),
    ("UNVAULT", ParseError.MISSING_ARGUMENT),
    ("ACCEPT 4", ParseError.TARGET_OUT_OF_RANGE),
    ("ACCEPT 1.5", ParseError.TARGET_OUT_OF_RANGE),
    ("PROPOSE 17 10 5", ParseError.TARGET_OUT_OF_RANGE),
    ("PROPOSE 2 1234567890123456789 5", ParseError.BAD_NUMBER),
])
def test_error_codes(text, error):
    r = parse(text)
    assert r.error == error, r
    np.testing.assert_array_equal(r.action, np.zeros(5, np.int32))
    assert r.message


def test_num_agents_and_grid_from_params():
    p = NexusParams.create(num_agents=8, amount_grid=(0.0, 3.0, 6.0))
    assert parse("ACCEPT 7").error == ParseError.TARGET_OUT_OF_RANGE
    assert_parses("ACCEPT 7", act(T.ACCEPT, 7), params=p)
    assert_parses("PROPOSE 5 5 2", act(T.PROPOSE, 5, 2, 1, E), params=p)
    assert_parses("ACCEPT 7", act(T.ACCEPT, 7), num_agents=8)


def test_alias_and_exports():
    assert protocol.format is format_action
    assert protocol.format(act(T.WORK, res=C)) == "WORK C"
