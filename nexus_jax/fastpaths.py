"""Which form of the step's XLA:CPU fast paths is traced: the fast one where it was measured faster, plain JAX elsewhere.

nexus-v0's step has three kinds of code written for XLA:CPU (docs/performance.md):
- `base/batch_minor.py`: `vmap(env.step)` evaluated with the batch as the minor axis (plain: `jax.vmap`);
- `envs/nexus/noise.py`: JAX's threefry hash written out unrolled (plain: `jax.random`);
- `envs/nexus/arith.py`: lookups as select chains, values stored once, transposes through uint8, counts
  as running adds (plain: `jnp` indexing, `.at[].set`, `jnp.cumsum`, `.T`).
Each fast form gives the plain form's values bit for bit (tests/test_fastpaths.py). They were measured
faster on XLA:CPU only, so they are used only there until a device run shows otherwise. Not switched:
the order of the step's float sums (`arith.small_sum`): written out as adds, it is part of the values
(an episode's bits do not depend on how many envs run beside it), on every backend.

The switch is the environment variable `NEXUS_JAX_FAST_PATHS`:
- `auto` (the default): fast where the platform programs are traced for is one of MEASURED_ON (CPU);
- `on`: fast everywhere; `off`: plain everywhere.
`set_mode` sets it in-process (`use` for a block); `describe()` says what is in effect and why.
The choice is read when a function is traced: a function already compiled keeps its program, so
switch before the first call (or make a new env: `env.step` is jitted per env object).
"""
from __future__ import annotations

import contextlib
import os
import warnings

import jax

ENV_VAR = "NEXUS_JAX_FAST_PATHS"
MODES = ("auto", "on", "off")
MEASURED_ON = frozenset({"cpu"})  # platforms where the fast forms were measured faster

_mode: str | None = None  # set_mode's; None: the environment variable's
_fallbacks: dict[str, str] = {}  # fast path -> why it fell back to plain JAX in this process


def _checked(value: str, source: str) -> str:
    mode = value.strip().lower()
    if mode not in MODES:
        raise ValueError(f"{source}={value!r}: the fast-path mode is one of {', '.join(MODES)}")
    return mode


def mode() -> str:
    """The requested mode: `set_mode`'s, else $NEXUS_JAX_FAST_PATHS, else "auto"."""
    if _mode is not None:
        return _mode
    return _checked(os.environ.get(ENV_VAR, "auto") or "auto", ENV_VAR)


def set_mode(value: str | None) -> None:
    """Force "on" or "off", or "auto"; None returns to $NEXUS_JAX_FAST_PATHS. Affects functions traced afterwards."""
    global _mode
    _mode = None if value is None else _checked(value, "set_mode")


@contextlib.contextmanager
def use(value: str):
    """`set_mode(value)` for the functions traced inside the block, then the previous setting."""
    global _mode
    previous = _mode
    set_mode(value)
    try:
        yield
    finally:
        _mode = previous


def platform() -> str:
    """The platform a program traced now runs on by default: `jax.default_device`'s if set, else the default
    backend's. (A program jitted for another device explicitly is not seen; force the mode for it.)"""
    device = jax.config.jax_default_device
    if device is None:
        return jax.default_backend()
    return device if isinstance(device, str) else device.platform


def enabled() -> bool:
    """Trace the fast forms now? ("on"; or "auto" on a platform in MEASURED_ON.)"""
    requested = mode()
    return requested == "on" or (requested == "auto" and platform() in MEASURED_ON)


def fell_back(path: str, reason: str) -> None:
    """Record that fast path `path` is unusable in this process (a JAX API it relies on is missing or changed),
    and warn once for it; its callers then trace the plain form."""
    if path in _fallbacks:
        return
    _fallbacks[path] = reason
    warnings.warn(f"nexus_jax: the {path} fast path is unavailable with jax {jax.__version__} ({reason}); "
                  f"using plain JAX for it (same values, possibly slower on CPU)", RuntimeWarning, stacklevel=3)


def fallbacks() -> dict[str, str]:
    """Fast paths that fell back to plain JAX in this process, with the reason."""
    return dict(_fallbacks)


def describe() -> str:
    """One line: the mode, where it came from, the platform, and whether the fast forms are traced."""
    source = "set_mode" if _mode is not None else f"${ENV_VAR}" if os.environ.get(ENV_VAR) else "default"
    state = "fast" if enabled() else "plain"
    line = (f"fast paths: {mode()} ({source}); platform {platform()}; tracing the {state} forms "
            f"(measured faster on: {', '.join(sorted(MEASURED_ON))})")
    if _fallbacks:
        line += "; fell back to plain: " + "; ".join(f"{k} ({v})" for k, v in _fallbacks.items())
    return line
