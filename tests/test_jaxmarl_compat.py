"""JaxMARL's own data paths (PyPI `jaxmarl`, the `jaxmarl` extra) on every registered env, shapes exactly as upstream.

Upstream files reproduced (FLAIROx/JaxMARL): baselines/IPPO/ippo_ff_mpe.py (via experiments/ecosystem/ippo_ff.py:
`unbatchify` hands each env a (1,) action per agent, no `.squeeze()`; every info leaf reshaped to
NUM_ACTORS), baselines/MAPPO/mappo_rnn_mpe.py (a world-state wrapper stacking every agent's obs,
`swapaxes(0, 1)` and reshape to NUM_ACTORS), baselines/IPPO/ippo_rnn_smax.py (logits masked with
`get_avail_actions`, actions `.squeeze()`d), and jaxmarl.wrappers.baselines.CTRolloutManager. Every
registered id is checked by tracing (`jax.eval_shape`: no compile); a few ids run for real.
"""
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nexus_jax
from nexus_jax.envs.nexus.constants import ErrorCode
from registered import env_ids

baselines = pytest.importorskip("jaxmarl.wrappers.baselines")
jm_spaces = pytest.importorskip("jaxmarl.environments.spaces")

NUM_ENVS = 2


def unbatchify(x, agent_list, num_envs, num_agents):
    """Upstream IPPO-FF's: a (1,) action per agent per env, never squeezed."""
    x = x.reshape((num_agents, num_envs, -1))
    return {a: x[i] for i, a in enumerate(agent_list)}


def batchify(x, agent_list, num_actors):
    return jnp.stack([x[a] for a in agent_list]).reshape((num_actors, -1))


class WorldStateWrapper(baselines.JaxMARLWrapper):
    """MAPPO's world state as mappo_rnn_mpe.py builds it: every agent's obs, flattened, repeated per agent."""

    @partial(jax.jit, static_argnums=0)
    def reset(self, key):
        obs, env_state = self._env.reset(key)
        obs["world_state"] = self.world_state(obs)
        return obs, env_state

    @partial(jax.jit, static_argnums=0)
    def step(self, key, state, action):
        obs, env_state, reward, done, info = self._env.step(key, state, action)
        obs["world_state"] = self.world_state(obs)
        return obs, env_state, reward, done, info

    def world_state(self, obs):
        all_obs = jnp.array([obs[agent] for agent in self._env.agents]).flatten()
        return jnp.expand_dims(all_obs, axis=0).repeat(self._env.num_agents, axis=0)

    def world_state_size(self):
        return sum(self._env.observation_space(a).shape[-1] for a in self._env.agents)


def ippo_and_mappo_step(env, key, env_state, last_obs):
    """One env step of IPPO-FF and MAPPO at once: uniform (1,) actions per agent from `unbatchify`,
    the world state reshaped as MAPPO does, every info leaf reshaped to NUM_ACTORS."""
    num_actors = env.num_agents * NUM_ENVS
    obs_batch = batchify(last_obs, env.agents, num_actors)
    world_state = last_obs["world_state"].swapaxes(0, 1).reshape((num_actors, -1))
    k_act, k_step = jax.random.split(key)
    action = jax.random.randint(k_act, (1, num_actors), 0, env.action_space(env.agents[0]).n)  # MAPPO: (1, NUM_ACTORS)
    env_act = unbatchify(action, env.agents, NUM_ENVS, env.num_agents)
    obsv, env_state, reward, done, info = jax.vmap(env.step)(jax.random.split(k_step, NUM_ENVS), env_state, env_act)
    info = jax.tree.map(lambda x: x.reshape((num_actors)), info)
    done_batch = batchify(done, env.agents, num_actors).squeeze()
    reward_batch = batchify(reward, env.agents, num_actors).squeeze()
    return obsv, env_state, (obs_batch, world_state, env_act, done_batch, reward_batch, info)


def wrapped(env_id, **kw):
    return baselines.LogWrapper(WorldStateWrapper(nexus_jax.make(env_id, **kw)))


@pytest.mark.parametrize("env_id", env_ids())
def test_every_env_takes_the_baselines_shapes(env_id):
    """Traced, not compiled: IPPO/MAPPO's step shapes, the default info reshape, JaxMARL's space checks."""
    env = wrapped(env_id)
    num_actors = env.num_agents * NUM_ENVS
    key = jax.random.PRNGKey(0)
    obsv, state = jax.eval_shape(jax.vmap(env.reset), jax.random.split(key, NUM_ENVS))
    _, _, (obs_b, ws, env_act, done_b, rew_b, info) = jax.eval_shape(
        partial(ippo_and_mappo_step, env), key, state, obsv)
    a0 = env.agents[0]
    assert env_act[a0].shape == (NUM_ENVS, 1)  # what each env's step receives: a (1,) action per agent
    assert obs_b.shape == (num_actors, env.observation_space(a0).shape[0])
    assert ws.shape == (num_actors, env.world_state_size())
    assert done_b.shape == rew_b.shape == (num_actors,)
    assert all(x.shape == (num_actors,) for x in jax.tree.leaves(info))
    assert isinstance(env.action_space(a0), jm_spaces.Discrete) and isinstance(env.observation_space(a0), jm_spaces.Box)
    rollout = baselines.CTRolloutManager(nexus_jax.make(env_id), batch_size=NUM_ENVS)  # raised NotImplementedError
    assert rollout.max_action_space == env.action_space(a0).n


