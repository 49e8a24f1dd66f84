"""Invariants under random (valid and invalid) actions, determinism, no retracing, vmap over params, N."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from nexus_jax.envs.nexus import actions as A
from nexus_jax.envs.nexus import core
from nexus_jax.envs.nexus.env import NexusEnv, action_snapshot
from nexus_jax.envs.nexus.params import NexusParams
from nexus_jax.envs.nexus.validity import flat_mask

SHOCKY = dict(p_solar_flare=0.2, p_grid_failure=0.2, shock_duration=2)


def holdings(s):
    """(2,) system total of each resource, wherever it sits."""
    return (s.available + s.escrow + s.vault).sum(0) + s.withdrawals.sum((0, 1))


def random_actions(key, state, params, use_mask):
    """Mostly mask-sampled valid actions, plus uniform flat indices (some out of range)."""
    n, L = params.num_agents, params.num_levels
    n_act = A.num_flat_actions(n, L)
    k1, k2, k3 = jax.random.split(key, 3)
    uniform = jax.random.randint(k1, (n,), -3, n_act + 3)
    if not use_mask:
        return uniform, jnp.zeros((n, n_act), bool)
    mask = flat_mask(action_snapshot(state, params), params)
    valid = jax.random.categorical(k2, jnp.where(mask, 0.0, -1e9))
    return jnp.where(jax.random.uniform(k3, (n,)) < 0.7, valid, uniform), mask


def checks(prev, state, actions, mask, info, params, use_mask):
    """Per-step violations (all must be ~0 / True)."""
    p = state.proposals
    live_escrow = (jnp.where(p.active, p.give, 0.0)[..., None] * (p.resource[..., None] == jnp.arange(2))).sum(1)
    f = info["flows"]
    expected = holdings(prev) + (f["income"] - f["upkeep"] - f["decay"] + f["work_gained"] - f["work_spent"]
                                 - f["shock_loss"]).sum(0)
    n_act = mask.shape[1]
    in_range = (actions >= 0) & (actions < n_act)
    allowed = mask[jnp.arange(actions.shape[0]), jnp.clip(actions, 0, n_act - 1)] & in_range
    ok = info["error_code"] == 0
    return {
        "min_holding": jnp.minimum(jnp.minimum(state.available.min(), state.escrow.min()),
                                   jnp.minimum(state.vault.min(), state.withdrawals.min())),
        "min_collateral": state.collateral.min(),
        "escrow_gap": jnp.abs(state.escrow - live_escrow).max(),
        "trust_min": state.trust.min(),
        "trust_max": state.trust.max(),
        "conservation_gap": jnp.abs(holdings(state) - expected).max() / (1.0 + jnp.abs(expected).max()),
        "mask_agrees": jnp.where(use_mask, jnp.all(allowed == ok), True),
        "no_self_proposals": ~jnp.any(jnp.diagonal(p.active)),
        "ages_live": jnp.all(jnp.where(p.active, p.age <= params.proposal_ttl, True)),
        "shock": info["stats"]["shock_started"],
        "invalid_out_of_range": jnp.all(jnp.where(~in_range, ~ok, True)),
        "relied": info["stats"]["relied"].any(),  # a signal paid ahead (signal_prepay)
    }


@functools.lru_cache(maxsize=None)
def make_rollout(params_static_key, use_mask, steps):
    """A jitted (params, keys) -> per-step checks and final state, vmapped over episodes."""

    def episode(params, key):
        key, k0 = jax.random.split(key)
        _, state = core.reset(k0, params)

        def body(state, key):
            ka, ks = jax.random.split(key)
            actions, mask = random_actions(ka, state, params, use_mask)
            _, nxt, reward, done, info = core.step(ks, state, actions, params)
            return nxt, (checks(state, nxt, actions, mask, info, params, use_mask), reward)

        final, (per_step, rewards) = jax.lax.scan(body, state, jax.random.split(key, steps))
        return per_step, rewards, final

    return jax.jit(jax.vmap(episode, in_axes=(None, 0)))


def assert_invariants(per_step):
    c = jax.tree.map(np.asarray, per_step)
    assert c["min_holding"].min() >= 0.0
    assert c["min_collateral"].min() >= 0.0
    assert c["escrow_gap"].max() < 1e-3
    assert c["trust_min"].min() >= 0.0 and c["trust_max"].max() <= 1.0
    assert c["conservation_gap"].max() < 1e-5
    assert c["mask_agrees"].all()
    assert c["no_self_proposals"].all() and c["ages_live"].all()
    assert c["invalid_out_of_range"].all()


@pytest.fixture(scope="module")
def shocky4():
    params = NexusParams.create(num_agents=4, **SHOCKY)
    fn = make_rollout(4, True, 60)
    keys = jax.random.split(jax.random.PRNGKey(7), 48)
    return params, fn, keys, fn(params, keys)


def test_invariants_hold_under_random_actions(shocky4):
    _, _, _, (per_step, rewards, final) = shocky4
    assert_invariants(per_step)
    assert np.asarray(per_step["shock"]).sum() > 100  # the check saw many shocks
    assert np.isfinite(np.asarray(rewards)).all()


def test_same_key_same_trajectory_bitwise(shocky4):
    params, fn, keys, first = shocky4
    second = fn(params, keys)
    for a, b in zip(jax.tree.leaves(first), jax.tree.leaves(second)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    other = fn(params, jax.random.split(jax.random.PRNGKey(8), 48))
    assert not np.array_equal(np.asarray(first[1]), np.asarray(other[1]))


def test_invariants_hold_with_payments_ahead():
    """signal_prepay: conservation, no negatives, escrow = live proposals and the masks agreeing with the step hold
    while seats pay signals ahead and forwards are delivered (random masked actions, N = 3)."""
    params = NexusParams.create(num_agents=3, signal_prepay=1, **SHOCKY)
    per_step, rewards, final = make_rollout(("prepay", 3), True, 40)(params, jax.random.split(jax.random.PRNGKey(3), 32))
    assert_invariants(per_step)
    assert np.asarray(per_step["relied"]).sum() > 0


@pytest.mark.parametrize("n", [2, pytest.param(16, marks=pytest.mark.slow), pytest.param(64, marks=pytest.mark.slow)])
def test_invariants_for_population_sizes(n):
    params = NexusParams.create(num_agents=n, **SHOCKY)
    per_step, rewards, final = make_rollout(n, n == 2, 8)(params, jax.random.split(jax.random.PRNGKey(n), 2))
    assert_invariants(per_step)
    assert rewards.shape == (2, 8, n)


def test_stepping_many_times_compiles_once():
    env = NexusEnv.create(num_agents=3)
    traces = []

    @jax.jit
    def step(key, state, actions):
        traces.append(1)
        return env.step(key, state, actions)

    key = jax.random.PRNGKey(0)
    obs, state = env.reset(key)
    for t in range(100):
        key, k = jax.random.split(key)
        actions = {a: jnp.int32((t * 7 + i) % env.num_actions) for i, a in enumerate(env.agents)}
        obs, state, rewards, dones, info = step(k, state, actions)
    assert len(traces) == 1
    assert int(state.step) == 0 and bool(dones["__all__"])  # the 100th step ended the episode and auto-reset


def test_vmap_over_params_compiles_once_and_params_matter():
    base = NexusParams.create(num_agents=4, p_grid_failure=0.0)
    probs = jnp.linspace(0.0, 0.6, 8)
    batch = jax.vmap(lambda p: base.replace(p_solar_flare=p))(probs)
    traces = []

    def shocks(params, key):
        traces.append(1)
        _, state = core.reset(key, params)

        def body(s, k):
            _, s, _, _, info = core.step(k, s, jnp.zeros(4, jnp.int32), params)
            return s, info["stats"]["shock_started"]

        return jax.lax.scan(body, state, jax.random.split(key, 50))[1].sum()

    run = jax.jit(jax.vmap(jax.vmap(shocks, in_axes=(None, 0)), in_axes=(0, None)))
    counts = np.asarray(run(batch, jax.random.split(jax.random.PRNGKey(0), 16))).sum(1)
    run(batch, jax.random.split(jax.random.PRNGKey(1), 16))
    assert len(traces) == 1
    assert counts[0] == 0
    assert np.all(np.diff(counts) > 0), counts
