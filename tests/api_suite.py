"""The shared API suite every registered env must pass (Pgx's api_test, Jumanji's smoke test).

`check_env_api(env)` runs a jitted, vmapped rollout through the JaxMARL dict API with
random valid actions and checks spaces, masks, dones, auto-reset and finiteness.
Variants that differ from an env already checked only in traced params reuse its
compiled rollout (params are an argument), so registering a variant costs no compile.
"""
import chex
import jax
import jax.numpy as jnp
import numpy as np


def _signature(env):
    """Envs with equal signatures run the same program; only their traced params differ."""
    leaves, treedef = jax.tree.flatten(env.default_params)
    shapes = tuple((np.shape(x), np.asarray(x).dtype.str) for x in leaves)
    return type(env), tuple(env.agents), treedef, shapes, getattr(env, "learner_seats", None)


_ROLLOUTS: dict = {}


def _compiled(env, num_envs, steps):
    key = (_signature(env), num_envs, steps)
    if key not in _ROLLOUTS:
        _ROLLOUTS[key] = _build(env, num_envs, steps)
    return _ROLLOUTS[key]


def _build(env, num_envs, steps):
    agents = env.agents

    def policy(key, state, params):
        masks = env.get_avail_actions(state, params)
        keys = jax.random.split(key, len(agents))
        return {a: jax.random.categorical(k, jnp.where(masks[a], 0.0, -1e9)) for k, a in zip(keys, agents)}, masks

    def episode(params, key):
        k_reset, k_run = jax.random.split(key)
        obs0, state = env.reset(k_reset, params)

        def body(state, key):
            k_act, k_step = jax.random.split(key)
            actions, masks = policy(k_act, state, params)
            obs, state, rewards, dones, infos = env.step(k_step, state, actions, params)
            return state, (obs, rewards, dones, masks, actions)

        final, traj = jax.lax.scan(body, state, jax.random.split(k_run, steps))
        return obs0, final, traj

    return jax.jit(lambda params, key: jax.vmap(episode, in_axes=(None, 0))(params, jax.random.split(key, num_envs)))


def check_env_api(env, num_envs: int = 3, steps: int = 12, seed: int = 0):
    agents = env.agents
    assert len(agents) == env.num_agents >= 1
    assert len(set(agents)) == len(agents)
    for a in agents:
        assert env.action_space(a).n >= 1
        assert len(env.observation_space(a).shape) == 1

    rollout = _compiled(env, num_envs, steps)
    obs0, final, (obs, rewards, dones, masks, actions) = rollout(env.default_params, jax.random.PRNGKey(seed))
    assert set(obs0) == set(agents)
    for a in agents:
        assert obs0[a].shape == (num_envs,) + env.observation_space(a).shape
    chex.assert_tree_all_finite((obs, rewards))
    assert "__all__" in dones
    for a in agents:
        assert rewards[a].shape == (num_envs, steps)
        assert dones[a].shape == (num_envs, steps)
        assert masks[a].shape == (num_envs, steps, env.action_space(a).n)
        assert np.asarray(masks[a]).any(-1).all(), f"{a} had no valid action"
        chosen = np.take_along_axis(np.asarray(masks[a]), np.asarray(actions[a])[..., None], -1)
        assert chosen.all(), "sampled a masked action"
    # Determinism: the same keys give the same trajectory.
    again = rollout(env.default_params, jax.random.PRNGKey(seed))
    for x, y in zip(jax.tree.leaves((final, obs, rewards)), jax.tree.leaves((again[1], again[2][0], again[2][1]))):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    return final
