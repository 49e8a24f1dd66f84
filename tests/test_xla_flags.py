"""nexus_jax.xla_flags: the CPU scheduler workaround is applied at import, and a late import (JAX's backend
already started, as `import jaxmarl` does) warns instead of leaving training to hang silently."""
import os
import subprocess
import sys

import pytest

LATE = "import jax; jax.devices(); import nexus_jax"
EARLY = "import nexus_jax, jax, os; jax.devices(); print(os.environ['XLA_FLAGS'])"


def _run(code: str, xla_flags: str = ""):
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": xla_flags, "PYTHONWARNINGS": "default"}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


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
