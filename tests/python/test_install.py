"""The package installs with pip into a virtual environment, offline, and finds the library."""
import ctypes.util
import os
import subprocess
import sys
import venv

import pytest

from conftest import BUILD, ROOT


def test_pip_install_into_a_virtual_environment(tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=True).create(env_dir)
    python = str(env_dir / "bin" / "python")
    # A copy of the source tree: pip must not write build artifacts into the repository.
    source = tmp_path / "src"
    subprocess.run(["cp", "-r", os.path.join(ROOT, "python"), str(source)], check=True)
    install = subprocess.run([python, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
                              "--no-index", "-q", str(source)], capture_output=True, text=True,
                             timeout=300)
    assert install.returncode == 0, install.stdout + install.stderr
    probe = "import tutti, tutti.torch; print(tutti.__file__); print(tutti._capi.library_path)"
    env = dict(os.environ, TUTTI_LIBRARY=os.path.join(BUILD, "libtutti.so"))
    env.pop("PYTHONPATH", None)
    result = subprocess.run([python, "-c", probe], capture_output=True, text=True, env=env,
                            cwd=str(tmp_path), timeout=120)
    assert result.returncode == 0, result.stderr
    module, library = result.stdout.split()
    assert module.startswith(str(env_dir)), module
    assert library == os.path.join(BUILD, "libtutti.so")


def test_loader_says_what_it_tried(tmp_path):
    if ctypes.util.find_library("tutti"):
        pytest.skip("libtutti is installed system-wide, so the loader finds it there")
    # A copy of the package outside the checkout, so that the build-tree fallback does not apply.
    subprocess.run(["cp", "-r", os.path.join(ROOT, "python", "tutti"), str(tmp_path)], check=True)
    missing = str(tmp_path / "nowhere.so")
    env = dict(os.environ, TUTTI_LIBRARY=missing, PYTHONPATH=str(tmp_path))
    result = subprocess.run([sys.executable, "-c", "import tutti"], capture_output=True, text=True,
                            env=env, cwd=str(tmp_path), timeout=60)
    assert result.returncode != 0
    message = result.stderr.strip().splitlines()[-1]
    assert message.startswith("ImportError: cannot load libtutti: set TUTTI_LIBRARY to its path, "
                              "or build it (build/libtutti.so). Tried: " + missing), message
    assert str(tmp_path / "tutti" / "libtutti.so.0") in message
