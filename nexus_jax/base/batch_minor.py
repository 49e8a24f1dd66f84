"""`vmap` with the batch as the minor-most (last) axis of every value inside the function.

`jax.vmap` puts the batch axis first (and moves it there for most primitives). A Nexus step
is a few hundred fusions over (N,), (N, 2) and (N, N) tables; with the batch first, XLA:CPU
loops over the batch outside and over 2-16 elements inside, and each of those kernels costs
~11 ns per env whatever it computes (docs/performance.md). With the batch last, each kernel's
inner loop runs over the batch: contiguous, vectorised, no per-env overhead. `vmap(env.step)` of
nexus-v0 at N = 4 runs 1.27-1.48x faster from 64 to 4,096 envs (2-core CPU, with the transposes
in and out at each step; docs/performance.md).

`batch_minor(fn)` returns `fn` unchanged outside `vmap`; under `vmap` (a `custom_vmap` rule) it
traces `fn` for one example and evaluates that jaxpr with the batch appended as the last axis
of each batched value: elementwise primitives, broadcasts, reshapes, slices, transposes,
reductions, concatenation, gathers and calls (`jit`, custom derivatives: inlined) have rules of
their own here; any other primitive is evaluated by `jax.vmap` over a moved batch axis (the
same values, two transposes). Every rule computes the same element operations as `jax.vmap`.
One thing differs by layout: the order in which XLA:CPU adds a float row (beyond ~5 terms always;
a short row's order is XLA's own too, see `layout_sensitive`). So
a function that sums (more than SHORT_SUM terms), multiplies or cumulates a batched float, or has a
callback, is vmapped the normal way, and the results are bit for bit those of `jax.vmap(fn)`
(tests/test_batch_minor.py). The nexus step writes its long sums out (`arith.pairwise_sum`), so it
runs batch-minor at every N.

It is a fast path (`nexus_jax.fastpaths`): traced only where those are on (XLA:CPU by default);
elsewhere `batch_minor(fn)` is `fn`, and `vmap` batches it as usual. The evaluator reads jaxprs through
JAX's public `jax.extend`, but what it reads (primitive names and their parameters) is JAX's internal
vocabulary: if a JAX release changes it so that a rule fails, that function is vmapped the normal way,
with one warning (`fastpaths.fallbacks()`), never an error. Its one private read (`fresh_tracebacks`,
source lines only) is guarded the same way.

Derivatives are `fn`'s own (a `custom_jvp` around the `custom_vmap`, which has no linearization of
its own). Used by `MultiAgentEnv.step` and nexus-v0's factored masks (from N = 8). Not used by
`core.step` (1.03x; in its harness XLA:CPU's YNNPACK reduction fusion reading the batch-minor buffers
raced: checksums moved from run to run), nor by crisis-v0, whose results were measured with vmap's
bits (docs/design.md).
"""
from __future__ import annotations

import contextlib
import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from nexus_jax import fastpaths

try:  # public, but the least settled of JAX's APIs: without them `batch_minor` is the plain function
    from jax.custom_batching import custom_vmap
    from jax.extend import core as jcore
    from jax.extend import source_info_util
except ImportError as missing:  # tests/test_fastpaths.py imports the package with these hidden
    custom_vmap = jcore = source_info_util = None
    UNAVAILABLE = f"{type(missing).__name__}: {missing}"
else:
    UNAVAILABLE = ""
try:  # unpinning the source context (see `fresh_tracebacks`) has no public API: without it only attribution suffers
    from jax._src import source_info_util as _private_source_info
except ImportError:  # tests/test_fastpaths.py runs without it
    _private_source_info = None

ELEMENTWISE = frozenset("""
    add sub mul div rem pow max min neg sign floor ceil round is_finite exp exp2 log log1p expm1 tanh logistic
    sin cos tan asin acos atan atan2 sinh cosh asinh acosh atanh sqrt rsqrt cbrt abs not and or xor eq ne lt le gt
    ge shift_left shift_right_logical shift_right_arithmetic select_n convert_element_type clamp integer_pow square
    nextafter population_count clz erf erfc erf_inv lgamma digamma real imag conj copy copy_p reduce_precision
""".split())
SAME_PARAMS = frozenset("""
    squeeze reduce_sum reduce_max reduce_min reduce_or reduce_and reduce_prod reduce_xor argmax argmin
    cumsum cumprod cummax cummin cumlogsumexp rev
""".split())  # primitives whose parameters name leading (per-example) axes only: unchanged with a trailing batch
INLINED = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr",
           "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr", "custom_vmap_call": "call"}
