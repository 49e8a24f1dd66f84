"""Process-wide test settings for tests/ and experiments/: XLA's fast-compile flags and a persistent compile cache."""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Tests are compile-bound: XLA's fast-compile CPU options (nexus_jax/xla_flags.py) cost run time that
# small test shapes do not feel. Benchmarks and users keep XLA's defaults.
from nexus_jax.xla_flags import FAST_COMPILE, add  # noqa: E402  (imports no JAX backend)

add(FAST_COMPILE)

import jax  # noqa: E402

# Compilation dominates the suite's time. A persistent cache lets identical programs built by
# different tests (or a re-run) compile once; it holds nothing but XLA executables.
jax.config.update("jax_compilation_cache_dir", os.environ.get("NEXUS_JAX_TEST_CACHE", "/tmp/nexus_jax_xla_cache"))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
