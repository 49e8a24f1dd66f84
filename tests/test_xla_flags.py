"""nexus_jax.xla_flags: the CPU scheduler workaround is applied at import, and a late import (JAX's backend
already started, as `import jaxmarl` does) warns instead of leaving training to hang silently. Our own
training programs need no workaround: with jaxmarl imported first, IPPO-FF trains in a fresh process
(experiments/ecosystem/test_jaxmarl_first.py, on the ecosystem study's port of it)."""
import os
import subprocess
import sys
import types

import pytest

from nexus_jax import xla_flags

LATE = "import jax; jax.devices(); import nexus_jax"
EARLY = "import nexus_jax, jax, os; jax.devices(); print(os.environ['XLA_FLAGS'])"


def _run(code: str, flags: str = "", timeout: int = 120):
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": flags, "PYTHONWARNINGS": "default",
           "PYTHONPATH": os.getcwd()}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("code, flags, warns", [
    (LATE, "", True),
    (EARLY, "", False),
    (LATE, "--xla_cpu_enable_concurrency_optimized_scheduler=false", False),  # the user set it: nothing to warn
])
def test_late_import_warns_only_when_the_workaround_is_missing(code, flags, warns):
    out = _run(code, flags)
    assert out.returncode == 0, out.stderr
    assert ("cannot apply in this process" in out.stderr) == warns, out.stderr
    if code == EARLY:
        assert "--xla_cpu_enable_concurrency_optimized_scheduler=false" in out.stdout


def test_backend_started_reads_false_where_jax_moved_its_registry(monkeypatch):
    """The one read of JAX's private state: without it, the answer is False (no warning), never an error."""
    monkeypatch.setitem(sys.modules, "jax._src.xla_bridge", types.SimpleNamespace())
    assert xla_flags.backend_started() is False
    monkeypatch.delitem(sys.modules, "jax._src.xla_bridge")
    assert xla_flags.backend_started() is False
