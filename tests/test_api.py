"""Every registered env id passes the shared API suite; make/registry behave."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nexus_jax
from api_suite import check_env_api
from registered import env_ids


@pytest.mark.parametrize("env_id", env_ids())
def test_api_suite(env_id):
    check_env_api(nexus_jax.make(env_id))


def test_registry_lists_and_rejects():
    assert "nexus-v0" in nexus_jax.registered_envs()
    with pytest.raises(ValueError, match="unknown env id"):
        nexus_jax.make("nexus-v999")
    with pytest.raises(ValueError, match="p_solar_flare"):
        nexus_jax.make("nexus-v0", p_solar_flare=1.5)


def test_auto_reset_when_episode_ends():
    env = nexus_jax.make("nexus-v0", max_steps=3)
    key = jax.random.PRNGKey(0)
    obs, state = env.reset(key)
    acts = {a: jnp.int32(0) for a in env.agents}
    for t in range(3):
        obs, state, rewards, dones, info = env.step(jax.random.PRNGKey(t), state, acts)
        for a, o in env.get_obs(state).items():  # the obs of the returned state, the fresh one's at the end
            np.testing.assert_allclose(obs[a], o, rtol=1e-6)
    assert bool(dones["__all__"]) and int(state.step) == 0
    np.testing.assert_allclose(state.collateral, env.default_params.initial_collateral)
