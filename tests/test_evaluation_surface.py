"""The env's public evaluation surface (nexus_jax/envs/nexus/evaluation.py and the package's exports): what train/ uses
instead of env internals behaves as the internals it stands for."""
import chex
import jax
import jax.numpy as jnp
import numpy as np

import nexus_jax
import nexus_jax.envs.nexus as N


def test_step_with_npcs_is_npc_actions_then_step_all_seats():
    params = N.NexusParams.create(max_steps=5)
    key = jax.random.PRNGKey(3)
    _, state = N.reset(key, params)
    ext = jnp.array([[int(N.ActionType.WORK), 0, 0, 0, 0]], jnp.int32)  # seat 0 is external; NPCs elsewhere

    def both(k, s):
        composed = N.step_with_npcs(k, s, ext, params, (0,))
        k_npc, k_mem, k_step = jax.random.split(k, 3)
        acts = N.npc_actions(k_npc, s, params, params.behaviours).at[0].set(ext[0])
        return composed, N.step_all_seats(k_mem, k_step, s, acts, params)

    composed, by_hand = jax.jit(both)(key, state)
    chex.assert_trees_all_equal(composed, by_hand)
    assert not bool(np.asarray(composed[4]["invalid"])[0])  # seat 0's WORK was valid: the test drives something


def test_seat_masks_are_the_class_masks_and_with_behaviour_sets_only_those_seats():
    env = nexus_jax.make("nexus-selfplay-v0", max_steps=5)  # every seat a learner: the class masks every seat
    _, state = env.reset(jax.random.PRNGKey(0))
    masks = N.seat_masks(state, env.default_params)
    np.testing.assert_array_equal(masks, env.flat_avail_actions(state))
    assert masks.shape == (4, N.num_flat_actions(4, env.default_params.num_levels)) and not masks.all()
    np.testing.assert_array_equal(N.seat_masks(state, env.default_params, jnp.array([2])), masks[2:3])
    p = N.with_behaviour(env.default_params, jnp.array([1, 2]), int(N.Archetype.CHEATER))
    before = np.asarray(env.default_params.behaviours)
    assert list(np.asarray(p.behaviours)) == [before[0], 5, 5, before[3]]
    np.testing.assert_array_equal(p.archetypes, env.default_params.archetypes)  # the seats keep their economy
