#!/usr/bin/env bash
# Makes one of the Python virtual environments whose frameworks Debian lacks, from PyPI, pinned by
# python/constraints-NAME.txt (every package pip puts into it, exactly):
#   engines     PySpark and Ray (tests/engines; Java comes from Debian: scripts/setup.sh)
#   jax         JAX, optax, flax and Keras 3 (tests/frameworks/test_jax.py, test_keras_jax.py)
#   tensorflow  TensorFlow and Keras 3 (tests/frameworks/test_tensorflow.py)
#   mxnet       MXNet 1.9.1 with numpy<1.24 (tests/frameworks/test_mxnet.py)
# Each is made with --system-site-packages, so Debian's numpy, torch, pytest and mpi4py stay
# visible where the environment does not pin its own. Idempotent: an environment made from the
# same constraints is kept (its copy of the file is the stamp), and pip's own cache keeps the
# wheels between runs.
#   bash scripts/setup_venv.sh NAME [VENV]      # default VENV: .venv-NAME at the repository root
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:?usage: setup_venv.sh engines|jax|tensorflow|mxnet [VENV]}
constraints=python/constraints-$name.txt
[[ -f $constraints ]] || { echo "setup_venv: no $constraints" >&2; exit 2; }
venv=${2:-$PWD/.venv-$name}
if [[ -x $venv/bin/python ]] && cmp -s "$constraints" "$venv/constraints.txt"; then
  echo "setup_venv: $venv is up to date"
  exit 0
fi
rm -rf "$venv"
/usr/bin/python3 -m venv --system-site-packages "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$constraints"
cp "$constraints" "$venv/constraints.txt"
echo "setup_venv: $venv made from $constraints"
