"""The framework bindings' suites (tutti.jax), run with the Python of the framework's virtual
environment, whose interpreter the ranks run too (sys.executable):

    .venv-jax/bin/python -m pytest -q tests/frameworks

Run apart from tests/python, whose conftest module has the same name. TUTTI_BUILD_DIR picks the
build (default: build/ at the repository root); the package comes from python/ and the library,
tuttid and tuttirun from the build, as in tests/python."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, os.environ.get("TUTTI_BUILD_DIR", "build"))
WORKERS = os.path.join(ROOT, "tests", "frameworks", "workers")

# This process imports the package too (the array core's own tests), from the tree.
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("TUTTI_LIBRARY", os.path.join(BUILD, "libtutti.so"))


def job_env(extra=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "python") + os.pathsep + env.get("PYTHONPATH", "")
    env["TUTTI_LIBRARY"] = os.path.join(BUILD, "libtutti.so")
    env["PYTHONUNBUFFERED"] = "1"
    # One CPU thread pool per rank: several ranks share this machine's cores.
    env.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                                "intra_op_parallelism_threads=1")
    env.update(extra or {})
    return env


def engine_missing(why):
    """A framework that cannot be imported here: a skip with `why`, a failure under CI=true (CI
    installs every framework, so a skip there would hide a missing install step)."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"cannot be tested on CI: {why}")
    pytest.skip(why)


def run_job(np, script, *args, env=None, timeout=240):
    """Runs `script` (a path, or a file name under tests/frameworks/workers) on `np` ranks with
    this interpreter; returns the CompletedProcess with the ranks' lines ("[rank] ...")."""
    if not os.path.isabs(script):
        script = os.path.join(WORKERS, script)
    command = [os.path.join(BUILD, "tuttirun"), "-np", str(np), sys.executable, script,
               *[str(a) for a in args]]
    return subprocess.run(command, env=job_env(env), capture_output=True, text=True,
                          timeout=timeout)


def lines_of(result, rank):
    """The output lines of one rank, without the "[rank] " prefix."""
    prefix = f"[{rank}] "
    return [line[len(prefix):] for line in result.stdout.splitlines() if line.startswith(prefix)]


def errors_of(result, rank):
    """The workers' "error CASE MESSAGE" lines of one rank, as {case: message}."""
    return {line.split(" ")[1]: line.split(" ", 2)[2] for line in lines_of(result, rank)
            if line.startswith("error ")}


def assert_ok(result, marker, ranks):
    assert result.returncode == 0, result.stdout + result.stderr
    for r in range(ranks):
        assert marker in lines_of(result, r), (r, result.stdout + result.stderr)
