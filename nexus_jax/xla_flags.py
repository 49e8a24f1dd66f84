"""XLA flags the package and its commands set, in one place; each takes effect only before JAX starts its backend.

`SCHEDULER_OFF` (applied by `import nexus_jax`): XLA:CPU's concurrency-optimized scheduler
can deadlock at run time on our vmapped training programs (a PPO sweep hangs in
`block_until_ready` with every XLA thread idle; reproduced with jax/jaxlib 0.10.2 on 2
cores). Turning that scheduler off removes the hang at no measurable cost.

`FAST_COMPILE` (the tests, `python -m train.pipeline` with `xla_fast_compile`, `bench/scaling.py
--fast-compile`): XLA:CPU options that cut compile time 3-4x (measured on the Nexus step) at
some cost in run time; worth it where compilation dominates (small shapes, a loaded machine).

`add` never overrides a flag the user has already set in `XLA_FLAGS`. When JAX's backend has
already started at `import nexus_jax` (a script that imports jaxmarl, which starts it, before
nexus_jax), the workaround cannot take effect any more: `apply` then warns, naming the fix,
instead of leaving a run to hang without a word.
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
    """Has JAX already initialised a backend in this process (so XLA_FLAGS are read and fixed)?"""
    bridge = sys.modules.get("jax._src.xla_bridge")
    return bool(getattr(bridge, "_backends", None))


def apply() -> None:
    """The package's own workaround (see above); `import nexus_jax` calls it."""
    name = SCHEDULER_OFF.split("=", 1)[0]
    already = name in os.environ.get("XLA_FLAGS", "")
    add(SCHEDULER_OFF)
    if not already and backend_started():
        warnings.warn(
            f"nexus_jax was imported after JAX started its backend (e.g. after `import jaxmarl`), so its "
            f"XLA:CPU workaround {SCHEDULER_OFF} cannot apply in this process; vmapped training on CPU can "
            f"then hang. Import nexus_jax first, or set XLA_FLAGS='{SCHEDULER_OFF}' before starting Python.",
            RuntimeWarning, stacklevel=3)
