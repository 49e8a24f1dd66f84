#!/usr/bin/env bash
# The lowest supported versions, tested: a second venv with pyproject.toml's lower bounds pinned
# (tests/min-versions.txt), then the API and env suites (the files below) in it.
#
#   bash tests/min_versions.sh [PYTEST_ARGS...]      # e.g. -x; MIN_VENV=DIR picks the venv (default /tmp/nexus-jax-min-venv)
#
# Needs PyPI (the install) and python3.11 (requires-python's floor; PYTHON=... for another). Prints the installed versions,
# then the suites' summary; the exit status is pytest's. Takes ~10-15 min on 2 CPU cores (install ~2 min).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${MIN_VENV:-/tmp/nexus-jax-min-venv}
"${PYTHON:-python3.11}" -m venv --clear "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q -c tests/min-versions.txt -e ".[dev]"
echo "== installed (pins: tests/min-versions.txt)"
"$venv/bin/python" -m pip freeze --exclude-editable | grep -iE "^($(grep -v '^#' tests/min-versions.txt | cut -d= -f1 | paste -sd'|'))=="
SUITES=(tests/test_api.py tests/test_nexus_env.py tests/test_crisis_env.py tests/test_wrappers.py tests/test_ppo.py
        tests/test_checkpoint.py tests/test_imports.py tests/test_min_versions.py)
JAX_PLATFORMS=cpu NEXUS_JAX_TEST_CACHE="$venv/xla_cache" "$venv/bin/python" -m pytest "${SUITES[@]}" -n 2 --dist loadfile \
  -p no:cacheprovider "$@"
