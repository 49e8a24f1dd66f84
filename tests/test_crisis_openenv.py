"""OpenEnv adapter on crisis-v0: a scripted text agent plays a whole 48-step episode in the seed's JSON
actions through the server's WebSocket client, with the trajectory of the same replies fed by hand to the
jitted reset/step the server uses, with play.py's key schedule and EDF on the other seats: rewards, parse
errors, env error codes, utilities and prompts.

The reference is the jitted step, not `nexus_jax.play` (which steps eagerly): under jit XLA turns
`minutes / 60` into `minutes x (1/60)`, so the hour of step 30 is 5.0000005 there and 5.0 eagerly, and
an urgent deadline set from it can break a priority tie the other way a few steps later."""
import pytest

pytest.importorskip("openenv.core")

from nexus_jax.adapters._core import compiled  # noqa: E402
from nexus_jax.adapters.openenv import NexusAction, NexusClient, NexusEnvironment, serve  # noqa: E402
from nexus_jax.envs.crisis import Error  # noqa: E402
from nexus_jax.play import _feedback, edf_others, play_keys  # noqa: E402
from nexus_jax.protocol.crisis import INVALID_FLAT, CrisisParseError, parse, render, seat_demands, task_names  # noqa: E402

SEED, STEPS, SEAT = 4, 48, 1
SCRIPT = [
    '{"action_type": "request_resource", "task_id": "clean_batch_1"}',
    "let me think",  # NO_JSON: an invalid action
    '{"action_type": "request_resource", "task_id": "clean_batch_2", "negotiation": "yield", "reasoning": "x"}',
    '{"action_type": "release_resource"}',
    '{"action_type": "wait"}',
    '{"action": "request", "task": 2, "cpu": 4, "memory": 6, "gpu": 0}',
]


@pytest.fixture(scope="module")
def server():
    srv = serve("crisis-v0", seat=SEAT)
    try:
        yield srv
    finally:
        srv.stop()


def test_crisis_episode_over_openenv_matches_play(server):
    replies = [SCRIPT[t % len(SCRIPT)] for t in range(STEPS)]
    got = []
    with NexusClient(base_url=server.url, message_timeout_s=120).sync() as client:
        first = client.reset(seed=SEED)
        assert first.observation.seat == SEAT and "clean_batch_1" in first.observation.prompt
        assert '"action_type"' in first.observation.prompt  # the valid actions, as JSON
        for reply in replies:
            got.append(client.step(NexusAction(message=reply)))
            if got[-1].done:
                break
    assert len(got) == STEPS and got[-1].done and got[-1].observation.truncated

    c = compiled("crisis-v0")  # the env and jitted functions the server's sessions share
    p, names = c.params, task_names(c.params)[SEAT]
    k_reset, keys = play_keys(SEED, STEPS)
    _, state, _ = c.reset(k_reset, p)
    assert first.observation.prompt == render(state, SEAT, p)
    ret = 0.0
    for t, ((k_others, k_step), reply, res) in enumerate(zip(keys, replies, got)):
        pr = parse(reply, 4, names, seat_demands(state, SEAT))
        actions = edf_others(k_others, state, c.env)[:, 0]
        actions[SEAT] = pr.flat
        _, state, rew, done, trunc, info, _ = c.step(k_step, state, actions, p)
        o = res.observation
        assert o.parse_error == pr.error.name and o.action == [pr.flat] == [o.flat_action], t
        assert o.error_code == int(info["error_code"][SEAT]), t
        if pr.flat == INVALID_FLAT:  # unreadable text: an invalid action
            assert o.error_code == Error.OUT_OF_RANGE and bool(info["invalid"][SEAT])
        assert res.reward == float(rew[SEAT]) and o.utility == [float(x) for x in info["seat_completion_rate"]], t
        assert o.prompt == render(state, SEAT, p, feedback=_feedback(pr, "an invalid action (WAIT, with the "
                                                                      "invalid-action penalty)")), t
        assert bool(done) == (t == STEPS - 1)
        ret += float(rew[SEAT])
    errs = [r.observation.error_code for r in got]
    assert errs.count(Error.OUT_OF_RANGE) == sum(r == SCRIPT[1] for r in replies) and 0 in errs
    assert {r.observation.parse_error for r in got} == {CrisisParseError.OK.name, CrisisParseError.NO_JSON.name}
    assert got[-1].observation.episode_return == pytest.approx(ret, rel=1e-6)


def test_crisis_environment_checks_its_arguments():
    with pytest.raises(ValueError, match="seat 7"):
        NexusEnvironment("crisis-v0", seat=7)
    with pytest.raises(ValueError, match="others must be one of"):
        NexusEnvironment("crisis-v0", others="npc")
    with pytest.raises(ValueError, match="has NPC seats"):
        NexusEnvironment("nexus-v0", others="edf")
