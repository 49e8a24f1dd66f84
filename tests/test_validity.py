"""validity.py: the bare verdict (`is_valid`, what the masks and NPCs read) against the error codes (`check`)."""
import jax
import jax.numpy as jnp
import numpy as np

from nexus_jax.envs.nexus import actions as A
from nexus_jax.envs.nexus import core
from nexus_jax.envs.nexus.dynamics import action_snapshot
from nexus_jax.envs.nexus.params import NexusParams
from nexus_jax.envs.nexus.constants import ErrorCode
from nexus_jax.envs.nexus.validity import check, flat_mask
from bench.common import plausible_actions


def test_flat_mask_is_check_ok_for_every_flat_action_of_every_seat():
    """Random mid-episode states (3 seats, collateral scarce, shocks frequent so every check fails somewhere):
    the mask of every flat action equals `check(...) == OK` on the same snapshot."""
    params = NexusParams.create(num_agents=3, initial_collateral=2.0, p_grid_failure=0.3, base_limit=5.0)
    table = jnp.asarray(A.action_table(3, params.num_levels))  # (n_flat, 5)

    def states(key):
        _, state = core.reset(key, params)

        def body(st, k):
            k_act, k_step = jax.random.split(k)
            _, st, *_ = core.step(k_step, st, plausible_actions(k_act, st, params), params)
            return st, st
        return jax.lax.scan(body, state, jax.random.split(key, 8))[1]

    def agree(state):
        snap = action_snapshot(state, params)
        mask = flat_mask(snap, params)  # (3, n_flat)
        codes = check(snap, params, jnp.arange(3)[:, None], table[None, :, :].repeat(3, 0))
        return mask, codes

    traj = jax.vmap(states)(jax.random.split(jax.random.PRNGKey(4), 6))
    flat = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), traj)
    mask, codes = jax.jit(jax.vmap(agree))(flat)
    np.testing.assert_array_equal(np.asarray(mask), np.asarray(codes) == ErrorCode.OK)
    seen = set(np.unique(np.asarray(codes)).tolist())
    assert len(seen) >= 6, seen  # the states exercise several distinct failures, not only OK
