"""The single-agent gymnax view: gymnax's own wrappers, PureJaxRL's wrapper data path and a PPO loop run on it."""
import sys
from typing import NamedTuple

import distrax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import nexus_jax
from nexus_jax.base import Box, compatible
from nexus_jax.envs.nexus.gymnax_view import NexusGymnax, gymnax_ids
from nexus_jax.wrappers import LogWrapper as NexusLogWrapper
from registered import env_ids



@pytest.fixture(scope="module")
def purerl():
    return pytest.importorskip("gymnax.wrappers.purerl")  # the `jaxmarl` extra installs gymnax 1.x


@pytest.fixture(scope="module")
def gx_spaces():
    return pytest.importorskip("gymnax.environments.spaces")


NUM_ENVS, NUM_STEPS, NUM_UPDATES, MAX_STEPS = 4, 8, 2, 6


@pytest.fixture(scope="module")
def env():
    return NexusGymnax.make("nexus-v0", max_steps=MAX_STEPS)  # short episodes: the rollout crosses auto-resets


class ActorCritic(nn.Module):
    num_actions: int

    @nn.compact
    def __call__(self, x):
        h = nn.tanh(nn.Dense(32)(x))
        return nn.Dense(self.num_actions)(h), nn.Dense(1)(h)[..., 0]


class Transition(NamedTuple):
    obs: jnp.ndarray
    action: jnp.ndarray
    reward: jnp.ndarray
    done: jnp.ndarray
    invalid: jnp.ndarray
    returned: jnp.ndarray


def make_train(env, env_params, base, step_done):
    """PureJaxRL's loop shape on a wrapped env: vmapped reset/step with params passed through, a scanned
    rollout, unmasked sampling (as ppo.py), optax updates. `base` reaches the view through the wrappers'
    state; `step_done(out)` reads done from the step's tuple (gymnax 0.0.x: 5; 1.x: 6 entries)."""
    net = ActorCritic(env.action_space(env_params).n)
    tx = optax.adam(1e-3)

    def train(rng):
        rng, k_init, k_reset = jax.random.split(rng, 3)
        params = net.init(k_init, jnp.zeros(env.observation_space(env_params).shape))
        opt = tx.init(params)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(k_reset, NUM_ENVS), env_params)

        def update(carry, _):
            params, opt, obs, state, rng = carry

            def env_step(c, _):
                obs, state, rng = c
                rng, k_act, k_step = jax.random.split(rng, 3)
                action = distrax.Categorical(logits=net.apply(params, obs)[0]).sample(seed=k_act)
                out = jax.vmap(env.step, in_axes=(0, 0, 0, None))(jax.random.split(k_step, NUM_ENVS), state, action,
                                                                   env_params)
                info = out[-1]
                return (out[0], out[1], rng), Transition(obs, action, out[2], step_done(out),
                                                         info["invalid"][:, base.seat], info["returned_episode"])

            (obs, state, rng), traj = jax.lax.scan(env_step, (obs, state, rng), None, NUM_STEPS)

            def loss_fn(p):
                logits, value = net.apply(p, traj.obs)
                adv = traj.reward - jax.lax.stop_gradient(value)  # one-step targets are enough for a smoke loop
                logp = distrax.Categorical(logits=logits).log_prob(traj.action)
                return -(logp * adv).mean() + 0.5 * ((traj.reward - value) ** 2).mean()

            loss, grads = jax.value_and_grad(loss_fn)(params)
            upd, opt = tx.update(grads, opt)
            return (optax.apply_updates(params, upd), opt, obs, state, rng), (loss, traj)

        (params, *_), metrics = jax.lax.scan(update, (params, opt, obs, state, rng), None, NUM_UPDATES)
        return params, metrics

    return train


def check_loop(metrics, params):
    loss, traj = jax.tree.map(np.asarray, metrics)
    assert np.isfinite(loss).all() and all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(params))
    assert traj.done.sum() == NUM_ENVS * 2 and traj.returned.sum() == NUM_ENVS * 2  # 16 steps, episodes of 6
    assert traj.action.shape == (NUM_UPDATES, NUM_STEPS, NUM_ENVS)
    assert 0 < traj.invalid.mean() < 1  # unmasked flat picks: the env judged them (invalid ones become WAIT)


def test_gymnax_wrappers_and_ppo_loop(env, purerl, gx_spaces):
    """gymnax 1.x's own FlattenObservationWrapper and LogWrapper (they check `spaces.Box`, unpack 6 values
    and read `info["final_observation"]`), then a few PPO-shaped updates through them."""
    wrapped = purerl.LogWrapper(purerl.FlattenObservationWrapper(env))
    p = env.default_params
    assert isinstance(wrapped.observation_space(p), gx_spaces.Box)
    assert isinstance(env.action_space(p), gx_spaces.Discrete) and env.action_space(p).n == 823
    train = jax.jit(make_train(wrapped, p, env, lambda out: out[3] | out[4]))
    check_loop(*train(jax.random.PRNGKey(0))[::-1])


def test_gymnax_v0_view_steps_as_a_five_tuple():
    """`gymnax_v1=False`: the 0.0.x 5-tuple PureJaxRL's wrappers and ppo.py unpack; `make_gymnax` is `gymnax.make`'s
    shape (PureJaxRL's loop on it: experiments/ecosystem/test_purejaxrl_ppo.py)."""
    base, p = nexus_jax.make_gymnax("nexus-v0", gymnax_v1=False, max_steps=MAX_STEPS)
    assert isinstance(base, NexusGymnax) and p is base.default_params
    obs, state = base.reset(jax.random.PRNGKey(0), p)
    out = base.step(jax.random.PRNGKey(1), state, jnp.int32(0), p)
    assert len(out) == 5 and out[0].shape == obs.shape and out[3].dtype == jnp.bool_


