"""XLA flags the package and its commands set, in one place; each takes effect only before JAX starts its backend.

`SCHEDULER_OFF` (applied by `import nexus_jax`): with jaxlib 0.10 on CPU, a program that runs
several batched LAPACK calls at once can hang. jaxlib splits a batched LAPACK call (QR, Cholesky,
eigh, ...) over XLA:CPU's thread pool and blocks the pool thread that made it until the parts are
done; XLA:CPU's concurrency-optimized scheduler lets independent calls run together, and once every
pool thread is such a caller, no thread is left to do the parts (every thread asleep, the caller in
`block_until_ready`; docs/performance.md has the smallest program). flax's orthogonal initializer
under `vmap` over seeds makes one batched QR per layer, so a vmapped PPO can hang before its first
update. With this scheduler off the calls ran one after another in every program tried, at no
measurable cost to the env. The env itself makes no LAPACK call, and nexus_jax's trainers draw
their kernels one QR at a time (`train.networks.orthogonal`), so their runs do not depend on it.

`FAST_COMPILE` (the tests, `python -m train.pipeline` with `xla_fast_compile`, `bench/scaling.py
--fast-compile`): XLA:CPU options that cut compile time 3-4x (measured on the Nexus step) at
some cost in run time; worth it where compilation dominates (small shapes, a loaded machine).

`add` never overrides a flag the user has already set in `XLA_FLAGS`. When JAX's backend has
already started at `import nexus_jax` (a script that imports jaxmarl, which starts it, before
nexus_jax), the flag cannot take effect any more, and a per-compile option does not reach the
scheduler (`compiler_options=` leaves its order unchanged): `apply` then warns, naming the fix.
"""
import os
import sys
import warnings

SCHEDULER_OFF = "--xla_cpu_enable_concurrency_optimized_scheduler=false"
FAST_COMPILE = "--xla_cpu_use_fusion_emitters=false --xla_backend_optimization_level=0"


def add(flags: str) -> None:
    """Append each `--name=value` of `flags` to `XLA_FLAGS` unless `--name` is already there."""
    current = os.environ.get("XLA_FLAGS", "")
    for flag in flags.split():
        if flag.split("=", 1)[0] not in current:
            current = f"{current} {flag}".strip()
    os.environ["XLA_FLAGS"] = current


def backend_started() -> bool:
    """Has JAX already initialised a backend in this process (so XLA_FLAGS are read and fixed)?

    JAX has no public way to ask without starting one, so this reads its private backend registry,
    guarded: where a JAX release moved it, the answer is False (the late-import warning is skipped)."""
    bridge = sys.modules.get("jax._src.xla_bridge")  # the module, if JAX loaded it; never imported here
    return bool(getattr(bridge, "_backends", None))


def apply() -> None:
    """The package's own workaround (see above); `import nexus_jax` calls it."""
    name = SCHEDULER_OFF.split("=", 1)[0]
    already = name in os.environ.get("XLA_FLAGS", "")
    add(SCHEDULER_OFF)
    if not already and backend_started():
        warnings.warn(
            f"nexus_jax was imported after JAX started its backend (e.g. after `import jaxmarl`), so its "
            f"XLA:CPU workaround {SCHEDULER_OFF} cannot apply in this process: a vmapped training program "
            f"with several batched LAPACK calls (flax's orthogonal initializer under vmap over seeds) can then "
            f"hang on CPU. Import nexus_jax first, or set XLA_FLAGS='{SCHEDULER_OFF}' before starting Python "
            f"(`python -m nexus_jax.xla_check` tells whether this jax hangs).",
            RuntimeWarning, stacklevel=3)