SHORT_SUM = 4  # the most terms of a float sum evaluated batch-minor (see layout_sensitive)
ORDERED = frozenset("reduce_sum reduce_prod cumsum cumprod cumlogsumexp".split())  # a float result depends on the order


def batch_minor(fn):
    """`fn` (positional pytree arguments) whose `vmap` evaluates it with the batch as each value's last axis.

    Decided each time it is traced: with the fast paths off (`nexus_jax.fastpaths`) or the APIs above
    missing, it is `fn` itself, and `vmap` batches it the normal way (the same values)."""

    @functools.wraps(fn)
    def dispatch(*args):
        if not fastpaths.enabled():
            return fn(*args)
        if UNAVAILABLE:
            fastpaths.fell_back("batch_minor", UNAVAILABLE)
            return fn(*args)
        return _custom(fn)(*args)

    return dispatch


def _custom(fn):
    """`fn` as a `custom_vmap` with the batch-minor rule, inside a `custom_jvp` that differentiates `fn` itself."""

    @custom_vmap
    def wrapped(*args):
        return fn(*args)

    @wrapped.def_vmap
    def rule(axis_size, in_batched, *args):
        leaves, tree = jax.tree.flatten(args)
        flags = jax.tree.leaves(in_batched)
        example = [jax.ShapeDtypeStruct(x.shape[1:] if b else x.shape, x.dtype) for x, b in zip(leaves, flags)]
        closed, out_tree = trace(fn, tree, tuple(example))
        moved = [jnp.moveaxis(x, 0, -1) if b else x for x, b in zip(leaves, flags)]
        try:
            if closed.effects:  # callbacks and the like: keep jax.vmap's semantics
                raise OrderByLayout("effects")
            outs = evaluate(closed.jaxpr, closed.consts, moved, flags, axis_size)
        except OrderByLayout:  # see the module's docstring; what was traced so far is dead code
            return plain_vmap(fn, tree, leaves, flags)
        except Exception as error:  # noqa: BLE001  `fn` itself traced above: this is the evaluator meeting a
            fastpaths.fell_back("batch_minor", f"{type(error).__name__}: {error}")  # jaxpr it does not know
            return plain_vmap(fn, tree, leaves, flags)
        values = [jnp.moveaxis(x, -1, 0) if b else x for x, b in outs]
        return jax.tree.unflatten(out_tree, values), jax.tree.unflatten(out_tree, [b for _, b in outs])

    @jax.custom_jvp
    def differentiable(*args):
        return wrapped(*args)

    @differentiable.defjvp
    def jvp(primals, tangents):  # `custom_vmap` has no linearization of its own: differentiate `fn` itself
        return jax.jvp(fn, primals, tangents)

    return differentiable


def plain_vmap(fn, tree, leaves: list, batched: list):
    """`jax.vmap(fn)` over the flattened arguments (batch first) -> (outputs, every output batched)."""
    out = jax.vmap(lambda *a: fn(*jax.tree.unflatten(tree, a)), in_axes=[0 if b else None for b in batched])(*leaves)
    return out, jax.tree.map(lambda _: True, out)


class OrderByLayout(Exception):
    """`fn` reduces a batched float in an order XLA picks by layout (`layout_sensitive`): vmap it the normal way."""


def layout_sensitive(eqn, vals: list, batched: list) -> bool:
    """A float sum of more than SHORT_SUM terms (rewards at N = 8 came out 1 ulp apart), product or cumulative
    sum, of a batched value. The same reduction of an unbatched value is bound as it is, as `jax.vmap` binds it.

    Sums of up to SHORT_SUM terms are evaluated batch-minor, but their order is XLA:CPU's, not guaranteed to be
    one: a standalone 4-term row is added as (0+2)+(1+3), and a product fused into it may become FMAs. The
    nexus step's one such sum (the N <= 4 shock total) gives vmap's bits in env.step (tested) but not in a
    batch-minor `core.step` (docs/design.md, "Writing the step for XLA:CPU"); a new function with such a sum needs that check."""
    name = eqn.primitive.name
    if name not in ORDERED or not any(b and jnp.issubdtype(x.dtype, jnp.inexact) for x, b in zip(vals, batched)):
        return False
    return name != "reduce_sum" or int(np.prod([vals[0].shape[a] for a in eqn.params["axes"]])) > SHORT_SUM


