"""PettingZoo adapter: pettingzoo's own parallel_api_test, masks in infos, terminal observation, same
trajectory as env.step with play.py's key schedule. One env config per module (compiled once)."""
import numpy as np
import pytest

pytest.importorskip("pettingzoo")
from pettingzoo.test import parallel_api_test  # noqa: E402

import jax  # noqa: E402

from nexus_jax.adapters.pettingzoo import NexusParallelEnv  # noqa: E402
from nexus_jax.play import play_keys  # noqa: E402

MAX_STEPS = 12  # traced: the same executable as any other max_steps


@pytest.fixture(scope="module")
def penv():
    return NexusParallelEnv("nexus-selfplay-v0", max_steps=MAX_STEPS)


def test_importing_nexus_jax_does_not_import_adapters():
    import subprocess
    import sys

    code = "import sys, nexus_jax; sys.exit(any(m.startswith(('nexus_jax.adapters', 'pettingzoo', 'gymnasium', 'openenv')) for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0


def test_parallel_api_test(penv):
    parallel_api_test(penv, num_cycles=3 * MAX_STEPS)


def test_masks_spaces_and_episode_end(penv):
    obs, infos = penv.reset(seed=3)
    assert penv.agents == penv.possible_agents == ["agent_0", "agent_1", "agent_2", "agent_3"]
    for a in penv.agents:
        assert obs[a].dtype == np.float32 and penv.observation_space(a).contains(obs[a])
        m = infos[a]["action_mask"]
        assert m.dtype == np.int8 and m.shape == (penv.action_space(a).n,) and m[0] == 1  # WAIT is always valid
    rng = np.random.default_rng(0)
    for t in range(MAX_STEPS):
        acts = {a: int(rng.choice(np.flatnonzero(infos[a]["action_mask"]))) for a in penv.agents}
        obs, rew, term, trunc, infos = penv.step(acts)
        assert all(infos[a]["error_code"] == 0 for a in infos)  # masked actions are valid
        if any(term.values()) or any(trunc.values()):
            break
    assert penv.agents == []
    assert t == MAX_STEPS - 1 or any(term.values())
    if t == MAX_STEPS - 1:
        assert all(trunc.values()) and not any(term.values())
    # the terminal observation, not the next episode's first one
    assert int(penv.state_jax.step) == t + 1
    with pytest.raises(RuntimeError):
        penv.step({})


def test_same_trajectory_as_env_step(penv):
    env = penv.jax_env
    params = env.default_params
    steps = 6
    k_reset, keys = play_keys(7, steps)
    _, state = env.reset(k_reset, params)
    obs, infos = penv.reset(seed=7)
    rng = np.random.default_rng(1)
    for k_others, k_step in keys:
        acts = {a: np.int32(rng.choice(np.flatnonzero(infos[a]["action_mask"]))) for a in penv.agents}
        obs, rew, term, trunc, infos = penv.step(acts)
        o2, state, r2, d2, info2 = env.step(k_step, state, acts, params)
        for a in env.agents:
            np.testing.assert_allclose(obs[a], np.asarray(o2[a]), rtol=1e-5, atol=1e-5)  # another XLA program:
            assert rew[a] == pytest.approx(float(r2[a]), rel=1e-5, abs=1e-5)  # float32 rounding may differ
            assert infos[a]["error_code"] == int(info2["error_code"][int(a[6:])])
    jax.tree.map(lambda x, y: np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-5),
                 penv.state_jax, state)