def test_gymnax_step_api_and_action_shapes(env):
    p = env.default_params
    key = jax.random.PRNGKey(0)
    obs, state = jax.eval_shape(env.reset, key, p)
    assert obs.shape == (307,) == env.observation_space(p).shape
    out = jax.eval_shape(env.step, key, state, jnp.int32(0), p)
    assert len(out) == 6 and out[2].shape == out[3].shape == out[4].shape == ()
    assert {"terminated", "truncated", "final_observation", "discount"} <= set(out[5])
    assert out[5]["final_observation"].shape == (307,)
    # a (1,) action is the same action as a scalar; anything else is an error naming the shape
    _, s = env.reset(key, p)
    i = int(np.argmax(np.asarray(env.action_mask(s, p))[1:])) + 1  # a valid action other than WAIT (a PROPOSE)
    a, b = jax.jit(lambda s: (env.step_env(key, s, jnp.int32(i), p), env.step_env(key, s, jnp.array([i]), p)))(s)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert int(a[-1]["error_code"][0]) == 0  # read as the flat index it holds, so valid
    with pytest.raises(ValueError, match=r"shape \(5,\).*action_format='flat'"):
        jax.eval_shape(env.step_env, key, s, jnp.zeros(5, jnp.int32), p)
    with pytest.raises(ValueError, match="dtype float32"):
        jax.eval_shape(env.step_env, key, s, jnp.float32(1.0), p)


def test_compact_and_structured_views():
    compact = NexusGymnax.make("nexus-v0", action_format="compact", max_steps=MAX_STEPS)
    structured = NexusGymnax.make("nexus-v0", action_format="structured", max_steps=MAX_STEPS)
    p = compact.default_params
    assert compact.action_space(p).n == 16
    assert list(structured.action_space(p).nvec) == [8, 4, 7, 7, 2]
    key = jax.random.PRNGKey(0)
    _, s = compact.reset(key, p)

    @jax.jit
    def run(s):
        work, outside = (compact.step_env(key, s, jnp.int32(i), p)[-1]["error_code"][0] for i in (4, 16))
        return compact.action_mask(s, p), work, outside

    mask, work, outside = jax.device_get(run(s))
    assert mask.shape == (16,) and mask[0] and not mask[1:4].any() and mask[4]  # WAIT; nothing to ACCEPT; WORK
    assert work == 0 and outside == 11  # WORK Energy is valid; index 16 is outside the space: BAD_INDEX


def test_our_logwrapper_reads_the_gymnax_1x_step(env):
    """nexus_jax.wrappers.LogWrapper on the view: done = terminated | truncated; the 6-tuple passes through."""
    w, p = NexusLogWrapper(env), env.default_params
    step = jax.jit(w.step)
    _, s = w.reset(jax.random.PRNGKey(0), p)
    for t in range(MAX_STEPS):
        out = step(jax.random.PRNGKey(t), s, jnp.int32(0), p)
        s = out[1]
        assert len(out) == 6 and bool(out[-1]["returned_episode"]) == (t == MAX_STEPS - 1)
    assert bool(out[4]) and np.asarray(out[-1]["returned_episode_returns"]).shape == (4,)


def test_spaces_built_before_the_ecosystem_import_are_upgraded_when_read(monkeypatch, gx_spaces):
    """A space made while gymnax's space module was not imported is ours only; reading it through an env
    (or `compatible`) after the import gives an instance of gymnax's class too, with the same fields."""
    monkeypatch.delitem(sys.modules, "gymnax.environments.spaces")
    monkeypatch.delitem(sys.modules, "jaxmarl.environments.spaces", raising=False)
    early = Box(-1.0, 1.0, (3,))
    assert not isinstance(early, gx_spaces.Box)
    monkeypatch.undo()
    late = compatible(early)
    assert isinstance(late, gx_spaces.Box) and isinstance(late, Box) and late.shape == (3,) and late.high == 1.0
    assert compatible(late) is late


@pytest.mark.parametrize("env_id", env_ids())
def test_every_id_is_served_as_registered_or_refused_naming_what_serves_it(env_id):
    """No substitution: a served id keeps its registered params (NPC mix, rules); a self-play or non-Nexus id is
    a ValueError naming its multi-agent env and, for self-play, the same rules with NPCs."""
    if env_id in gymnax_ids():
        view, params = nexus_jax.make_gymnax(env_id)
        registered = nexus_jax.make(env_id)
        assert len(registered.agents) == 1 and view.seat == registered.learner_seats[0]
        jax.tree.map(np.testing.assert_array_equal, params, registered.default_params)
        return
    with pytest.raises(ValueError, match=rf"nexus_jax\.make\('{env_id}'\) is its multi-agent env") as err:
        nexus_jax.make_gymnax(env_id, gymnax_v1=False)
    if "selfplay" in env_id:
        twin = env_id.replace("-selfplay", "")
        assert f"make_gymnax('{twin}') has the same rules with NPCs" in str(err.value) and twin in gymnax_ids()
    else:
        assert str(gymnax_ids()) in str(err.value)
