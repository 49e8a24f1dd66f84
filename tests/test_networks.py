"""Networks: masked heads never sample a masked choice; scoring matches sampling; sharing and critics."""
import functools
import re

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from train.config import load_config
from train.learner_env import random_actions
from train.networks import ActorCritic, FactoredActor, orthogonal
from train.ppo import make_env, make_sweep

NVEC = (8, 3, 4, 4, 2)  # (type, target, amount_1, amount_2, resource), as the env lays them out


@functools.partial(jax.jit, static_argnums=(1, 2, 3))
def random_masks(key, batch, nvec=NVEC, p=0.4):
    """Random per-head masks (every row keeps at least one allowed entry)."""
    t, n, L, _, r = nvec
    shapes = {"type": (t,), "target": (t, n), "resource": (t, r), "amount_1": (t, r, L), "amount_2": (t, r, L)}
    out = {}
    for k, (name, shape) in zip(jax.random.split(key, 5), shapes.items()):
        m = jax.random.uniform(k, batch + shape) < p
        first = jax.nn.one_hot(jax.random.randint(k, batch + shape[:-1], 0, shape[-1]), shape[-1]) > 0
        out[name] = m | first
    return out


def assert_allowed(actions, masks):
    a = np.asarray(actions)
    m = jax.tree.map(np.asarray, masks)
    t, j, a1, a2, r = (a[..., k] for k in range(5))
    idx = np.indices(t.shape)
    assert m["type"][(*idx, t)].all()
    assert m["target"][(*idx, t, j)].all()
    assert m["resource"][(*idx, t, r)].all()
    assert m["amount_1"][(*idx, t, r, a1)].all()
    assert m["amount_2"][(*idx, t, r, a2)].all()


@pytest.fixture(scope="module")
def factored():
    pol = ActorCritic(num_learners=2, obs_dim=6, action_head="factored", nvec=NVEC, hidden=16, layers=1)
    obs = jax.random.normal(jax.random.PRNGKey(0), (512, 2, 6))
    masks = random_masks(jax.random.PRNGKey(1), (512, 2))
    params = jax.jit(pol.init)(jax.random.PRNGKey(2), obs, masks)
    # Large random logits make masked entries tempting: the mask alone must keep them out.
    params = jax.tree.map(lambda x: x * 50.0, params)
    return pol, params, obs, masks


def test_factored_masked_sampling_never_picks_a_masked_choice(factored):
    pol, params, obs, masks = factored
    act = jax.jit(pol.act)
    for seed in range(4):
        a, logp, ent = act(params, obs, masks, jax.random.PRNGKey(seed))
        assert a.shape == (512, 2, 5)
        assert_allowed(a, masks)
        assert np.isfinite(np.asarray(logp)).all() and np.isfinite(np.asarray(ent)).all()


def test_factored_scoring_matches_sampling(factored):
    pol, params, obs, masks = factored
    a, logp, ent = jax.jit(pol.act)(params, obs, masks, jax.random.PRNGKey(7))
    logp2, ent2 = jax.jit(pol.evaluate)(params, obs, masks, a)
    np.testing.assert_allclose(logp, logp2, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ent, ent2, rtol=1e-5, atol=1e-5)


def test_flat_masked_sampling_never_picks_a_masked_choice():
    pol = ActorCritic(num_learners=3, obs_dim=5, action_head="flat", num_actions=11, hidden=8, layers=1)
    obs = jax.random.normal(jax.random.PRNGKey(0), (400, 3, 5))
    masks = (jax.random.uniform(jax.random.PRNGKey(1), (400, 3, 11)) < 0.2).at[..., 0].set(True)
    params = jax.tree.map(lambda x: x * 50.0, pol.init(jax.random.PRNGKey(2), obs, masks))
    a, _, _ = jax.jit(pol.act)(params, obs, masks, jax.random.PRNGKey(3))
    assert np.take_along_axis(np.asarray(masks), np.asarray(a)[..., None], -1).all()
    r = jax.jit(random_actions, static_argnums=2)(jax.random.PRNGKey(4), masks, "flat")
    assert np.take_along_axis(np.asarray(masks), np.asarray(r)[..., None], -1).all()


def test_random_baseline_respects_factored_masks():
    masks = random_masks(jax.random.PRNGKey(5), (300, 2))
    assert_allowed(jax.jit(random_actions, static_argnums=2)(jax.random.PRNGKey(6), masks, "factored"), masks)


def test_masked_choice_has_zero_probability():
    actor = FactoredActor(NVEC, hidden=8, layers=1)
    obs = jnp.ones((1, 6))
    masks = random_masks(jax.random.PRNGKey(0), (1,))
    masks["type"] = jnp.zeros((1, 8), bool).at[0, 3].set(True)
    params = jax.jit(actor.init)(jax.random.PRNGKey(1), obs, masks, jax.random.PRNGKey(2))
    apply = jax.jit(actor.apply)
    a, logp, _ = apply(params, obs, masks, jax.random.PRNGKey(3))
    assert int(a[0, 0]) == 3
    bad = a.at[0, 0].set(2)  # a masked type: log-prob is effectively -inf
    _, logp_bad, _ = apply(params, obs, masks, None, bad)
    assert float(logp_bad[0]) < -1e8


