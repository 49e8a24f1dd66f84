#!/usr/bin/env bash
# The accelerator run from a checkout, one command (about 8 minutes on one GPU): `python -m bench.device`
# (its docstring says what it measures); prints the table and writes bench/results/device.json.
#
#   bash bench/device.sh [bench.device arguments ...]
#
# The host needs jax with its accelerator plugin. What else the run imports (flax, optax, distrax, chex,
# jaxmarl for MPE, and theirs) is bench/device-requirements.txt. On a host without internet: fetch those
# wheels elsewhere for the host's Python (`bash bench/device_wheels.sh --python 3.X`), bring bench/wheels/
# along, and this script installs them offline (pip --no-index --no-deps) when an import is missing.
# DEVICE_WHEELS=DIR reads them from DIR instead; NEXUS_DEVICE_ALLOW_CPU=1 runs on the CPU (the toy-size test).
set -euo pipefail
cd "$(dirname "$0")/.."
wheels=${DEVICE_WHEELS:-bench/wheels}
if ! missing=$(python -c "import bench.device, jaxmarl" 2>&1); then
  if [[ ! -d $wheels ]]; then
    echo "bench/device.sh: $(tail -n 1 <<<"$missing"); the run needs bench/device-requirements.txt: pip install -r" \
         "bench/device-requirements.txt, or offline: bash bench/device_wheels.sh --python 3.X elsewhere, then bring" \
         "bench/wheels/ here" >&2
    exit 2
  fi
  echo "bench/device.sh: installing bench/device-requirements.txt from $wheels (offline)"
  python -m pip install --quiet --no-index --no-deps --find-links "$wheels" -r bench/device-requirements.txt
fi
backend=$(python -c "import jax; print(jax.default_backend())")
if [[ $backend == cpu && ${NEXUS_DEVICE_ALLOW_CPU:-0} != 1 ]]; then
  echo "bench/device.sh: jax sees no accelerator here (backend cpu): the sweep would be a CPU run" \
       "(NEXUS_DEVICE_ALLOW_CPU=1 runs it anyway, at toy sizes for a test)" >&2
  exit 2
fi
exec python -m bench.device "$@"
