"""The README's Python examples run as written, each in a fresh process (as a newcomer pastes them)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def test_the_readme_has_an_example_for_each_env():
    assert len(BLOCKS) == 2
    assert 'make("nexus-v2")' in BLOCKS[0] and 'make("crisis-v0")' in BLOCKS[1]


@pytest.mark.parametrize("index, printed", [(0, r"^\(1024, 307\)$"), (1, r"^EDF: \d+\.\d per episode over 1,024 crises$")],
                         ids=["nexus", "crisis"])
def test_readme_example_runs(index, printed, tmp_path):
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", BLOCKS[index]], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert re.match(printed, out.stdout.strip().splitlines()[-1]), out.stdout
