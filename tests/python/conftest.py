"""Runs Python programs as the ranks of a real tutti job: `tuttirun` (with its embedded tuttid)
from the build tree, the package from python/, the library from the build tree.

TUTTI_BUILD_DIR picks the build (default: build/ at the repository root)."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Absolute: some tests run programs from other working directories.
BUILD = os.path.join(ROOT, os.environ.get("TUTTI_BUILD_DIR", "build"))
WORKERS = os.path.join(ROOT, "tests", "python", "workers")


def job_env(extra=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "python") + os.pathsep + env.get("PYTHONPATH", "")
    env["TUTTI_LIBRARY"] = os.path.join(BUILD, "libtutti.so")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def launcher_env(extra=None):
    """job_env() without the TUTTI_* variables a job of this test runner's own may have set (the
    library stays): for jobs an engine starts, which decides them itself (mpirun, torchrun, srun)."""
    env = {k: v for k, v in job_env().items() if not k.startswith("TUTTI_") or k == "TUTTI_LIBRARY"}
    env.update(extra or {})
    return env


def engine_missing(why):
    """An engine or framework that cannot start here: a skip with `why`, a failure under CI=true
    (CI's machine installs them all, so a skip there would hide a missing install step)."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"cannot be tested on CI: {why}")
    pytest.skip(why)


def run_job(np, script, *args, env=None, timeout=240):
    """Runs `script` (a path, or a file name under tests/python/workers) on `np` ranks; returns
    the CompletedProcess with the ranks' output lines ("[rank] ...") in stdout."""
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


@pytest.fixture
def job():
    return run_job


def own_mpi_session_dirs(commands, root):
    """Each mpirun command of `commands` with a session directory of its own under `root`:
    OpenMPI 4.1's mpiruns race to create /tmp/ompi.HOST.UID when started at the same instant
    ("mkdir ... File exists", orte_session_dir failed)."""
    made = []
    for i, command in enumerate(commands):
        path = os.path.join(str(root), f"mpirun{i}")
        os.makedirs(path, exist_ok=True)
        made.append(["env", f"OMPI_MCA_orte_tmpdir_base={path}", *command])
    return made


def run_at_once(commands, env, timeout=240, cwd=None):
    """Starts every command at once and returns [(returncode, stdout, stderr)] in order; every
    child is reaped, even when one hangs past `timeout`."""
    jobs = [subprocess.Popen(c, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, cwd=cwd) for c in commands]
    try:
        outputs = [job.communicate(timeout=timeout) for job in jobs]
    finally:
        for job in jobs:
            if job.poll() is None:
                job.kill()
                job.wait()
    return [(job.returncode, out, err) for job, (out, err) in zip(jobs, outputs)]