def trace(fn, tree, example: tuple):
    """(closed jaxpr of fn for one example, its output treedef). Traced anew on each call of the rule (once
    per trace of the program around it): a cache would keep values that `fn` closes over alive.

    Traced with fresh tracebacks: when a transformation replays an enclosing jaxpr (vmap of a jit), it pins the
    source context to the replayed call's traceback, and every op of fn would carry the call's line (in errors,
    in the lowered program's locations and so in bench.profile)."""
    flat = lambda *leaves: fn(*jax.tree.unflatten(tree, leaves))  # noqa: E731
    with fresh_tracebacks():
        closed, shape = jax.make_jaxpr(flat, return_shape=True)(*example)
    return closed, jax.tree.structure(shape)


_unpinned_warned = []  # the fallback below warns once per process


@contextlib.contextmanager
def fresh_tracebacks():
    """Ops traced inside record their own tracebacks, not a pinned one. jax has no public way to unpin the source
    context (`user_context(None)` keeps the pinned traceback), so this sets jax's private one; where a JAX release
    moved it, the ops keep the pinned traceback (the same program: only its source lines suffer), with one warning."""
    try:
        context = _private_source_info._source_info_context
        pinned = context.context
        fresh = pinned.__class__(None, pinned.name_stack)
    except Exception as error:  # noqa: BLE001  (no module, or its internals changed)
        if not _unpinned_warned:
            _unpinned_warned.append(error)
            warnings.warn(f"nexus_jax.batch_minor: cannot give traced ops their own source lines with jax "
                          f"{jax.__version__} ({type(error).__name__}: {error}); they name the call instead",
                          RuntimeWarning, stacklevel=3)
        yield
        return
    context.context = fresh
    try:
        yield
    finally:
        context.context = pinned


def evaluate(jaxpr, consts, args, batched, size: int) -> list:
    """Evaluate `jaxpr` over (value, batched) pairs; a batched value has the batch of `size` as its last axis."""
    env = {}

    def read(v):
        if isinstance(v, jcore.Literal):
            return jnp.asarray(v.val, v.aval.dtype), False
        return env[v]

    env.update({v: (jnp.asarray(c, v.aval.dtype), False) for v, c in zip(jaxpr.constvars, consts)})  # may be Python scalars
    env.update({v: (a, b) for v, a, b in zip(jaxpr.invars, args, batched)})
    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        with source_info_util.user_context(eqn.source_info.traceback, name_stack=eqn.source_info.name_stack):
            outs = apply(eqn, [x for x, _ in ins], [b for _, b in ins], size)  # the ops keep fn's source lines
        for v, out in zip(eqn.outvars, outs):
            env[v] = out
    return [read(v) for v in jaxpr.outvars]


def apply(eqn, vals: list, batched: list, size: int) -> list:
    """One equation -> [(value, batched)] for its outputs."""
    prim, params = eqn.primitive, dict(eqn.params)
    if not any(batched):
        out = prim.bind(*vals, **params)
        return [(o, False) for o in (out if prim.multiple_results else [out])]
    name = prim.name
    if layout_sensitive(eqn, vals, batched):
        raise OrderByLayout(name)
    if name in INLINED and INLINED[name] in params:
        call = params[INLINED[name]]
        return evaluate(call.jaxpr, call.consts, vals, batched, size)
    out_shape = tuple(eqn.outvars[0].aval.shape)
    if name in ELEMENTWISE:
        return [(prim.bind(*[trailing(x, b, out_shape, size) for x, b in zip(vals, batched)], **params), True)]
    rule = RULES.get(name)
    out = rule(eqn, vals, batched, size, params) if rule else None
    if out is not None:
        return [(out, True)]
    return vmapped(prim, params, vals, batched)


def trailing(x, batched: bool, shape: tuple, size: int):
    """x as a batched value of per-example `shape`; x's per-example shape is `shape`, () or `shape` with
    size-1 axes (the implicit broadcasts lax's binary ops allow)."""
    own = tuple(x.shape[:-1] if batched else x.shape)
    if batched and own == shape:
        return x
    lead = tuple(range(len(own))) if len(own) == len(shape) else ()
    if len(own) != len(shape) and own != ():
        raise ValueError(f"batch_minor: operand of shape {own} for a result of shape {shape}")
    return lax.broadcast_in_dim(x, shape + (size,), lead + ((len(shape),) if batched else ()))