@pytest.mark.parametrize("env_id", ["nexus-v0", "nexus-selfplay-v0"])
def test_ippo_and_mappo_steps_run_and_read_actions_as_given(env_id):
    """Real steps: a (1,) action is read as the flat index it holds (before the fix ~99.8% became
    BAD_TYPE): an action is invalid exactly when the mask computed before the step excludes it."""
    env = wrapped(env_id, max_steps=3)

    @jax.jit
    def run(key):
        obsv, state = jax.vmap(env.reset)(jax.random.split(key, NUM_ENVS))

        def body(carry, k):
            obsv, state = carry
            avail = jax.vmap(env.get_avail_actions)(state.env_state)
            obsv, state, out = ippo_and_mappo_step(env, k, state, obsv)
            env_act, info = out[2], out[-1]
            allowed = jnp.stack([jnp.take_along_axis(avail[a], env_act[a], axis=1)[:, 0] for a in env.agents], 1)
            return (obsv, state), (info, allowed.reshape(-1))  # info's reshape is env-major (batchify's is agent-major)

        return jax.lax.scan(body, (obsv, state), jax.random.split(key, 6))[1]

    info, allowed = jax.tree.map(np.asarray, run(jax.random.PRNGKey(0)))
    np.testing.assert_array_equal(info["invalid"], ~allowed)
    assert not (info["error_code"] == ErrorCode.BAD_TYPE).any() and allowed.any() and not allowed.all()
    assert info["returned_episode"][2].all() and info["returned_episode"][5].all()  # episodes of 3 steps


def test_smax_style_masked_recurrent_path():
    """ippo_rnn_smax.py's env step: masks from get_avail_actions, batchified; masked sampling; actions
    `.squeeze()`d to scalars; no sampled action is invalid."""
    env = baselines.LogWrapper(nexus_jax.make("nexus-selfplay-v0", max_steps=3))
    num_actors = env.num_agents * NUM_ENVS

    @jax.jit
    def run(key):
        obsv, env_state = jax.vmap(env.reset)(jax.random.split(key, NUM_ENVS))

        def env_step(carry, k):
            env_state, last_obs = carry
            k_act, k_step = jax.random.split(k)
            avail = batchify(jax.vmap(env.get_avail_actions)(env_state.env_state), env.agents, num_actors)
            logits = batchify(last_obs, env.agents, num_actors)[:, :1] * 0.0 - (1 - avail) * 1e10
            action = jax.random.categorical(k_act, logits)[None]  # (1, NUM_ACTORS), as the GRU actor's output
            env_act = {a: v.squeeze() for a, v in unbatchify(action, env.agents, NUM_ENVS, env.num_agents).items()}
            obsv, env_state, reward, done, info = jax.vmap(env.step)(jax.random.split(k_step, NUM_ENVS), env_state, env_act)
            info = jax.tree.map(lambda x: x.reshape((num_actors)), info)
            return (env_state, obsv), info

        return jax.lax.scan(env_step, (env_state, obsv), jax.random.split(key, 4))[1]

    info = jax.tree.map(np.asarray, run(jax.random.PRNGKey(0)))
    assert info["invalid"].shape == (4, num_actors) and not info["invalid"].any()
    assert info["returned_episode"][2].all()


def test_ctrolloutmanager_batch_steps():
    """JaxMARL's Q-learning rollout manager: batch_sample (uniform, no mask), batch_step, global state/reward."""
    env = baselines.CTRolloutManager(nexus_jax.make("nexus-selfplay-v0", max_steps=3), batch_size=NUM_ENVS)
    key = jax.random.PRNGKey(0)
    obs, state = env.batch_reset(key)
    acts = {a: env.batch_sample(jax.random.fold_in(key, i), a) for i, a in enumerate(env.agents)}
    obs, state, reward, done, info = env.batch_step(key, state, acts)
    assert obs["__all__"].shape == (NUM_ENVS, 4 * 307) and obs["agent_0"].shape == (NUM_ENVS, 307 + 4)
    assert reward["__all__"].shape == (NUM_ENVS,) and info["invalid"].shape == (NUM_ENVS, 4)
    assert not (np.asarray(info["error_code"]) == ErrorCode.BAD_TYPE).any()


