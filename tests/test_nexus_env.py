"""The class layer: spaces, action encodings, masks (flat and factored), observation layout."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nexus_jax
from nexus_jax.envs.nexus import actions as A
from nexus_jax.envs.nexus.constants import ActionType as T
from nexus_jax.envs.nexus.observation import observation_layout, observe


@pytest.fixture(scope="module")
def env():
    return nexus_jax.make("nexus-selfplay-v0", endowment_jitter=0.0)


@pytest.mark.parametrize("n, levels", [(2, 7), (4, 7), (5, 3)])
def test_flat_encoding_round_trips(n, levels):
    table = A.action_table(n, levels)
    assert len(table) == A.num_flat_actions(n, levels)
    flat = np.asarray(A.encode(jnp.asarray(table), n, levels))
    np.testing.assert_array_equal(flat, np.arange(len(table)))
    np.testing.assert_array_equal(np.asarray(A.decode(jnp.arange(len(table)), n, levels)), table)
    assert int(A.decode(jnp.int32(len(table)), n, levels)[0]) == -1


def test_spaces_and_sizes(env):
    p = env.default_params
    assert env.action_space(env.agents[0]).n == A.num_flat_actions(p.num_agents, p.num_levels) == 823
    layout = observation_layout(p)
    assert sum(s.stop - s.start for s in layout.values()) == env.observation_space(env.agents[0]).shape[0]
    assert env.observation_space(env.agents[0]).shape[0] == 35 + 32 * p.num_agents + 18 * p.obs_ledger_events
    assert list(env.factored_action_spaces[env.agents[0]].nvec) == [8, 4, 7, 7, 2]


def test_observation_blocks_hold_what_they_say(env):
    obs, state = env.reset(jax.random.PRNGKey(0))
    layout = observation_layout(env.default_params)
    own = np.asarray(obs[env.agents[1]][layout["own"]])
    np.testing.assert_allclose(own[:2], np.asarray(state.available[1]) / 100)
    assert np.argmax(np.asarray(obs[env.agents[2]][layout["self_id"]])) == 2
    np.testing.assert_allclose(np.asarray(obs[env.agents[0]][layout["trust_row"]]), 0.5)


def test_masks_at_reset(env):
    _, state = env.reset(jax.random.PRNGKey(0))
    masks = env.get_avail_actions(state)
    m1 = np.asarray(masks[env.agents[1]])  # BULLY: 90 E, 10 C
    table = A.action_table(4, 7)
    assert m1[0]  # WAIT
    kinds = table[:, 0]
    assert not m1[(kinds == T.ACCEPT) | (kinds == T.REJECT)].any()  # nothing to accept yet
    self_prop = (kinds == T.PROPOSE) & (table[:, 1] == 1)
    assert not m1[self_prop].any()
    give_c_20 = (kinds == T.PROPOSE) & (table[:, 4] == 1) & (table[:, 2] == 5) & (table[:, 1] == 0)
    assert not m1[give_c_20].any()  # cannot offer 20 C holding 10
    fm = env.factored_action_masks(state)
    assert fm["type"].shape == (4, 8) and fm["target"].shape == (4, 8, 4)
    assert bool(fm["type"][1, T.PROPOSE]) and not bool(fm["type"][1, T.ACCEPT])
    assert not bool(fm["target"][1, T.PROPOSE, 1])  # never propose to self
    np.testing.assert_array_equal(np.asarray(fm["amount_1"][1, T.PROPOSE, 1]), [1, 1, 1, 1, 1, 0, 0])


@pytest.fixture(scope="module")
def structured_env():
    return nexus_jax.make("nexus-selfplay-v0", endowment_jitter=0.0, action_format="structured")


def test_structured_and_flat_actions_step_identically(env, structured_env):
    """The same actions as (5,) rows (action_format="structured") and as flat indices give the same step."""
    _, state = env.reset(jax.random.PRNGKey(0))
    p = env.default_params
    structured = jnp.array([[T.PROPOSE, 1, 4, 3, 0], [T.WORK, 0, 0, 0, 0], [T.SIGNAL, 3, 2, 2, 1], [T.WAIT, 0, 0, 0, 0]])
    flat = env.encode(structured)
    a = structured_env.step_env(jax.random.PRNGKey(3), state, structured, p)
    b = env.step_env(jax.random.PRNGKey(3), state, flat, p)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert isinstance(structured_env.action_space("agent_0"), nexus_jax.base.MultiDiscrete)
    with pytest.raises(ValueError, match=r"shape \(4, 5\).*action_format='flat'"):
        env.step_env(jax.random.PRNGKey(3), state, structured, p)  # rows are never read by the flat env
    with pytest.raises(ValueError, match=r"agent 'agent_0'.*shape \(\).*action_format='structured'"):
        structured_env.step(jax.random.PRNGKey(3), state, {a: flat[i] for i, a in enumerate(env.agents)})


def test_observing_some_seats_gives_their_rows(env):
    """`observe(..., seats)` (what envs with NPC seats compute) is the all-seat rows, in the order given."""
    _, state = env.reset(jax.random.PRNGKey(0))
    p = env.default_params
    structured = jnp.array([[T.PROPOSE, 1, 4, 3, 0], [T.WORK, 0, 0, 0, 0], [T.SIGNAL, 3, 2, 2, 1], [T.WAIT, 0, 0, 0, 0]])
    _, state, *_ = env.step_env(jax.random.PRNGKey(3), state, env.encode(structured), p)  # proposal, signal, ledger
    full = np.asarray(observe(state, p))
    np.testing.assert_array_equal(np.asarray(observe(state, p, (2, 0))), full[[2, 0]])
    np.testing.assert_array_equal(np.asarray(observe(state, p, (3,))), full[[3]])


def test_wrong_action_shapes_are_errors_naming_the_agent():
    """The dict API reads a flat action from a scalar or a (1,) array only (JaxMARL's shapes); the rest is an error."""
    env = nexus_jax.make("nexus-v0")
    _, state = env.reset(jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match=r"agent 'agent_0' has shape \(2,\).*\(\) or \(1,\)"):
        env.step(jax.random.PRNGKey(0), state, {"agent_0": jnp.zeros(2, jnp.int32)})
    with pytest.raises(KeyError, match="agent_0"):
        env.step(jax.random.PRNGKey(0), state, {"agent_1": jnp.int32(0)})
    with pytest.raises(ValueError, match="info_mode"):
        nexus_jax.make("nexus-v0", info_mode="verbose")
    with pytest.raises(ValueError, match="action_format"):
        nexus_jax.make("nexus-v0", action_format="text")


def test_scalar_and_column_actions_are_the_same_actions(env):
    """A flat action as a scalar, a (1,) array (JaxMARL's `unbatchify`) or a stacked (L,) / (L, 1) array is read
    as the same index: what `step_env` receives is identical (before, (1,) rows were read as structured)."""
    idx = np.array([5, 401, 0, 822])
    forms = [{a: jnp.int32(i) for a, i in zip(env.agents, idx)},
             {a: jnp.array([i]) for a, i in zip(env.agents, idx)},
             jnp.asarray(idx), jnp.asarray(idx)[:, None]]
    for f in forms:
        np.testing.assert_array_equal(np.asarray(env._stack(f)), idx)
    with pytest.raises(ValueError, match=r"all 4 agents \(stacked\) has shape \(4, 5\)"):
        env._stack(jnp.zeros((4, 5), jnp.int32))
