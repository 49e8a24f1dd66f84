"""Checks for one params field: kind, shape, finiteness and range, before any array is made.

Every env's `Params.create` runs its overrides through `check` (or `static_int` /
`static_grid` for the shape-giving fields), so a bad value fails at construction with a
message naming the field, the value and what was expected, instead of a NumPy error, a
broadcasting error at the first step, or a silently reinterpreted value. Wrong kinds of value
(a string, a dict, None, a bool for a number) raise TypeError; right kinds with a bad shape
or range raise ValueError.

`param` declares a params field with its meaning and origin as dataclass metadata, which the
documentation's params tables are generated from.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Any

import numpy as np
from flax import struct

INT32_MAX = int(np.iinfo(np.int32).max)
INT32_MIN = int(np.iinfo(np.int32).min)
INT64_MAX, INT64_MIN = int(np.iinfo(np.int64).max), int(np.iinfo(np.int64).min)
FLOAT32_MAX = float(np.finfo(np.float32).max)
FLOAT32_TINY = float(np.finfo(np.float32).tiny)  # smallest normal float32
_KIND_WORDS = {"float": "a real number", "int": "an integer", "bool": "a bool"}
_PLURAL = {"float": "real numbers", "int": "integers", "bool": "bools"}
_MAX_DEPTH = 4  # params are at most 2-D; deeper nesting is a mistake, not data
# Where a params field's default comes from: the env's original write-up or code, SPEC.md, or our decision.
ORIGINS = ("seed", "spec", "ours")


def param(default: Any, origin: str, doc: str, *, static: bool = False):
    """A params dataclass field carrying its meaning: `metadata["doc"]` (one line) and `metadata["origin"]`
    (one of ORIGINS). `static=True` marks a shape-giving field (`pytree_node=False`: part of the treedef,
    so changing it recompiles); every other field is a traced leaf a sweep can vmap over."""
    if origin not in ORIGINS:
        raise ValueError(f"param origin must be one of {ORIGINS}, got {origin!r}")
    if not doc or "\n" in doc:
        raise ValueError(f"param doc must be one non-empty line, got {doc!r}")
    return struct.field(pytree_node=not static, default=default, metadata={"doc": doc, "origin": origin})


@dataclasses.dataclass(frozen=True)
class Field:
    """What one field accepts: `kind` ("float", "int" or "bool"), `shape` (ints, or names
    resolved from the dims given to `check`), and an optional closed range [lo, hi]
    (`lo_open`: the lower end is excluded)."""

    kind: str = "float"
    shape: tuple = ()
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False

    def expected(self, dims: dict) -> str:
        """Human-readable description, e.g. 'an integer >= 1' or 'an array of shape (6, 2) of real numbers >= 0'."""
        rng = ""
        if self.lo is not None and self.hi is not None:
            rng = f" in {'(' if self.lo_open else '['}{_num(self.lo)}, {_num(self.hi)}]"
        elif self.lo is not None:
            rng = f" {'>' if self.lo_open else '>='} {_num(self.lo)}"
        elif self.hi is not None:
            rng = f" <= {_num(self.hi)}"
        shape = resolve_shape(self.shape, dims)
        if shape == ():
            return f"{_KIND_WORDS[self.kind]}{rng}"
        return f"an array of shape {shape} of {_PLURAL[self.kind]}{rng}"


def _num(x) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def show(value: Any, limit: int = 80) -> str:
    """repr of a value, shortened: messages stay one line."""
    text = repr(value).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def resolve_shape(shape: tuple, dims: dict) -> tuple:
    return tuple(dims[d] if isinstance(d, str) else d for d in shape)


class FieldError:
    """Raises the two error kinds with the shared message format `<owner>.<field>: <msg>`."""

    def __init__(self, owner: str):
        self.owner = owner

    def value(self, field: str, msg: str):
        raise ValueError(f"{self.owner}.{field}: {msg}")

    def type(self, field: str, msg: str):
        raise TypeError(f"{self.owner}.{field}: {msg}")


def _scan(value: Any, kind: str, fail, field: str, expected: str, depth: int = 0) -> None:
    """Reject what NumPy would coerce silently: strings, mappings, None, bools as numbers, objects."""
    if depth > _MAX_DEPTH:
        fail.value(field, f"expected {expected}, got a sequence nested deeper than {_MAX_DEPTH} levels")
    if isinstance(value, (list, tuple)):
        for v in value:
            _scan(v, kind, fail, field, expected, depth + 1)
        return
    if isinstance(value, (bool, np.bool_)):
        if kind != "bool":
            fail.type(field, f"expected {expected}, got the bool {value!r} (bools are not numbers)")
        return
    if isinstance(value, np.ndarray) or hasattr(value, "__array__") and hasattr(value, "dtype"):
        dt = np.dtype(value.dtype)
        ok = {"float": "fiu", "int": "iuf", "bool": "b"}[kind]
        if dt.kind not in ok:
            fail.type(field, f"expected {expected}, got an array of dtype {dt}: {show(value)}")
        return
    if kind == "bool" or not isinstance(value, numbers.Real):
        fail.type(field, f"expected {expected}, got {type(value).__name__} {show(value)}")
    if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:  # NumPy would make an object array
        fail.value(field, f"expected {expected}, got {show(value)}, beyond int64 (and int32)")


def check(fail: FieldError, field: str, value: Any, spec: Field, dims: dict | None = None) -> np.ndarray:
    """-> `value` as a NumPy array of the field's dtype (float32, int32 or bool), or raise naming the field."""
    dims = dims or {}
    expected = spec.expected(dims)
    _scan(value, spec.kind, fail, field, expected)
    try:
        raw = np.asarray(value)
    except (ValueError, TypeError) as e:  # ragged nesting
        fail.value(field, f"expected {expected}, got {show(value)} ({e})")
    if raw.dtype == object:
        fail.type(field, f"expected {expected}, got {show(value)}")
    shape = resolve_shape(spec.shape, dims)
    if raw.shape != shape:
        what = "a scalar" if shape == () else f"shape {shape}"
        fail.value(field, f"expected {what}, got shape {raw.shape}: {show(value)}")
    if spec.kind == "bool":
        return raw.astype(bool)
    wide = raw.astype(np.float64)
    if not np.all(np.isfinite(wide)):
        fail.value(field, f"expected {expected}, got a non-finite value: {show(value)}")
    if spec.kind == "int":
        if not np.all(wide == np.round(wide)):
            fail.value(field, f"expected {expected}, got a non-integer: {show(value)}")
        if np.any(wide > INT32_MAX) or np.any(wide < INT32_MIN):
            fail.value(field, f"expected {expected}, got {show(value)}, outside int32 [{INT32_MIN}, {INT32_MAX}]")
    elif np.any(np.abs(wide) > FLOAT32_MAX):
        fail.value(field, f"expected {expected}, got {show(value)}, beyond float32 range (overflows to inf)")
    out = raw.astype(np.int32 if spec.kind == "int" else np.float32)
    cmp = out.astype(np.float64)  # compare what will be stored
    if spec.lo is not None and (np.any(cmp <= spec.lo) if spec.lo_open else np.any(cmp < spec.lo)):
        fail.value(field, f"expected {expected}, got {show(value)}")
    if spec.hi is not None and np.any(cmp > spec.hi):
        fail.value(field, f"expected {expected}, got {show(value)}")
    return out


