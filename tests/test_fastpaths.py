"""nexus_jax.fastpaths: one switch picks the XLA:CPU fast forms or plain JAX, and both give the same bits.

The fast forms (batch-minor vmap, the written-out threefry hash, arith's select chains and stored values)
were measured faster on XLA:CPU only, so `auto` traces them there and plain JAX elsewhere. Here both are
traced on CPU (`fastpaths.use`) and compared bit for bit: each arith form, the random draws, batch_minor,
and whole vmapped nexus-v0 episodes (step with auto-reset, NPCs and action masks). A JAX that lacks or
changed what batch_minor reads falls back to `jax.vmap` with one warning, never an error.
"""
import os
import subprocess
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nexus_jax
from nexus_jax import fastpaths
from nexus_jax.base import batch_minor as bm
from nexus_jax.envs.nexus import arith, noise


def _same(a, b):
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        x, y = np.asarray(x), np.asarray(y)
        assert x.shape == y.shape and x.dtype == y.dtype
        np.testing.assert_array_equal(x.view(np.uint8), y.view(np.uint8))  # bits: -0.0 and NaNs included


def _fresh(fn):
    """A new function object calling `fn`: JAX caches traces by function, and the mode is read only when tracing."""
    return lambda *a: fn(*a)


def _both(fn, *args):
    """(fast, plain) results of jit(fn)(*args), each traced under its own mode."""
    out = []
    for mode in ("on", "off"):
        with fastpaths.use(mode):
            out.append(jax.jit(_fresh(fn))(*args))
    return out


def _primitives(fn, *args, mode: str) -> set:
    with fastpaths.use(mode):
        jaxpr = jax.make_jaxpr(_fresh(fn))(*args)
    names, todo = set(), [jaxpr.jaxpr]
    while todo:
        j = todo.pop()
        for eqn in j.eqns:
            names.add(eqn.primitive.name)
            todo.extend(jax.extend.core.jaxprs_in_params(eqn.params))
    return names


def test_the_switch_reads_the_environment_and_set_mode(monkeypatch):
    monkeypatch.delenv(fastpaths.ENV_VAR, raising=False)
    assert fastpaths.mode() == "auto" and fastpaths.platform() == "cpu" and fastpaths.enabled()
    assert "auto (default); platform cpu; tracing the fast forms" in fastpaths.describe()
    monkeypatch.setenv(fastpaths.ENV_VAR, "off")
    assert not fastpaths.enabled() and "off ($NEXUS_JAX_FAST_PATHS)" in fastpaths.describe()
    with fastpaths.use("on"):
        assert fastpaths.enabled() and "on (set_mode)" in fastpaths.describe()
    assert not fastpaths.enabled()
    monkeypatch.setenv(fastpaths.ENV_VAR, "fast")
    with pytest.raises(ValueError, match="NEXUS_JAX_FAST_PATHS='fast'.*auto, on, off"):
        fastpaths.enabled()
    with pytest.raises(ValueError, match="set_mode='yes'"):
        fastpaths.set_mode("yes")


def test_auto_is_fast_only_where_measured(monkeypatch):
    monkeypatch.delenv(fastpaths.ENV_VAR, raising=False)
    monkeypatch.setattr(fastpaths, "platform", lambda: "gpu")
    assert not fastpaths.enabled() and "platform gpu; tracing the plain forms" in fastpaths.describe()
    with fastpaths.use("on"):
        assert fastpaths.enabled()
    monkeypatch.undo()
    with jax.default_device(jax.devices("cpu")[0]):
        assert fastpaths.platform() == "cpu"


