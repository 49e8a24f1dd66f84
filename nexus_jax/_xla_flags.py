"""XLA CPU workaround applied before JAX starts its backend.

XLA:CPU's concurrency-optimized scheduler can deadlock at run time on our vmapped training
programs (a PPO sweep hangs in `block_until_ready` with every XLA thread idle; reproduced
with jax/jaxlib 0.10.2 on 2 cores). Turning that scheduler off removes the hang at no
measurable cost. The flag is appended to `XLA_FLAGS` only if the user has not set it, and
only takes effect if no JAX computation has run yet in the process.
"""
import os

_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler"


def apply() -> None:
    flags = os.environ.get("XLA_FLAGS", "")
    if _FLAG not in flags:
        os.environ["XLA_FLAGS"] = (flags + f" {_FLAG}=false").strip()