def static_int(fail: FieldError, field: str, value: Any, lo: int, hi: int = INT32_MAX) -> int:
    """A shape-giving int (a Python or NumPy integer, not a bool) in [lo, hi]."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        fail.type(field, f"expected an integer in [{lo}, {hi}], got {type(value).__name__} {show(value)}")
    if not lo <= int(value) <= hi:
        fail.value(field, f"expected an integer in [{lo}, {hi}], got {show(value)}")
    return int(value)


def static_grid(fail: FieldError, field: str, value: Any, min_len: int = 2) -> tuple:
    """A static, strictly increasing grid of float32 values starting at 0 -> tuple of floats."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, np.ndarray)):
        fail.type(field, f"expected a sequence of numbers starting at 0 and increasing, got {show(value)}")
    arr = check(fail, field, list(value) if not isinstance(value, np.ndarray) else value,
                Field("float", (len(value),), lo=0.0))
    grid = tuple(float(x) for x in arr)
    if len(grid) < min_len or grid[0] != 0.0 or any(b <= a for a, b in zip(grid, grid[1:])):
        fail.value(field, f"expected at least {min_len} numbers starting at 0 and strictly increasing "
                          f"(in float32), got {show(value)}")
    return grid


def finite_bound(fail: FieldError, field: str, bound: float, what: str, cap: float = 1e30) -> None:
    """Fail when a derived magnitude (e.g. the largest observation value) is beyond `cap`."""
    if not math.isfinite(bound) or bound > cap:
        fail.value(field, f"{what} would reach {bound:.3g}, beyond {cap:.0e} (float32 overflows to inf at "
                          f"{FLOAT32_MAX:.3g})")
