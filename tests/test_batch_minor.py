"""base/batch_minor.py: `vmap` of a `batch_minor` function gives `jax.vmap`'s values, bit for bit.

Each rule of the batch-minor evaluator is checked against `jax.vmap` on a small function that
uses it (values, shapes and dtypes), with the batch in every position a caller can give it
(batched or shared arguments, nested vmaps); then the env step itself, over episodes that end.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jax.extend import core as jcore
from jax.extend import source_info_util

import nexus_jax
from nexus_jax.envs.nexus.env import MASKS_BATCH_MINOR_FROM
from bench.env_throughput import multiagent_env_run
from nexus_jax.base import batch_minor as bm

B = 5


def _args(key, shapes):
    out = []
    for i, (shape, dtype) in enumerate(shapes):
        k = jax.random.fold_in(key, i)
        if jnp.issubdtype(dtype, jnp.integer):
            out.append(jax.random.randint(k, shape, 0, 4).astype(dtype))
        elif dtype == jnp.bool_:
            out.append(jax.random.bernoulli(k, 0.5, shape))
        else:
            out.append(jax.random.normal(k, shape, dtype) * 10)
    return out


def _same(a, b):
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(la, lb):
        assert x.shape == y.shape and x.dtype == y.dtype
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


F32, I32 = jnp.float32, jnp.int32
CASES = {  # name: (fn over one example, per-example argument shapes)
    "elementwise, implicit broadcasts, scalar predicate": (
        lambda x, y, p: (jnp.where(p, x * 2 - y[:, None], x / 3), jnp.clip(x, y.min(), 2.0), -x ** 2),
        [((3, 4), F32), ((3,), F32), ((), jnp.bool_)]),
    "shapes: broadcast, reshape, squeeze, slice, transpose, rev, pad": (
        lambda x: (jnp.broadcast_to(x[:, None], (3, 2, 4)), x.reshape(2, 6)[:, ::2], x[None, 1:, :3].squeeze(0).T,
                   x[::-1], jnp.pad(x, ((1, 0), (0, 2)), constant_values=7.0)),
        [((3, 4), F32)]),
    "reductions and arg-reductions": (
        lambda x, m, i: (x.max(0), x.min(1), x.argmax(1), x.argmin(0), m.any(1), m.all(0), i.sum(1), i.cumsum(0),
                         x[:, :4].sum(1), x[:2, :2].sum((0, 1))),
        [((3, 5), F32), ((3, 5), jnp.bool_), ((3, 5), I32)]),
    "concatenate and stack with shared operands": (
        lambda x, c: (jnp.concatenate([x, c, x], 0), jnp.stack([x[0], c[0], x[1]], 1)),
        [((2, 3), F32), ((2, 3), F32)]),
    "bitcasts and conversions": (
        lambda x: (jax.lax.bitcast_convert_type(x, jnp.int32), x.astype(jnp.int8), jax.lax.bitcast_convert_type(
            x.astype(jnp.float16), jnp.int16)),
        [((4,), F32)]),
    "gathers: traced index, traced table, both": (
        lambda t, i, j: (t[i], t[:, 2], t[i, j], jnp.take_along_axis(t, jnp.full((4, 1), j), 1),
                         jnp.arange(10.0)[i], t[jnp.array([2, 0, 2])]),
        [((4, 3), F32), ((), I32), ((), I32)]),
    "fallbacks: dot, dynamic slice, scatter, random, cond, sort": (
        lambda x, k, i: (x @ x.T, jax.lax.dynamic_slice(x, (i, 0), (2, 2)), x.at[i].add(1.0),
                         jax.random.split(k), jax.lax.cond(i > 1, lambda: x.sum(), lambda: x.max()), jnp.sort(x, 1)),
        [((3, 3), F32), ((2,), jnp.uint32), ((), I32)]),
    "calls: jit and custom_jvp": (
        lambda x: (jax.jit(lambda y: jnp.tanh(y) + 1)(x), jax.nn.relu(x), jax.nn.softplus(x)),
        [((4,), F32)]),
    "outputs that do not depend on the batch": (
        lambda x: (jnp.zeros(3), x, jnp.arange(4)),
        [((2,), F32)]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_each_rule_gives_vmaps_values(name):
    fn, shapes = CASES[name]
    args = _args(jax.random.PRNGKey(0), [((B,) + s, d) for s, d in shapes])
    _same(jax.jit(jax.vmap(bm.batch_minor(fn)))(*args), jax.jit(jax.vmap(fn))(*args))


def test_shared_arguments_and_nested_vmaps():
    fn, shapes = CASES["gathers: traced index, traced table, both"]
    t, i, j = _args(jax.random.PRNGKey(1), [((2, B) + s, d) for s, d in shapes])
    shared = (0, None, 0)  # one table for every example of the inner vmap
    want = jax.vmap(jax.vmap(fn, in_axes=shared), in_axes=(1, None, 1))(t, i[0, 0], j)
    got = jax.vmap(jax.vmap(bm.batch_minor(fn), in_axes=shared), in_axes=(1, None, 1))(t, i[0, 0], j)
    _same(got, want)


def test_outside_vmap_the_function_itself():
    fn, shapes = CASES["elementwise, implicit broadcasts, scalar predicate"]
    args = _args(jax.random.PRNGKey(2), shapes)
    _same(jax.jit(bm.batch_minor(fn))(*args), fn(*args))


def test_ops_keep_their_source_lines_under_vmap_of_jit():
    """vmap of a jitted caller replays its jaxpr with the source context pinned to the call; the ops of fn still
    name their own lines (errors, the lowered program's locations, bench.profile)."""
    def fn(x):
        return jnp.sin(x) * 2.0  # the line every op below must name

    line = fn.__code__.co_firstlineno + 1
    jaxpr = jax.make_jaxpr(jax.vmap(jax.jit(bm.batch_minor(fn))))(jnp.ones((3, 2)))
    ops = [e for e in _all_eqns(jaxpr.jaxpr) if e.primitive.name in ("sin", "mul")]
    assert ops and all(f":{line}:" in source_info_util.summarize(e.source_info) for e in ops), \
        [source_info_util.summarize(e.source_info) for e in ops]


def _all_eqns(jaxpr):
    for eqn in jaxpr.eqns:
        yield eqn
        for sub in jcore.jaxprs_in_params(eqn.params):
            yield from _all_eqns(sub)


def test_derivatives_are_the_functions_own():
    fn = lambda x, i: jnp.tanh(x) * x[::-1] + i  # noqa: E731
    x, i = jnp.linspace(-2.0, 2.0, 4), jnp.arange(4)
    xs, is_ = jnp.stack([x, 2 * x]), jnp.stack([i, i])

    def derivatives(f):  # unbatched, and under vmap (where the rule runs)
        return (jax.grad(lambda x: f(x, i).sum())(x), jax.grad(lambda x: jax.vmap(f)(x, is_).sum())(xs),
                jax.jacfwd(lambda x: jax.vmap(f)(x, is_))(xs))

    _same(derivatives(bm.batch_minor(fn)), derivatives(fn))


def test_float_sums_short_rows_left_to_right_longer_ones_vmapped():
    """A float sum over at most SHORT_SUM terms is evaluated batch-minor, left to right at every batch size (jax.vmap
    hands 4,096 elements or more to a library that adds in another order); a longer one makes the whole function
    vmapped the normal way, so its bits are jax.vmap's."""
    x = jax.random.normal(jax.random.PRNGKey(3), (4096, 8)) * jnp.logspace(-3, 3, 8)
    short = jax.jit(jax.vmap(bm.batch_minor(lambda r: r[:4].sum())))(x)
    left_to_right = ((x[:, 0] + x[:, 1]) + x[:, 2]) + x[:, 3]
    _same(short, left_to_right)
    _same(jax.jit(jax.vmap(bm.batch_minor(lambda r: r.sum())))(x), jax.jit(jax.vmap(lambda r: r.sum()))(x))
    scale = jnp.logspace(-3, 3, 8)  # a long sum of an unbatched value is bound as it is: no fallback needed
    unbatched_long = lambda r: r[:4].sum() + scale.sum()  # noqa: E731
    _same(jax.jit(jax.vmap(bm.batch_minor(unbatched_long)))(x), jax.jit(jax.vmap(unbatched_long))(x))

    def batched_sum_axes(f):  # the axes of the sums over a batched (2-D) value: (0,) batch-minor, (1,) vmapped
        eqns = _all_eqns(jax.make_jaxpr(jax.vmap(bm.batch_minor(f)))(x).jaxpr)
        return [e.params["axes"] for e in eqns if e.primitive.name == "reduce_sum" and e.invars[0].aval.ndim == 2]
    assert batched_sum_axes(unbatched_long) == [(0,)]
    assert batched_sum_axes(lambda r: r.sum())[-1] == (1,)  # the last one traced: the fallback's


@pytest.mark.parametrize("env_id, kwargs", [
    ("nexus-v0", {}),
    pytest.param("nexus-v0", {"learner_seats": None, "info_mode": "full", "num_agents": 3}, marks=pytest.mark.slow),
    pytest.param("nexus-v2", {}, marks=pytest.mark.slow)], ids=["one-learner", "self-play-full-info", "nexus-v2"])
def test_env_step_is_vmaps_step_bit_for_bit(env_id, kwargs):
    """vmap(env.step) with and without the batch-minor rule, over a batch whose episodes end and restart."""
    steps, batch = 130, 8

    def run(minor):
        env = nexus_jax.make(env_id, max_steps=40, **kwargs)
        env.vmap_batch_minor = minor

        def go(key):
            _, state = jax.vmap(env.reset)(jax.random.split(key, batch))

            def body(state, k):
                ks = jax.random.split(k, len(env.agents) + 1)
                act = {a: jax.random.randint(kk, (batch,), 0, env.action_space(a).n) for a, kk in zip(env.agents, ks[1:])}
                obs, state, rew, done, info = jax.vmap(env.step)(jax.random.split(ks[0], batch), state, act)
                return state, (obs, rew, done, info)
            return jax.lax.scan(body, state, jax.random.split(key, steps))
        return jax.jit(go)(jax.random.PRNGKey(4))

    new, old = run(True), run(False)
    assert int(old[1][2]["__all__"].sum()) >= batch * 3  # episodes ended and restarted
    _same(new, old)


def test_factored_masks_batch_minor_from_n8(monkeypatch):
    """The learner's factored masks run batch-minor under vmap from MASKS_BATCH_MINOR_FROM seats on (not at N = 4),
    with jax.vmap's values."""
    runs = []
    evaluate = bm.evaluate
    monkeypatch.setattr(bm, "evaluate", lambda *a: runs.append(1) or evaluate(*a))
    for n, engaged in ((4, False), (MASKS_BATCH_MINOR_FROM, True)):
        env = nexus_jax.make("nexus-v0", num_agents=n)
        _, state = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(6), 8))
        runs.clear()
        minor = jax.jit(jax.vmap(env.factored_action_masks))(state)
        assert bool(runs) == engaged
        env.vmap_batch_minor = False
        _same(minor, jax.jit(jax.vmap(env.factored_action_masks))(state))


