"""`python -m nexus_jax.xla_check`: the reproducer of the XLA:CPU hang (flax's orthogonal init under vmap), run
with and without the scheduler flag in fresh processes. The full tier runs it for real and prints its verdict
for the installed jax (in the summary's "verdicts" section, conftest.py); the quick tier checks the verdict's
reading and the child environment without starting a process."""
import os
import subprocess
import sys

import pytest

from nexus_jax import xla_check
from nexus_jax.xla_flags import SCHEDULER_OFF

RETURNED = xla_check.Run("", True, False, 3.0, "")
HUNG = xla_check.Run("", False, True, 30.0, "")
FAILED = xla_check.Run("", False, False, 1.0, "Traceback ...\nModuleNotFoundError: No module named 'flax'")


@pytest.mark.parametrize("default, flag, start", [
    (HUNG, RETURNED, "HANGS"),
    (RETURNED, RETURNED, "does not hang here"),
    (HUNG, HUNG, "no verdict: even with"),
    (FAILED, RETURNED, "no verdict: the program failed (ModuleNotFoundError"),
])
def test_the_verdict_reads_each_outcome(default, flag, start):
    line = xla_check.verdict(xla_check.Result(default, flag, 10, 2, 30.0))
    assert line.startswith(start), line
    if start == "HANGS":  # it names both fixes
        assert "Import nexus_jax before" in line and f"XLA_FLAGS={SCHEDULER_OFF}" in line


def test_the_children_differ_only_in_our_flag():
    base = {"XLA_FLAGS": f"--xla_foo=1 {SCHEDULER_OFF.replace('false', 'true')}", "PATH": "/bin"}
    without, with_flag = xla_check.child_env(False, base), xla_check.child_env(True, base)
    assert without["XLA_FLAGS"] == "--xla_foo=1" and with_flag["XLA_FLAGS"] == f"--xla_foo=1 {SCHEDULER_OFF}"
    assert without["JAX_PLATFORMS"] == with_flag["JAX_PLATFORMS"] == "cpu" and without["PATH"] == "/bin"
    assert xla_check.default_layers() >= max(10, (os.cpu_count() or 1) + 1)


@pytest.mark.slow  # up to --timeout seconds asleep when the installed jax hangs
def test_the_installed_jax_verdict(record_property):
    """The command as a user runs it. Whatever the installed jax does without the flag, with the flag the program
    must return: that is what `import nexus_jax` relies on."""
    out = subprocess.run([sys.executable, "-m", "nexus_jax.xla_check", "--timeout", "60"], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    verdict = lines[-1]
    record_property("verdict", f"nexus_jax.xla_check: {verdict}")
    print(out.stdout)
    assert verdict.startswith("verdict: ") and "scheduler off (ours)" in lines[-2] and "returned" in lines[-2], lines
    assert verdict.startswith(("verdict: HANGS", "verdict: does not hang here")), verdict
