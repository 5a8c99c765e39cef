"""The data engines' suites (Spark, Ray): real PySpark and Ray from PyPI, in the virtual
environment scripts/setup_venv.sh engines makes (with Debian's packages visible through
--system-site-packages). Run with that environment's Python:

    .venv-engines/bin/python -m pytest tests/engines

TUTTI_BUILD_DIR picks the build (default: build/ at the repository root); the package comes
from python/ and the library from the build, as in tests/python."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, os.environ.get("TUTTI_BUILD_DIR", "build"))

# The driver side of each integration runs in this process: it imports the package from the tree
# and loads the build's library, and the engines' workers inherit both through the environment.
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ["PYTHONPATH"] = os.path.join(ROOT, "python") + os.pathsep + os.environ.get("PYTHONPATH", "")
os.environ["TUTTI_LIBRARY"] = os.path.join(BUILD, "libtutti.so")
os.environ["TUTTI_TUTTID"] = os.path.join(BUILD, "tuttid")
os.environ["PYTHONUNBUFFERED"] = "1"
# A coordinator or identity of an enclosing job must not leak into the engines' jobs.
for name in [n for n in os.environ if n.startswith("TUTTI_") and n not in
             ("TUTTI_LIBRARY", "TUTTI_TUTTID", "TUTTI_BUILD_DIR")]:
    del os.environ[name]


def engine_missing(why):
    """An engine that cannot start here: a skip with `why`, a failure under CI=true (CI's machine
    installs them all, so a skip there would hide a missing install step)."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"cannot be tested on CI: {why}")
    pytest.skip(why)