def test_arith_forms_are_their_plain_jnp_forms():
    k = jax.random.split(jax.random.PRNGKey(0), 6)
    table = jax.random.normal(k[0], (5, 3))
    idx = jax.random.randint(k[1], (8, 4), -1, 7)  # some out of range: pick gives table[0], pick_shared 0
    x = jax.random.normal(k[2], (8, 4, 2)).at[0, 0, 0].set(-0.0)
    counts = jax.random.randint(k[3], (8, 20), 0, 3)
    flags = jax.random.bernoulli(k[4], 0.5, (8, 16, 16))
    col = jax.random.randint(k[5], (8,), 0, 2)
    values = [jnp.full((4,), 3), jnp.arange(4), -jnp.arange(4), jnp.ones((4,), jnp.int32) * 9]
    cases = {  # name: (function, arguments): arguments, not constants, so XLA cannot fold them away
        "pick": (jax.vmap(arith.pick, (None, 0)), (table, idx)),
        "pick_shared": (lambda i, *v: arith.pick_shared(list(v), i), (idx, *values)),
        "column": (jax.vmap(arith.column), (x, col)),
        "set_column": (jax.vmap(lambda v, c: arith.set_column(v, c, v[..., 0] * 2)), (x, col)),
        "small_cumsum": (lambda c: (arith.small_cumsum(c[:, :10], 1), arith.small_cumsum(c, 1)), (counts,)),
        "min_resource": (arith.min_resource, (x,)),
        "materialize": (lambda v, f: (arith.materialize(v), arith.materialize(f), arith.materialize_large(f)),
                        (x, flags)),
        "flags_t": (jax.vmap(arith.flags_t), (flags,)),
    }
    for name, (fn, args) in cases.items():
        fast, plain = _both(fn, *args)
        _same(fast, plain)
    ops = {mode: {name: _primitives(fn, *args, mode=mode) for name, (fn, args) in cases.items()} for mode in ("on", "off")}
    assert "gather" in ops["off"]["pick"] and "gather" not in ops["on"]["pick"]
    assert "scatter" in ops["off"]["set_column"] and "scatter" not in ops["on"]["set_column"]
    assert "reduce_max" in ops["on"]["materialize"] and "reduce_max" not in ops["off"]["materialize"]


@pytest.mark.parametrize("make_key", [jax.random.PRNGKey, jax.random.key], ids=["raw", "typed"])
def test_random_draws_plain_form_is_jax_random(make_key):
    keys = jax.vmap(lambda k: jax.random.split(k, 3))(jax.random.split(make_key(1), 4))
    data = jax.random.key_data if keys.dtype != jnp.uint32 else (lambda k: k)
    draws = [((3,), -1.0, 1.0), ((3,), 0.0, 1.0), ((2, 2), noise.GUMBEL_LOW, 1.0)]

    def draw(ks):
        return data(noise.split(ks[0], 3)), noise.uniform(ks[1], (5,)), noise.uniforms(ks, draws)

    fast, plain = _both(jax.vmap(draw), keys)
    _same(fast, plain)
    assert "random_bits" in _primitives(draw, keys[0], mode="off")
    assert "random_bits" not in _primitives(draw, keys[0], mode="on")


def test_batch_minor_plain_form_is_jax_vmap(monkeypatch):
    runs = []
    evaluate = bm.evaluate
    monkeypatch.setattr(bm, "evaluate", lambda *a: runs.append(1) or evaluate(*a))
    fn = lambda x, i: (jnp.where(x > 0, x * 2, x[::-1]), x[i], x.max())  # noqa: E731
    args = (jax.random.normal(jax.random.PRNGKey(2), (6, 5)), jnp.arange(6) % 5)
    with fastpaths.use("off"):
        plain = jax.jit(jax.vmap(bm.batch_minor(fn)))(*args)
    assert not runs  # the plain form never ran the evaluator
    with fastpaths.use("on"):
        fast = jax.jit(jax.vmap(bm.batch_minor(fn)))(*args)
    assert runs
    _same(fast, plain)
    _same(plain, jax.jit(jax.vmap(fn))(*args))


def test_batch_minor_falls_back_to_vmap_with_one_warning_when_jax_changed(monkeypatch):
    """What the evaluator reads (primitive parameters) is JAX's internal vocabulary: a rule that no longer fits
    is vmapped the normal way (the same values), with one warning per process."""
    def changed(*a):
        raise KeyError("broadcast_dimensions")

    monkeypatch.setattr(bm, "evaluate", changed)
    monkeypatch.setattr(fastpaths, "_fallbacks", {})
    fn = lambda x: jnp.sin(x)[::-1] * 2.0  # noqa: E731
    x = jnp.linspace(-1.0, 1.0, 12).reshape(4, 3)
    with pytest.warns(RuntimeWarning, match="batch_minor fast path is unavailable.*KeyError"):
        got = jax.jit(jax.vmap(bm.batch_minor(fn)))(x)
    _same(got, jax.jit(jax.vmap(fn))(x))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _same(jax.jit(jax.vmap(bm.batch_minor(lambda v: fn(v) + 1.0)))(x), jax.jit(jax.vmap(fn))(x) + 1.0)
    assert "batch_minor" in fastpaths.fallbacks() and "fell back to plain: batch_minor" in fastpaths.describe()


