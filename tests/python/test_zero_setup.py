"""Zero-setup launch under Debian's real OpenMPI mpirun without MPI mode (docs/launchers.md,
"Zero-setup"): no TUTTI_* variable and no tuttid started by hand; rank 0 starts tuttid and hands
its endpoint and a random token to the others through mpirun's PMIx. C and Python programs, two
jobs at once, and the errors every rank reports. The srun side is in test_slurm.py."""
import os
import shutil
import subprocess
import sys

from conftest import BUILD, ROOT, engine_missing, launcher_env, own_mpi_session_dirs, run_at_once

MPIRUN = shutil.which("mpirun")
WORKER = os.path.join(ROOT, "tests", "python", "workers", "zero_setup_job.py")
EXAMPLE = os.path.join(BUILD, "example_process_sets")


def need_mpirun():
    if MPIRUN is None:
        engine_missing("zero-setup under mpirun: no mpirun (Debian: openmpi-bin)")


def mpirun_command(np, *program):
    return [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", str(np), *program]


def run(np, *program, env=None, timeout=180):
    return subprocess.run(mpirun_command(np, *program), env=launcher_env(env),
                          capture_output=True, text=True, timeout=timeout)


def test_a_c_program_needs_no_coordinator():
    need_mpirun()
    result = run(4, EXAMPLE)
    assert result.returncode == 0, result.stdout + result.stderr
    for rank in range(4):
        line = next((l for l in result.stdout.splitlines() if l.startswith(f"rank {rank}: ")), "")
        assert line.endswith("verified: ok"), result.stdout + result.stderr


def test_a_python_program_needs_no_coordinator():
    need_mpirun()
    result = run(4, sys.executable, WORKER, "sets")
    assert result.returncode == 0, result.stdout + result.stderr
    for rank in range(4):
        assert f"rank {rank}: size 4 set sum {2 if rank % 2 == 0 else 4} world 4" \
            in result.stdout, result.stdout + result.stderr


def test_two_jobs_at_once_never_collide(tmp_path):
    need_mpirun()
    command = mpirun_command(2, sys.executable, WORKER, "sets")
    commands = own_mpi_session_dirs([command, command], tmp_path)
    for code, out, err in run_at_once(commands, launcher_env(), timeout=180):
        assert code == 0, out + err
        # Each job's world is its own two ranks.
        assert out.count("world 2") == 2, out + err


def test_a_tuttid_that_cannot_start_fails_every_rank_with_rank_0s_reason():
    need_mpirun()
    result = run(3, sys.executable, WORKER, "init-error",
                 env={"TUTTI_TUTTID": "/nonexistent/tuttid"})
    assert result.returncode != 0
    for rank in range(3):
        assert (f"rank {rank}: InternalError: rank 0: tuttid (/nonexistent/tuttid) exited with "
                f"status 127 (it cannot be executed) before listening; its stderr is this "
                f"rank's") in result.stdout, result.stdout + result.stderr


def test_the_coordinator_ends_with_the_job():
    need_mpirun()
    # tuttid --exit-when-idle: rank 0's finalize returns once every rank has left, and no tuttid
    # outlives the job (mpirun would wait for it otherwise).
    before = set(subprocess.run(["pgrep", "-x", "tuttid"], capture_output=True,
                                text=True).stdout.split())
    result = run(2, EXAMPLE)
    assert result.returncode == 0, result.stdout + result.stderr
    after = set(subprocess.run(["pgrep", "-x", "tuttid"], capture_output=True,
                               text=True).stdout.split())
    assert after <= before, f"tuttid left running: {after - before}"
