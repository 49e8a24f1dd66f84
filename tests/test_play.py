"""The play loop: a scripted text agent's episode equals the same actions given to the JAX env directly."""
import jax
import numpy as np
import pytest

import nexus_jax
from nexus_jax.envs.nexus.actions import action_table
from nexus_jax.envs.nexus.constants import ActionType as T
from nexus_jax.play import external_seats, main, play, play_keys, random_valid_others, script_policy, wait_others
from nexus_jax.protocol import ParseError, format_action


@pytest.fixture(scope="module")
def env():
    # Seat 0 (the text agent) and seat 2 (other_policy) external, NPCs on 1 and 3. One env
    # object: every test here shares its compiled step.
    return nexus_jax.make("nexus-v0", learner_seats=(0, 2), action_format="structured", info_mode="full")


def _script(n_steps, seed=0):
    """(replies, intended structured actions) for seat 0: canonical text in prose, sloppy forms, garbage."""
    rng = np.random.default_rng(seed)
    table = action_table(4, 7)
    templates = ["{}", "I think I'll {}.", "Action: {}", "{}\nBecause trust matters.", "**{}**"]
    handwritten = [
        ("propose 3 10E, 5C", np.array([T.PROPOSE, 3, 4, 3, 0], np.int32)),
        ("PROPOSE 2 30 15", np.array([T.PROPOSE, 2, 5, 4, 0], np.int32)),  # snapped to 20, 10
        ("accept agent_1's offer", np.array([T.ACCEPT, 1, 0, 0, 0], np.int32)),
        ("WORK offer_C", np.array([T.WORK, 0, 0, 0, 1], np.int32)),
        ("vault 5 energy", np.array([T.VAULT, 0, 3, 0, 0], np.int32)),
        ("no idea what to do", np.zeros(5, np.int32)),  # parse error -> WAIT
        ("ACCEPT 9", np.zeros(5, np.int32)),  # target out of range -> WAIT
    ]
    replies, intended = [], []
    for t in range(n_steps):
        if t % 3 == 0:
            text, act = handwritten[(t // 3) % len(handwritten)]
        else:
            act = table[rng.integers(len(table))]
            text = templates[rng.integers(len(templates))].format(format_action(act))
        replies.append(text)
        intended.append(act)
    return replies, np.stack(intended)


def test_scripted_text_agent_matches_direct_env(env):
    seed, steps = 7, 100
    replies, intended = _script(steps)
    result = play(script_policy(replies), env=env, seed=seed, other_policy=random_valid_others, record_states=True)
    assert result.steps == 100 and result.done  # max_steps: a full episode
    assert sum(e != ParseError.OK for e in result.parse_errors) == sum(
        1 for r in replies if r in ("no idea what to do", "ACCEPT 9"))
    assert result.seats == external_seats(env) and 2 in result.seats
    np.testing.assert_array_equal(result.actions[:, 0], intended)

    # the same actions, given directly to the JAX env with the same keys
    k_reset, keys = play_keys(seed, steps)
    _, state = env.reset(k_reset)
    for t, (k_others, k_step) in enumerate(keys):
        jax.tree.map(np.testing.assert_array_equal, result.states[t], state)  # bitwise, every step
        actions = random_valid_others(k_others, state, env)
        actions[0] = intended[t]
        np.testing.assert_array_equal(result.actions[t], actions)
        _, state, reward, dones, info = env.step(k_step, state, {a: actions[i] for i, a in enumerate(env.agents)})
        np.testing.assert_array_equal(result.rewards[t], np.array([reward[a] for a in env.agents]))
        np.testing.assert_array_equal(result.env_errors[t], np.asarray(info["error_code"]))
        np.testing.assert_array_equal(result.utility[t], np.asarray(info["utility"]))
        assert bool(dones["__all__"]) == (t == steps - 1)
    jax.tree.map(np.testing.assert_array_equal, result.final_state, state)
    # the seat tried invalid things too, and saw it: env errors and parse errors reach the next prompt
    bad_env = [t for t in range(steps - 1) if result.env_errors[t, 0] != 0]
    assert bad_env and all("Your last action was INVALID" in result.prompts[t + 1] for t in bad_env)
    bad_parse = [t for t in range(steps - 1) if result.parse_errors[t] != ParseError.OK]
    assert bad_parse and all("could not be read" in result.prompts[t + 1] for t in bad_parse)


def test_callable_policy_feedback_and_flat_other_policy(env):
    seen = []

    def llm(prompt):  # any policy(text) -> text works; here one that learns from the feedback
        seen.append(prompt)
        return "uh" if len(seen) == 1 else "WAIT"

    flat_wait = lambda key, state, e: np.zeros(e.num_agents, np.int32)  # noqa: E731  (flat indices)
    r = play(llm, env=env, steps=3, other_policy=flat_wait, include_help=False)
    assert r.steps == 3 and not r.done
    assert "could not be read (UNKNOWN_COMMAND" in seen[1] and "read as WAIT" in seen[2]
    assert (r.actions == 0).all() and r.parse_error_rate == pytest.approx(1 / 3)


def test_other_seats_and_script_end(env):
    r = play(script_policy(["WORK E", "WAIT"]), env=env, seat=2, other_policy=wait_others)
    assert r.steps == 2 and not r.done and r.seat == 2
    row = r.seats.index(2)
    np.testing.assert_array_equal(r.actions[0, row], [T.WORK, 0, 0, 0, 0])
    r.actions[0, row] = 0
    assert (r.actions == 0).all()  # everyone else WAITed
    assert r.env_errors.shape == (2, 4)  # every seat's error code, NPCs included
    npc_seats = [i for i in range(4) if i not in r.seats]
    for npc_or_missing in npc_seats + [4]:
        with pytest.raises(ValueError):
            play(script_policy([]), env=env, seat=npc_or_missing)


def test_cli_script(env, tmp_path, capsys):
    script = tmp_path / "moves.txt"
    script.write_text("# my moves\nPROPOSE 2 10 5\n\nblah\nWORK C\n")
    assert main(["--script", str(script), "--seed", "3", "--steps", "5", "--quiet", "--others", "wait"], env=env) == 0
    out = capsys.readouterr().out
    assert "played 3 step(s)" in out and "parse errors 1" in out
    assert main(["--script", str(script), "--seat", "4"], env=env) == 2  # no such seat
    assert "error: --seat 4: not an external seat" in capsys.readouterr().err


def test_cli_terminal_human(env, monkeypatch, capsys):
    replies = iter(["propose 2 10E 5C", "I ACCEPT 3"])

    def fake_input(prompt=""):
        try:
            return next(replies)
        except StopIteration:
            raise EOFError from None  # Ctrl-D ends the game

    monkeypatch.setattr("builtins.input", fake_input)
    assert main(["--seed", "1"], env=env) == 0
    out = capsys.readouterr().out
    assert "you are agent 0 (LEARNER)" in out and "read as PROPOSE 2 10E 5C" in out
    assert "played 2 step(s)" in out