def test_without_jax_private_source_context_only_source_lines_suffer(monkeypatch):
    """The one private JAX module batch_minor reads (to give traced ops their own source lines): without it, the
    same values and one warning."""
    monkeypatch.setattr(bm, "_private_source_info", None)
    monkeypatch.setattr(bm, "_unpinned_warned", [])
    fn = lambda x: jnp.cos(x) * x[::-1]  # noqa: E731
    x = jnp.linspace(-1.0, 1.0, 12).reshape(4, 3)
    with pytest.warns(RuntimeWarning, match="own source lines"):
        got = jax.jit(jax.vmap(jax.jit(bm.batch_minor(fn))))(x)
    _same(got, jax.jit(jax.vmap(fn))(x))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jax.jit(jax.vmap(bm.batch_minor(lambda v: fn(v) - 1.0)))(x)


def test_without_its_jax_apis_batch_minor_is_the_plain_function():
    """A JAX without `jax.custom_batching`: `import nexus_jax` works and batch_minor warns once, then is `fn`."""
    code = """
import sys, warnings
import jax, jax.numpy as jnp
sys.modules["jax.custom_batching"] = None  # as if this JAX had no such module
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    import nexus_jax
    from nexus_jax.base import batch_minor as bm
    out = [jax.vmap(bm.batch_minor(lambda x: x * 2 + 1))(jnp.arange(3.0)) for _ in range(2)]
print(out[1].tolist(), sum("batch_minor fast path is unavailable" in str(w.message) for w in caught))
"""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": os.getcwd()}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["[1.0,", "3.0,", "5.0]", "1"], run.stdout + run.stderr


def _episodes(mode: str, num_agents: int, steps: int = 40, batch: int = 6):
    """Vmapped episodes of nexus-v0 with masked random learner actions (NPCs in the other seats), traced under
    `mode` by a fresh env (a jitted env.step keeps the program of its first trace)."""
    with fastpaths.use(mode):
        env = nexus_jax.make("nexus-v0", num_agents=num_agents, max_steps=15)
        agent = env.agents[0]

        def go(key):
            obs, state = jax.vmap(env.reset)(jax.random.split(key, batch))

            def body(state, k):
                k_act, k_step = jax.random.split(k)
                mask = jax.vmap(env.get_avail_actions)(state)[agent]
                factored = jax.vmap(env.factored_action_masks)(state)
                act = jax.random.categorical(k_act, jnp.where(mask, 0.0, -jnp.inf))
                out = jax.vmap(env.step)(jax.random.split(k_step, batch), state, {agent: act})
                return out[1], (out[0], out[2], out[3], out[4], mask, factored)

            return obs, jax.lax.scan(body, state, jax.random.split(key, steps))

        return jax.jit(go)(jax.random.PRNGKey(num_agents))


@pytest.mark.parametrize("num_agents", [pytest.param(4, marks=pytest.mark.slow), pytest.param(8, marks=pytest.mark.slow)])
def test_nexus_episodes_are_the_same_bits_on_both_paths(num_agents, monkeypatch):
    """The env as the default (fast on CPU) and as every other backend traces it (plain): the same bits for
    every observation, state field, reward, done flag, info entry and mask, over episodes that end and
    restart. N = 8 also runs the factored masks batch-minor and the long sums by halves."""
    runs = []
    evaluate = bm.evaluate
    monkeypatch.setattr(bm, "evaluate", lambda *a: runs.append(1) or evaluate(*a))
    plain = _episodes("off", num_agents)
    assert not runs
    fast = _episodes("on", num_agents)
    assert runs  # the step ran batch-minor
    assert int(fast[1][1][2]["__all__"].sum()) >= 6 * 2  # episodes ended and restarted
    _same(fast, plain)
