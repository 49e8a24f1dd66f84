"""crisis-v0's hand-written rules (`nexus_jax.envs.crisis.heuristics`): one ranking read from the state or from
the observation's slot features picks the same action, every rule's action is valid, and the rules' ranking.

States come from one compiled random rollout (random task sets and crises, dependency features on, so both
the state rules and the slot rules of `edf_chain` have what they read), shared by every test here.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nexus_jax
from nexus_jax.envs.crisis import FIRST_REQUEST, RULES, SLOT_RULES, avail_actions, edf_actions, static_order
from nexus_jax.envs.crisis.heuristics import WAIT, request_first
from nexus_jax.envs.crisis.observation import get_obs

E, T = 8, 48  # envs x steps of the random rollout: 384 states of 3 seats


@pytest.fixture(scope="module")
def env():
    return nexus_jax.make("crisis-v0", task_source="random", crisis_source="random", dependency_features=True)


@pytest.fixture(scope="module")
def states(env):
    """(E * T,) states of random valid play, with their masks and observations."""
    p = env.default_params

    @jax.jit
    def run(key):
        k0, k1 = jax.random.split(key)
        _, s = jax.vmap(env.reset_env, (0, None))(jax.random.split(k0, E), p)

        def body(s, k):
            ka, ks = jax.random.split(k)
            m = jax.vmap(avail_actions, (0, None))(s, p)
            a = jax.random.categorical(ka, jnp.where(m, 0.0, -jnp.inf)).astype(jnp.int32)
            return jax.vmap(env.step_arrays, (0, 0, 0, None))(jax.random.split(ks, E), s, a, p)[1], s

        traj = jax.lax.scan(body, s, jax.random.split(k1, T))[1]
        flat = jax.tree.map(lambda x: x.reshape((E * T,) + x.shape[2:]), traj)
        return flat, jax.vmap(avail_actions, (0, None))(flat, p), jax.vmap(get_obs, (0, None))(flat, p)

    return run(jax.random.PRNGKey(0))


@pytest.fixture(scope="module")
def every_rule(env, states):
    """name -> (E * T, A) actions of every state rule, and of each slot rule read from the observations."""
    p, layout = env.default_params, env.spec.slot_layout
    s, m, obs = states
    slots = obs[..., layout.obs_offset:layout.obs_offset + layout.slots * layout.features].reshape(
        obs.shape[:-1] + (layout.slots, layout.features))

    @jax.jit
    def run(s, m, slots):
        out = {n: jax.vmap(r, (0, 0, None))(s, m, p) for n, r in RULES.items()}
        out.update({f"slots:{n}": r(slots, m, layout, 0.15) for n, r in SLOT_RULES.items()})
        return out

    return jax.device_get(run(s, m, slots))


def test_edf_from_the_state_and_from_the_slot_features_pick_the_same_action(every_rule):
    acts = every_rule
    assert acts["edf"].shape == (E * T, 3)
    requests = acts["edf"] >= FIRST_REQUEST
    assert 0.1 < requests.mean() < 0.9  # the states have requests and waits to tell apart
    np.testing.assert_array_equal(acts["slots:edf"], acts["edf"])
    # edf_chain: the same ranking in feature units (1.2 h of slack is 0.15 of the 8 h episode)
    np.testing.assert_array_equal(acts["slots:edf_chain"], acts["edf_chain"])
    assert (acts["edf_chain"] != acts["edf"]).any()  # the states include some where the rules differ


def test_every_rule_takes_a_valid_action(every_rule, states):
    _, m, _ = states
    m = np.asarray(m)
    for name, a in every_rule.items():
        assert a.dtype == np.int32
        assert np.take_along_axis(m, a[..., None], -1).all(), name
    assert (every_rule["edf_always_yield"][every_rule["edf"] != WAIT] % 2 == 1).all()  # YIELD is the odd index
    assert len({a.tobytes() for a in every_rule.values()}) >= 6  # the variants are different rules


def test_the_spec_heuristics_are_the_rules_with_the_masks_of_the_state(env, states):
    s, m, _ = states
    one = jax.tree.map(lambda x: x[100], s)
    p = env.default_params
    for name, rule in RULES.items():
        np.testing.assert_array_equal(env.spec.heuristic(name)(None, one, p), rule(one, m[100], p))
    assert env.spec.reference_heuristic == "edf" and env.spec.heuristics["edf"].__doc__ == edf_actions.__doc__


def test_request_first_ranks_least_score_lowest_slot_on_ties():
    req = jnp.array([[True, True, True], [False, True, True], [False, False, False]])
    score = jnp.array([[2.0, 1.0, 1.0], [0.0, 5.0, 4.0], [0.0, 0.0, 0.0]])
    np.testing.assert_array_equal(request_first(req, score), [FIRST_REQUEST + 2, FIRST_REQUEST + 4, WAIT])
    np.testing.assert_array_equal(request_first(req, score, 1), [FIRST_REQUEST + 3, FIRST_REQUEST + 5, WAIT])


def test_static_order_requests_the_lowest_ranked_requestable_task(env, states):
    s, m, _ = states
    i = int(np.argmax(np.asarray(m)[:, :, FIRST_REQUEST:FIRST_REQUEST + 8:2].sum((1, 2))))  # the most choice
    one, mask = jax.tree.map(lambda x: x[i], s), m[i]
    prio = jnp.tile(jnp.array([3.0, 2.0, 1.0, 0.0]), (3, 1))  # last slot first
    got = np.asarray(static_order(one, mask, prio))
    req = np.asarray(mask)[:, FIRST_REQUEST:FIRST_REQUEST + 8:2]
    want = [FIRST_REQUEST + 2 * max(np.flatnonzero(r)) if r.any() else WAIT for r in req]
    np.testing.assert_array_equal(got, want)