@pytest.mark.slow
def test_env_step_at_n8_is_each_env_stepped_alone_bit_for_bit():
    """N = 8 (float sums over 8 seats and 8 x 8 tables, written by halves: `arith.pairwise_sum`): 64 envs vmapped
    batch-minor give every env's bits as stepped alone. With XLA's reductions the two differed (a reduction over
    4,096 or more elements goes to another kernel that adds in another order), and batch-minor fell back."""
    steps, batch = 30, 64
    env = nexus_jax.make("nexus-v0", num_agents=8, max_steps=12)
    n = env.action_space(env.agents[0]).n

    def run(over_batch):
        def go(key):
            _, state = jax.vmap(env.reset)(jax.random.split(key, batch))

            def body(state, k):
                ks = jax.random.split(k, batch)
                step = lambda k, s: env.step(k, s, {env.agents[0]: jax.random.randint(k, (), 0, n)})  # noqa: E731
                obs, state, rew, done, _ = over_batch(step)(ks, state)
                return state, (obs, rew, done)
            return jax.lax.scan(body, state, jax.random.split(key, steps))
        return jax.jit(go)(jax.random.PRNGKey(5))

    alone = run(lambda f: lambda ks, s: jax.lax.map(lambda a: f(*a), (ks, s)))
    assert int(alone[1][2]["__all__"].sum()) >= batch * 2  # episodes ended and restarted
    _same(run(jax.vmap), alone)


@pytest.mark.parametrize("agents,batch", [pytest.param(4, 512, marks=pytest.mark.slow), pytest.param(8, 1024, marks=pytest.mark.slow)])
def test_env_step_is_deterministic_in_a_vmapped_episode(agents, batch):
    """MPE's harness (`vmap` over whole episodes, the scan inside, XLA lays the carry out batch-minor; the
    observation summed into the carry): the same numbers on every run, and `jax.vmap`'s up to the harness's
    own float sums. A batch-minor `core.step` in this harness read 10-20% off, differently on each run, at
    512 envs (issue 15, eleventh pass: `core.step` is therefore not batch-minor; still so at N = 16 in the
    twelfth)."""
    keys = jax.random.split(jax.random.PRNGKey(7), batch)

    def run(minor):
        env = nexus_jax.make("nexus-v0", num_agents=agents)
        env.vmap_batch_minor = minor
        agent, n = env.agents[0], env.action_space(env.agents[0]).n
        return jax.jit(multiagent_env_run(env, 30, lambda k, state: {agent: jax.random.randint(k, (), 0, n)}))

    minor = run(True)
    first = minor(keys)
    _same(first, minor(keys))
    np.testing.assert_allclose(first, run(False)(keys), rtol=1e-6)
