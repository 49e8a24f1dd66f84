"""Process-wide JAX settings the command-line entry points share (one place, not one copy per command)."""
from __future__ import annotations

import os
from pathlib import Path

import jax

from nexus_jax import xla_flags


def enable_compilation_cache(path: str | None = None) -> None:
    """Persist XLA compilations across runs (a re-run and `train.evaluate` reuse them).

    The folder is `path`, else `$NEXUS_JAX_CACHE`, else ~/.cache/nexus_jax_xla.
    """
    path = path or os.environ.get("NEXUS_JAX_CACHE", str(Path.home() / ".cache" / "nexus_jax_xla"))
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


def use_fast_compile() -> None:
    """XLA's fast-compile CPU flags (`nexus_jax.xla_flags.FAST_COMPILE`) for this process, on CPU only.

    XLA reads them when its backend starts: call before the first JAX array is built.
    """
    if os.environ.get("JAX_PLATFORMS", "cpu") == "cpu":
        xla_flags.add(xla_flags.FAST_COMPILE)