def test_type_prior_offsets_the_fresh_type_distribution_and_respects_masks():
    """A fresh head's type logits are ~0 (orthogonal(0.01)), so the prior alone sets the distribution:
    with +2 on type 2 and types {0, 2, 5} allowed, P(2) = e^2 / (e^2 + 2); a masked type stays at 0."""
    prior = (0.0, 0.0, 2.0, 5.0, 0.0, 0.0, 0.0, 0.0)  # type 3 is tempting, but masked below
    actor = FactoredActor(NVEC, hidden=8, layers=1, type_prior=prior)
    obs = jax.random.normal(jax.random.PRNGKey(0), (4096, 6))
    masks = random_masks(jax.random.PRNGKey(1), (4096,))
    masks["type"] = jnp.zeros((4096, 8), bool).at[:, jnp.array([0, 2, 5])].set(True)
    params = jax.jit(actor.init)(jax.random.PRNGKey(1), obs, masks, jax.random.PRNGKey(2))
    a, _, _ = jax.jit(actor.apply)(params, obs, masks, jax.random.PRNGKey(3))
    share = np.bincount(np.asarray(a[:, 0]), minlength=8) / 4096
    expect = np.exp(2.0) / (np.exp(2.0) + 2.0)  # 0.787
    assert abs(share[2] - expect) < 0.03 and share[3] == 0.0
    assert abs(share[0] - share[5]) < 0.04


def test_separate_params_have_a_learner_axis_and_shared_params_take_an_id():
    obs = jnp.zeros((4, 3, 5))
    masks = jnp.ones((4, 3, 7), bool)
    sep = ActorCritic(3, 5, "flat", num_actions=7, hidden=8, layers=1, share_params=False)
    p = jax.jit(sep.init)(jax.random.PRNGKey(0), obs, masks)
    assert all(x.shape[0] == 3 for x in jax.tree.leaves(p))
    assert jax.jit(sep.value)(p, obs).shape == (4, 3)
    shared = ActorCritic(3, 5, "flat", num_actions=7, hidden=8, layers=1, share_params=True)
    ps = jax.jit(shared.init)(jax.random.PRNGKey(0), obs, masks)
    assert ps["actor"]["params"]["trunk_0"]["kernel"].shape == (5 + 3, 8)  # obs + one-hot learner id


def test_mappo_critic_sees_every_learner_obs():
    obs = jax.random.normal(jax.random.PRNGKey(0), (4, 3, 5))
    masks = jnp.ones((4, 3, 7), bool)
    pol = ActorCritic(3, 5, "flat", num_actions=7, hidden=8, layers=1, critic="mappo")
    p = jax.jit(pol.init)(jax.random.PRNGKey(0), obs, masks)
    assert p["critic"]["params"]["trunk_0"]["kernel"].shape == (3 * 5 + 3, 8)
    value = jax.jit(pol.value)
    v = value(p, obs)
    v2 = value(p, obs.at[:, 2].add(1.0))  # another learner's obs changes my value
    assert not np.allclose(v[:, 0], v2[:, 0])


def batched_lapack_calls(stablehlo: str) -> int:
    """LAPACK custom calls whose operand has batch axes (rank > 2) in a lowered program's text."""
    ranks = re.findall(r"custom_call @lapack_\w+\(.*: \(tensor<((?:\d+x)+)", stablehlo)
    return sum(dims.count("x") > 2 for dims in ranks)


def test_orthogonal_is_flax_values_without_a_batched_qr():
    """Under vmap (seeds x learning rates), flax's initializer makes batched QRs, which can hang XLA:CPU's thread
    pool (train.networks.orthogonal says how); ours gives the same bits with one unbatched QR per matrix."""
    keys, lrs = jax.random.split(jax.random.PRNGKey(0), 3), jnp.arange(2.0)
    shapes = [(20, 8), (8, 8), (8, 1), (3, 7)]

    def inits(make):
        per_key = lambda k, lr: [make(1.4)(jax.random.fold_in(k, i), s) for i, s in enumerate(shapes)]  # noqa: E731
        return jax.jit(jax.vmap(jax.vmap(per_key, (0, None)), (None, 0)))

    ours, theirs = inits(orthogonal), inits(nn.initializers.orthogonal)
    for a, b in zip(ours(keys, lrs), theirs(keys, lrs)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert batched_lapack_calls(theirs.lower(keys, lrs).as_text()) == 2 * len(shapes)  # geqrf + orgqr per layer
    assert batched_lapack_calls(ours.lower(keys, lrs).as_text()) == 0


@pytest.mark.slow
@pytest.mark.parametrize("network, memory", [("mlp", "none"), ("entity", "none"), ("mlp", "gru"), ("entity", "gru")])
def test_training_programs_make_no_batched_lapack_call(network, memory):
    """What python -m train compiles (seeds x learning rates vmapped); the GRU core's recurrent kernel too."""
    cfg = load_config(overrides=[f"network={network}", f"memory={memory}", "num_envs=2", "num_steps=2",
                                 "total_timesteps=8", "num_seeds=2", "num_minibatches=2", "progress=false"])
    keys, lrs = jax.random.split(jax.random.PRNGKey(0), 2), jnp.array([1e-3, 3e-3])
    assert batched_lapack_calls(make_sweep(cfg, env=make_env(cfg)).lower(keys, lrs).as_text()) == 0
