"""XLA flags the package and its commands set, in one place; each takes effect only before JAX starts its backend.

`SCHEDULER_OFF` (applied by `import nexus_jax`): XLA:CPU's concurrency-optimized scheduler
can deadlock at run time on our vmapped training programs (a PPO sweep hangs in
`block_until_ready` with every XLA thread idle; reproduced with jax/jaxlib 0.10.2 on 2
cores). Turning that scheduler off removes the hang at no measurable cost.

`FAST_COMPILE` (the tests, `python -m train.pipeline` with `xla_fast_compile`, `bench/scaling.py
--fast-compile`): XLA:CPU options that cut compile time 3-4x (measured on the Nexus step) at
some cost in run time; worth it where compilation dominates (small shapes, a loaded machine).

`add` never overrides a flag the user has already set in `XLA_FLAGS`.
"""
import os

SCHEDULER_OFF = "--xla_cpu_enable_concurrency_optimized_scheduler=false"
FAST_COMPILE = "--xla_cpu_use_fusion_emitters=false --xla_backend_optimization_level=0"


def add(flags: str) -> None:
    """Append each `--name=value` of `flags` to `XLA_FLAGS` unless `--name` is already there."""
    current = os.environ.get("XLA_FLAGS", "")
    for flag in flags.split():
        if flag.split("=", 1)[0] not in current:
            current = f"{current} {flag}".strip()
    os.environ["XLA_FLAGS"] = current


def apply() -> None:
    """The package's own workaround (see above); `import nexus_jax` calls it."""
    add(SCHEDULER_OFF)
