#!/usr/bin/env bash
# One accelerator run (<= ~8 min on a single GPU): env-steps/s for B = 2^10..2^20 at N=4 and N=16,
# and a short PPO run's rate (bench/device.py; the table is printed and written to
# bench/results/device.json). The host needs jax with its accelerator plugin installed.
set -euo pipefail
cd "$(dirname "$0")/.."
backend=$(python -c "import jax; print(jax.default_backend())")
if [[ "$backend" == "cpu" ]]; then
  echo "bench/device.sh: jax sees no accelerator here (backend cpu); the sweep would be a CPU run" >&2
  exit 2
fi
python -m bench.device "$@"
