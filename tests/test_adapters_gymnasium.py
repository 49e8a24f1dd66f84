"""Gymnasium adapter: gymnasium's own env_checker, masks, registration, terminal observation.
nexus-v0's default config: the same compiled env as the OpenEnv test's (compiled once per process)."""
import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")
from gymnasium.utils.env_checker import check_env  # noqa: E402

from nexus_jax.adapters.gymnasium import GYM_ID, NexusGymEnv  # noqa: E402

MAX_STEPS = 100  # nexus-v0's max_steps; a step costs ~1 ms once compiled


@pytest.fixture(scope="module")
def genv():
    return NexusGymEnv("nexus-v0")


def test_check_env(genv):
    check_env(genv, skip_render_check=True)


def test_masks_and_episode(genv):
    obs, info = genv.reset(seed=0)
    assert obs.dtype == np.float32 and genv.observation_space.contains(obs)
    m = genv.action_masks()
    assert m.dtype == bool and m.shape == (genv.action_space.n,) and m[0]
    np.testing.assert_array_equal(info["action_mask"], m.astype(np.int8))
    rng = np.random.default_rng(0)
    ret = 0.0
    for t in range(MAX_STEPS):
        a = int(rng.choice(np.flatnonzero(genv.action_masks())))
        obs, r, term, trunc, info = genv.step(a)
        ret += r
        assert info["error_code"] == 0 and isinstance(r, float)
        if term or trunc:
            break
    assert t == MAX_STEPS - 1 or term
    assert int(genv.state_jax.step) == t + 1  # terminal observation kept, no auto-reset
    with pytest.raises(RuntimeError):
        genv.step(0)
    # an invalid action never crashes: it counts as WAIT with an error code
    genv.reset(seed=1)
    bad = int(np.flatnonzero(~genv.action_masks())[0])
    _, _, _, _, info = genv.step(bad)
    assert info["error_code"] != 0 and info["invalid"]


def test_seeded_resets_repeat(genv):
    o1, _ = genv.reset(seed=5)
    s1 = genv.step(0)
    o2, _ = genv.reset(seed=5)
    s2 = genv.step(0)
    np.testing.assert_array_equal(o1, o2)
    np.testing.assert_array_equal(s1[0], s2[0])
    assert s1[1] == s2[1]


def test_registered_and_single_seat():
    assert GYM_ID in gymnasium.registry
    env = gymnasium.make(GYM_ID)  # the same cached compile as the fixture
    assert isinstance(env.unwrapped, NexusGymEnv)
    obs, _ = env.reset(seed=0)
    assert obs.shape == env.observation_space.shape
    with pytest.raises(ValueError, match="exactly one"):
        NexusGymEnv("nexus-selfplay-v0")
