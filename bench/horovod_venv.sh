#!/usr/bin/env bash
# Builds Horovod 0.28.1 (PyPI's sdist) for Debian's Python and torch into a virtual environment,
# for the benchmarks that run Horovod itself beside tutti (bench/torch_step.sh). Never committed,
# never used by tests. About 3-7 minutes on 2 cores.
#   bash bench/horovod_venv.sh [VENV]        (default: /tmp/horovod-0.28.1)
# Prints the venv's python on success; exits non-zero (and keeps the log) otherwise.
set -euo pipefail
venv=${1:-/tmp/horovod-0.28.1}
log=$venv.log
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import horovod.torch" 2>/dev/null; then
  echo "$venv/bin/python"
  exit 0
fi
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
missing=()
for p in libtorch-dev pybind11-dev python3-torch python3-venv python3-dev libopenmpi-dev openmpi-bin cmake g++; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
rm -rf "$venv"
/usr/bin/python3 -m venv --system-site-packages "$venv"
{
  "$venv/bin/pip" install -q cffi cloudpickle psutil pyyaml packaging
  HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 \
    HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 MAKEFLAGS=-j2 \
    "$venv/bin/pip" install --no-build-isolation --no-cache-dir -v horovod==0.28.1
} >"$log" 2>&1 || { echo "horovod_venv.sh: the build failed; see $log" >&2; exit 1; }
"$venv/bin/python" -c "import horovod.torch as hvd; print('horovod', hvd.__version__ if hasattr(hvd, '__version__') else '')" >>"$log" 2>&1 \
  || { echo "horovod_venv.sh: horovod.torch does not import; see $log" >&2; exit 1; }
echo "$venv/bin/python"
