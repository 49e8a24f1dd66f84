"""OpenEnv adapter: a scripted text agent plays a whole 100-step nexus-v0 episode through the
server's WebSocket client on loopback, with the same trajectory (rewards, parse and env error
codes, utilities, prompts) as the same actions given directly to env.step with play.py's key
schedule. The server is shut down at the end of the module."""
import numpy as np
import pytest

pytest.importorskip("openenv.core")
requests = pytest.importorskip("requests")

from nexus_jax.adapters._core import compiled  # noqa: E402
from nexus_jax.adapters.openenv import NexusAction, NexusClient, NexusEnvironment, serve  # noqa: E402
from nexus_jax.play import _feedback, play_keys  # noqa: E402
from nexus_jax.protocol import ParseError, parse, render  # noqa: E402

SEED = 11
STEPS = 100
SCRIPT = [
    "WORK E",
    "Let me think... I'll PROPOSE 2 10E 5C",
    "accept 1",
    "VAULT 3E",  # snapped to 2
    "hmm, no idea",  # UNKNOWN_COMMAND -> WAIT
    "propose 1 30 15",  # snapped to 20 for 10
    "SIGNAL 3 20E 10C",
    "UNVAULT 2E",
    "",  # EMPTY
    "PROPOSE 0 1E 1C",  # to myself: the env's SELF_TARGET
    "REJECT 2",
    "WORK: turn compute into energy",
    "ACCEPT 3",
]


@pytest.fixture(scope="module")
def server():
    srv = serve("nexus-v0", host="127.0.0.1", port=0)
    try:
        yield srv
    finally:
        srv.stop()
        assert not srv._thread.is_alive()


def test_schema_over_http(server):
    assert server.host == "127.0.0.1"
    r = requests.get(server.url + "/schema", timeout=30)
    r.raise_for_status()
    body = r.json()
    assert "message" in str(body["action"]) and "prompt" in str(body["observation"])


def test_100_step_episode_matches_env(server):
    replies = [SCRIPT[t % len(SCRIPT)] for t in range(STEPS)]
    got = []
    with NexusClient(base_url=server.url, message_timeout_s=120).sync() as client:
        first = client.reset(seed=SEED)
        assert first.observation.step == 0 and not first.done and "WAIT" in first.observation.prompt
        for reply in replies:
            res = client.step(NexusAction(message=reply))
            got.append(res)
            if res.done:
                break
        assert len(got) == STEPS and got[-1].done and got[-1].observation.truncated
        with pytest.raises(RuntimeError):  # stepping a finished episode is refused, not a crash
            client.step(NexusAction(message="WAIT"))
        st = client.state()
        assert st.step_count == STEPS and st.done and st.seed == SEED

    # the same actions straight into the JAX env (the env object the server's sessions share)
    env = compiled("nexus-v0").env
    params = env.default_params
    k_reset, keys = play_keys(SEED, STEPS)
    _, state = env.reset(k_reset, params)
    assert first.observation.prompt == render(state, 0, params)
    ret, prompts_equal = 0.0, 0
    for t, ((_, k_step), reply, res) in enumerate(zip(keys, replies, got)):
        pr = parse(reply, params=params)
        flat = np.int32(pr.flat(params.num_agents, params.num_levels))
        _, state, rew, dones, info = env.step(k_step, state, {"agent_0": flat}, params)  # params traced, as the server
        o = res.observation
        assert o.parse_error == pr.error.name and o.action == [int(x) for x in pr.action]
        # discrete outcomes exact; floats to float32 rounding (the server's jitted step is another XLA program
        # than env.step: no auto-reset, so its fusion, and the last bits of a sum, may differ)
        assert o.error_code == int(info["error_code"][0]), t
        assert res.reward == pytest.approx(float(rew["agent_0"]), rel=1e-5, abs=1e-5), t
        np.testing.assert_allclose(np.asarray(o.utility, np.float32), np.asarray(info["utility"]), rtol=1e-5, atol=1e-5)
        ret += res.reward
        assert bool(dones["__all__"]) == (t == STEPS - 1)
        if t < STEPS - 1:  # env.step auto-resets at the end; the server shows the terminal state
            assert o.step == t + 1
            prompts_equal += o.prompt == render(state, 0, params, feedback=_feedback(pr))
    assert prompts_equal >= STEPS // 2  # the prompt text (rounded amounts) is the same as render's of env.step's state
    assert got[-1].observation.episode_return == pytest.approx(ret, rel=1e-5)
    codes = [r.observation.error_code for r in got]
    perrs = {r.observation.parse_error for r in got}
    assert any(codes) and 0 in codes  # valid and invalid actions both happened
    assert {ParseError.OK.name, ParseError.UNKNOWN_COMMAND.name, ParseError.EMPTY.name} <= perrs
    assert "snapped" in got[3].observation.parse_message


def test_single_seat_only():
    with pytest.raises(ValueError, match="exactly one"):
        NexusEnvironment("nexus-selfplay-v0")