def vmapped(prim, params, vals, batched) -> list:
    """Any primitive: `jax.vmap` over the batch moved to the front, and moved back."""
    moved = [jnp.moveaxis(x, -1, 0) if b else x for x, b in zip(vals, batched)]
    out = jax.vmap(lambda *a: prim.bind(*a, **params), in_axes=[0 if b else None for b in batched])(*moved)
    return [(jnp.moveaxis(o, 0, -1), True) for o in (out if prim.multiple_results else [out])]


def _leading_axes(eqn, vals, batched, size, params):
    """Reductions over leading axes and the like: the parameters stand as they are."""
    return eqn.primitive.bind(vals[0], **params) if len(vals) == 1 else None


def _broadcast_in_dim(eqn, vals, batched, size, params):
    if len(vals) != 1:  # dynamic shapes
        return None
    params["shape"] = tuple(params["shape"]) + (size,)
    params["broadcast_dimensions"] = tuple(params["broadcast_dimensions"]) + (len(params["shape"]) - 1,)
    return eqn.primitive.bind(vals[0], **params)


def _reshape(eqn, vals, batched, size, params):
    if len(vals) != 1 or params.get("dimensions") is not None:
        return None
    params["new_sizes"] = tuple(params["new_sizes"]) + (size,)
    return eqn.primitive.bind(vals[0], **params)


def _slice(eqn, vals, batched, size, params):
    params["start_indices"] = tuple(params["start_indices"]) + (0,)
    params["limit_indices"] = tuple(params["limit_indices"]) + (size,)
    if params.get("strides") is not None:
        params["strides"] = tuple(params["strides"]) + (1,)
    return eqn.primitive.bind(vals[0], **params)


def _transpose(eqn, vals, batched, size, params):
    params["permutation"] = tuple(params["permutation"]) + (len(params["permutation"]),)
    return eqn.primitive.bind(vals[0], **params)


def _join(eqn, vals, batched, size, params):  # concatenate, stack: every operand batched, the axis a leading one
    ops = [trailing(x, b, tuple(v.aval.shape), size) for x, b, v in zip(vals, batched, eqn.invars)]
    return eqn.primitive.bind(*ops, **params)


def _pad(eqn, vals, batched, size, params):
    if batched[1]:  # a per-example padding value
        return None
    params["padding_config"] = tuple(params["padding_config"]) + ((0, 0, 0),)
    return eqn.primitive.bind(vals[0], vals[1], **params)


def _bitcast(eqn, vals, batched, size, params):
    same_width = jnp.dtype(params["new_dtype"]).itemsize == vals[0].dtype.itemsize
    return eqn.primitive.bind(vals[0], **params) if same_width else None


def _gather(eqn, vals, batched, size, params):
    """The batch as a trailing offset axis of the operand (indices shared), or as a batching axis of both."""
    operand, indices = vals
    by_operand, by_indices = batched
    dims = params["dimension_numbers"]
    if by_indices:  # (..., k, B) -> (..., B, k): the index vector stays the last axis; with a shared operand the
        indices = jnp.moveaxis(indices, -1, -2)  # batch is one more index axis, the result's last
    if by_operand and not by_indices:
        dims = dims._replace(offset_dims=tuple(dims.offset_dims) + (len(eqn.outvars[0].aval.shape),))
        params["slice_sizes"] = tuple(params["slice_sizes"]) + (size,)
    elif by_operand:
        dims = dims._replace(operand_batching_dims=tuple(dims.operand_batching_dims) + (operand.ndim - 1,),
                             start_indices_batching_dims=tuple(dims.start_indices_batching_dims) + (indices.ndim - 2,))
        params["slice_sizes"] = tuple(params["slice_sizes"]) + (1,)
    params["dimension_numbers"] = dims
    return eqn.primitive.bind(operand, indices, **params)


RULES = {
    **{name: _leading_axes for name in SAME_PARAMS},
    "broadcast_in_dim": _broadcast_in_dim,
    "reshape": _reshape,
    "slice": _slice,
    "transpose": _transpose,
    "concatenate": _join,
    "stack": _join,
    "pad": _pad,
    "bitcast_convert_type": _bitcast,
    "gather": _gather,
}
