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


def test_jaxmarl_ippo_data_path_unchanged():
    """The env step of JaxMARL's IPPO baseline (ippo_ff), verbatim in its data handling:
    batchify over agents, LogWrapper, vmapped step, every info leaf reshaped to NUM_ACTORS."""
    num_envs = 2
    env = baselines.LogWrapper(nexus_jax.make("nexus-selfplay-v0", info_mode="agents", max_steps=3))
    num_actors = env.num_agents * num_envs

    def batchify(x, agent_list):
        return jnp.stack([x[a] for a in agent_list]).reshape((num_actors, -1))

    def unbatchify(x, agent_list):
        x = x.reshape((len(agent_list), num_envs, -1))
        return {a: x[i] for i, a in enumerate(agent_list)}

    @jax.jit
    def run(key):
        obsv, env_state = jax.vmap(env.reset)(jax.random.split(key, num_envs))

        def env_step(carry, k):
            env_state, last_obs = carry
            k_act, k_step = jax.random.split(k)
            avail = batchify(jax.vmap(env.get_avail_actions)(env_state.env_state), env.agents)
            obs_batch = batchify(last_obs, env.agents)
            logits = jnp.where(avail, jnp.zeros_like(avail, jnp.float32) + obs_batch.sum(-1, keepdims=True) * 0, -1e9)
            action = jax.random.categorical(k_act, logits)
            env_act = {k_: v.squeeze() for k_, v in unbatchify(action, env.agents).items()}
            obsv, env_state, reward, done, info = jax.vmap(env.step)(jax.random.split(k_step, num_envs), env_state, env_act)
            info = jax.tree.map(lambda x: x.reshape((num_actors)), info)
            return (env_state, obsv), (batchify(reward, env.agents).squeeze(), info)

        return jax.lax.scan(env_step, (env_state, obsv), jax.random.split(key, 4))[1]

    reward, info = run(jax.random.PRNGKey(0))
    assert reward.shape == (4, num_actors)
    assert set(info) >= {"error_code", "invalid", "utility", "returned_episode_returns", "returned_episode"}
    assert not np.asarray(info["invalid"]).any()  # masked sampling never picks an invalid action
    assert np.asarray(info["returned_episode"])[2].all()  # episodes of 3 steps ended


def test_info_mode_is_validated():
    with pytest.raises(ValueError, match="info_mode"):
        nexus_jax.make("nexus-v0", info_mode="verbose")
