#!/usr/bin/env bash
# Fetches, on a machine with internet, the wheels `bash bench/device.sh` needs on a GPU host that has only
# jax with its CUDA plugin and no internet: every file of bench/device-requirements.txt (a complete, pinned
# list), for the host's Python and platform, into bench/wheels/ (ignored by git).
#
#   bash bench/device_wheels.sh [--python 3.12] [--arch x86_64] [--glibc 2.28] [--dest bench/wheels] [--with-jax]
#
# Defaults: this machine's Python, x86_64, glibc 2.28 (a host running jaxlib >= 0.5 has glibc >= 2.27).
# Copy bench/wheels/ with the checkout; on the host `bash bench/device.sh` installs them offline
# (pip install --no-index --no-deps --find-links bench/wheels -r bench/device-requirements.txt).
# --with-jax also fetches jax, jaxlib and their own dependencies at this machine's versions: a stand-in for
# the host's jax, so tests/test_bench_device.py can build a clean venv offline.
set -euo pipefail
cd "$(dirname "$0")/.."
py=$(python -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
arch=x86_64 glibc=2.28 dest=bench/wheels with_jax=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --python) py=$2; shift 2 ;;
    --arch) arch=$2; shift 2 ;;
    --glibc) glibc=$2; shift 2 ;;
    --dest) dest=$2; shift 2 ;;
    --with-jax) with_jax=1; shift ;;
    *) echo "bench/device_wheels.sh: unknown argument $1 (see the header of this file)" >&2; exit 2 ;;
  esac
done
minor=${glibc#2.}
platforms=(--platform "manylinux2014_$arch")
for ((g = 17; g <= minor; g++)); do platforms+=(--platform "manylinux_2_${g}_$arch"); done
reqs=(-r bench/device-requirements.txt)
if [[ $with_jax == 1 ]]; then
  host=$(python -c 'import importlib.metadata as m; print(" ".join(f"{d}=={m.version(d)}" for d in
    ("jax", "jaxlib", "numpy", "scipy", "ml_dtypes", "opt_einsum")))')
  reqs+=($host)
fi
mkdir -p "$dest"
fetch=(python -m pip download --quiet --only-binary=:all: --no-deps --python-version "$py" "${platforms[@]}" --dest "$dest")
# offline first: a folder that already holds every file needs no index
"${fetch[@]}" --no-index --find-links "$dest" "${reqs[@]}" 2>/dev/null || "${fetch[@]}" "${reqs[@]}"
echo "bench/device_wheels.sh: $(ls "$dest" | wc -l) wheels for Python $py, $arch, glibc $glibc in $dest ($(du -sh "$dest" | cut -f1))"
