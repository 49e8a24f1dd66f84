"""What the command-line entry points share: process-wide JAX settings, a record of the machine, JSON reports."""
from __future__ import annotations

import json
import os
import platform
from pathlib import Path

import jax
import numpy as np

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

def machine() -> dict:
    """What the numbers were measured on (load matters on a shared machine)."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "cpu_count": os.cpu_count(),
        "load_average_1_5_15": [round(x, 2) for x in load],
    }
def write_report(path, report, indent: int = 1) -> Path:
    """Write `report` as JSON to `path` (its folder created) and say so: every bench and experiment script's output file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=indent))
    print(f"wrote {path}")
    return path


def jsonable(x):
    """`x` with numpy scalars and arrays as plain Python (non-finite floats as None), keys starting with `_` dropped."""
    if isinstance(x, dict):
        return {k: jsonable(v) for k, v in x.items() if not str(k).startswith("_")}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (np.floating, float)):
        return None if not np.isfinite(x) else float(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    return x
