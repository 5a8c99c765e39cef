#!/usr/bin/env bash
# Makes the data engines' virtual environment (PySpark and Ray from PyPI, pinned by
# python/constraints-engines.txt) for tests/engines: `--system-site-packages`, so Debian's numpy,
# torch, pytest and mpi4py stay the ones every other suite uses. Idempotent: an environment made
# from the same constraints is kept (its copy of the file is the stamp), and pip's own cache keeps
# the wheels between runs. Java comes from Debian (scripts/setup.sh).
#   bash scripts/setup_engines.sh [VENV]        # default: .venv-engines at the repository root
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-${TUTTI_ENGINES_VENV:-$PWD/.venv-engines}}
constraints=python/constraints-engines.txt
if [[ -x $venv/bin/python ]] && cmp -s "$constraints" "$venv/constraints-engines.txt"; then
  echo "setup_engines: $venv is up to date"
  exit 0
fi
rm -rf "$venv"
/usr/bin/python3 -m venv --system-site-packages "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -c "$constraints" pyspark ray
cp "$constraints" "$venv/constraints-engines.txt"
"$venv/bin/python" -c "import pyspark, ray; print('setup_engines: pyspark', pyspark.__version__, 'ray', ray.__version__)"
