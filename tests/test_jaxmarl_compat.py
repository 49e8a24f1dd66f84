"""JaxMARL's own wrappers (PyPI `jaxmarl`, the `jaxmarl` extra) drive NexusEnv in a jitted, vmapped rollout."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nexus_jax

baselines = pytest.importorskip("jaxmarl.wrappers.baselines")

NUM_ENVS, STEPS, MAX_STEPS = 4, 10, 5


@pytest.mark.parametrize("env_id", ["nexus-v0", "nexus-selfplay-v0"])
def test_jaxmarl_logwrapper_rollout(env_id):
    env = baselines.LogWrapper(nexus_jax.make(env_id, max_steps=MAX_STEPS))
    agents = env.agents

    @jax.jit
    def rollout(key):
        obs, state = jax.vmap(env.reset)(jax.random.split(key, NUM_ENVS))

        def body(state, k):
            k_act, k_step = jax.random.split(k)
            avail = jax.vmap(env.get_avail_actions)(state.env_state)
            keys = jax.random.split(k_act, len(agents))
            acts = {a: jax.random.categorical(kk, jnp.where(avail[a], 0.0, -1e9)) for kk, a in zip(keys, agents)}
            obs, state, rew, dones, info = jax.vmap(env.step)(jax.random.split(k_step, NUM_ENVS), state, acts)
            return state, (info["returned_episode_returns"], info["returned_episode"], dones["__all__"], rew)

        return jax.lax.scan(body, state, jax.random.split(key, STEPS))[1]

    ret, ended, done, rew = jax.tree.map(np.asarray, rollout(jax.random.PRNGKey(0)))
    assert ret.shape == (STEPS, NUM_ENVS, len(agents))
    assert done[MAX_STEPS - 1].all() and ended[MAX_STEPS - 1].all()
    learner_return = np.stack([rew[a] for a in agents], -1)[:MAX_STEPS].sum(0)
    np.testing.assert_allclose(ret[MAX_STEPS - 1], learner_return, rtol=1e-5)
    assert env.action_space(agents[0]).n == 823 and env.observation_space(agents[0]).shape == (287,)
