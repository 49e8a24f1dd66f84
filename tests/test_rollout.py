"""nexus_jax/rollout.py: the one rollout keeps its documented key use and folds every step; MultiAgentEnv.step_arrays is
the dict `step` at the array level (the one auto-reset, which the sharded rollout wraps)."""
import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from nexus_jax import rollout, tournament
from nexus_jax.base import MultiAgentEnv
from nexus_jax.envs.nexus import Archetype, NexusParams
from train.learner_env import LearnerEnv, random_actions

E, T = 3, 7


def test_run_is_the_documented_scan_of_env_step():
    env = LearnerEnv.make("nexus-v0", {"max_steps": 4}, "flat")  # episodes end inside the rollout: auto-reset runs
    act = lambda k, obs, state, masks: (random_actions(k, masks, "flat"), None)  # noqa: E731

    def count(acc, s: rollout.Step):
        return acc + s.done.astype(jnp.int32), (s.reward, s.invalid)

    def by_hand(key):
        k_reset, k_run = jax.random.split(key)
        obs, state = jax.vmap(env.reset)(jax.random.split(k_reset, E))
        rewards = []
        for k in jax.random.split(k_run, T):
            k_act, k_env = jax.random.split(k)
            action = random_actions(k_act, jax.vmap(env.masks)(state), "flat")
            obs, state, reward, done, _ = jax.vmap(env.step)(jax.random.split(k_env, E), state, action)
            rewards.append(reward)
        return jnp.stack(rewards)

    key = jax.random.PRNGKey(5)
    run = jax.jit(lambda k: rollout.run(env, k, E, T, act, count, jnp.zeros(E, jnp.int32)))
    (_, _, episodes), (reward, invalid) = run(key)
    assert reward.shape == (T, E, 1) and invalid.shape == (T, E, 1)
    np.testing.assert_array_equal(episodes, np.full(E, T // 4))  # every env ended its 4-step episode once
    # Same keys, same episodes; the two are different compiled programs (a scan vs an unrolled loop), so float
    # results may differ in the last bits. Another key use would give other shocks and rewards altogether.
    np.testing.assert_allclose(reward, jax.jit(by_hand)(key), rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_step_arrays_is_the_dict_step():
    env = LearnerEnv.make("nexus-v0", {"max_steps": 2}, "flat").env
    key = jax.random.PRNGKey(1)
    _, state = env.reset(key)
    actions = jnp.zeros((len(env.agents),), jnp.int32)
    for k in jax.random.split(key, 3):  # the second step ends the episode: the reset branch is taken
        obs_d, state_d, rew_d, dones, info_d = env.step(k, state, {a: actions[i] for i, a in enumerate(env.agents)})
        obs, new, rew, done, info = jax.jit(env.step_arrays)(k, state, actions, env.default_params)
        chex.assert_trees_all_close((obs, new, rew, done, info),  # two compiled programs: last bits may differ
                                    (jnp.stack([obs_d[a] for a in env.agents]), state_d,
                                     jnp.stack([rew_d[a] for a in env.agents]), dones["__all__"], info_d),
                                    rtol=1e-5, atol=1e-5)
        state = new
    assert int(state.step) == 1  # one step into the second episode


@pytest.mark.slow
def test_nexus_auto_reset_inside_the_step_is_the_base_class_auto_reset():
    """NexusEnv.step_arrays selects the reset state where each field is stored (npc.seats.written_once); the base
    class selects after the step. Same keys, same values: every state leaf, reward, done and info agree bit for bit
    over a vmapped batch whose episodes end (max_steps 3), NPC seats and a learner alike."""
    env = LearnerEnv.make("nexus-v0", {"max_steps": 3}, "flat").env
    params = env.default_params

    def run(step_arrays, key):
        _, state = jax.vmap(env.reset_env, (0, None))(jax.random.split(key, E), params)

        def body(state, k):
            k_act, k_step = jax.random.split(k)
            acts = jax.random.randint(k_act, (E, len(env.agents)), 0, env.num_actions)
            out = jax.vmap(step_arrays, (0, 0, 0, None))(jax.random.split(k_step, E), state, acts, params)
            return out[1], out
        return jax.lax.scan(body, state, jax.random.split(key, T))[1]

    key = jax.random.PRNGKey(3)
    fused = jax.jit(lambda k: run(env.step_arrays, k))(key)
    base = jax.jit(lambda k: run(lambda *a: MultiAgentEnv.step_arrays(env, *a), k))(key)
    assert int(fused[3].sum()) >= E  # episodes ended: the reset branch was taken
    chex.assert_trees_all_equal(fused[1:], base[1:])  # state, rewards, dones, info: bit for bit
    # Observations are of the same states; compiled in two programs, the reset state's obs may differ in the last bit.
    chex.assert_trees_all_close(fused[0], base[0], rtol=1e-6, atol=1e-6)


@pytest.mark.slow
def test_tournament_episodes_are_played_from_their_own_keys():
    """The tournament is a `rollout.scan` over a batch of episodes with per-episode key streams: an episode's
    metrics depend on its key alone, not on which other episodes share the batch."""
    params = NexusParams.create(max_steps=6)
    fn = jax.jit(tournament.make_episodes(params, 6))
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    for pid in (tournament.MASKED_RANDOM, int(Archetype.RECIPROCATOR)):
        full, tail = fn(keys, jnp.int32(pid)), fn(keys[2:], jnp.int32(pid))
        chex.assert_trees_all_close(jax.tree.map(lambda x: x[2:], full), tail, rtol=1e-6, atol=1e-6)
        assert np.isfinite(np.asarray(full["returns"])).all()
