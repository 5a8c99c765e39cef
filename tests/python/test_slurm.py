"""tutti under a real single-host Slurm (slurm_cluster.py): srun of a Python and of a C job with
process sets, identity and local rank from Slurm's variables, against a standalone tuttid and with
none (zero-setup through srun's PMI2 and PMIx: rank 0 starts the job's tuttid); two zero-setup
steps at once; the error every task reports when srun offers no exchange; losing rank 0 of a
zero-setup job; sbatch of a job script that runs tuttirun; a job cancelled with scancel, whose
tasks end and leave nothing behind."""
import os
import subprocess
import sys
import time

import pytest

from conftest import BUILD, ROOT, engine_missing, launcher_env, run_at_once
from slurm_cluster import SlurmCluster, missing_tools

WORKER = os.path.join(ROOT, "tests", "python", "workers", "slurm_job.py")
ZERO_SETUP = os.path.join(ROOT, "tests", "python", "workers", "zero_setup_job.py")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    missing = missing_tools()
    if missing:
        engine_missing(f"no Slurm here: {', '.join(missing)} missing (Debian: slurmd slurmctld "
                       f"slurm-client munge)")
    c = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        c.start()
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def tuttid():
    process = subprocess.Popen([os.path.join(BUILD, "tuttid"), "--bind", "tcp://127.0.0.1:*",
                                "--log-level", "warn"], stdout=subprocess.PIPE, text=True)
    try:
        yield process.stdout.readline().split()[-1]
    finally:
        process.terminate()
        process.wait(timeout=30)


def slurm_env(cluster, coordinator):
    return launcher_env({"SLURM_CONF": cluster.conf, "TUTTI_COORDINATOR": coordinator})


def test_srun_of_a_python_job_with_process_sets(cluster, tuttid):
    result = subprocess.run(["srun", "-n", "4", sys.executable, WORKER],
                            env=slurm_env(cluster, tuttid), capture_output=True, text=True,
                            timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    # Sets: evens {0, 2} and odds {1, 3}; one host, so local rank = task.
    for task, (set_id, total) in enumerate([(1, 2), (2, 4), (1, 2), (2, 4)]):
        assert f"task {task}: set {set_id} sum {total} world 4 local {task} of 4" in result.stdout, \
            result.stdout + result.stderr


def test_srun_of_a_c_job(cluster, tuttid):
    result = subprocess.run(["srun", "-n", "4", os.path.join(BUILD, "example_process_sets")],
                            env=slurm_env(cluster, tuttid), capture_output=True, text=True,
                            timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    for task in range(4):
        line = next((l for l in result.stdout.splitlines() if l.startswith(f"rank {task}: ")), "")
        assert line.endswith("verified: ok"), result.stdout


def zero_setup_env(cluster):
    """No TUTTI_COORDINATOR: the job bootstraps through srun (docs/launchers.md, "Zero-setup")."""
    return launcher_env({"SLURM_CONF": cluster.conf})


def srun(cluster, *args, timeout=240):
    return subprocess.run(["srun", *args], env=zero_setup_env(cluster), capture_output=True,
                          text=True, timeout=timeout)


def test_zero_setup_of_a_c_job_through_pmi2(cluster):
    result = srun(cluster, "--mpi=pmi2", "-n", "4", os.path.join(BUILD, "example_process_sets"))
    assert result.returncode == 0, result.stdout + result.stderr
    for task in range(4):
        line = next((l for l in result.stdout.splitlines() if l.startswith(f"rank {task}: ")), "")
        assert line.endswith("verified: ok"), result.stdout + result.stderr


def test_zero_setup_of_a_python_job_through_pmix(cluster):
    result = srun(cluster, "--mpi=pmix", "-n", "4", sys.executable, ZERO_SETUP, "sets")
    assert result.returncode == 0, result.stdout + result.stderr
    for task in range(4):
        assert f"rank {task}: size 4 set sum {2 if task % 2 == 0 else 4} world 4" \
            in result.stdout, result.stdout + result.stderr


def test_two_zero_setup_steps_at_once_never_collide(cluster):
    command = ["srun", "--mpi=pmi2", "-n", "2", sys.executable, ZERO_SETUP, "sets"]
    for code, out, err in run_at_once([command, command], zero_setup_env(cluster), timeout=240):
        assert code == 0, out + err
        assert out.count("world 2") == 2, out + err


def test_srun_without_an_exchange_names_the_remedy_on_every_task(cluster):
    result = srun(cluster, "-n", "2", sys.executable, ZERO_SETUP, "init-error")
    assert result.returncode != 0
    for task in range(2):
        assert (f"rank {task}: InvalidArgumentError: no coordinator: srun gave this task neither "
                f"PMIx nor PMI2, through which rank 0 hands the others the coordinator it starts; "
                f"run srun with --mpi=pmix or --mpi=pmi2, or set TUTTI_COORDINATOR to a running "
                f"tuttid") in result.stdout, result.stdout + result.stderr


def test_losing_rank_0_of_a_zero_setup_job_loses_the_coordinator(cluster):
    # Slurm lets the other tasks run on (no --kill-on-bad-exit); rank 0's tuttid ends with it.
    result = srun(cluster, "--mpi=pmi2", "-n", "3", sys.executable, ZERO_SETUP, "lose-rank0")
    for task in (1, 2):
        assert f"rank {task}: CoordinatorLostError" in result.stdout, result.stdout + result.stderr


def test_sbatch_of_a_script_that_runs_tuttirun(cluster, tmp_path):
    script = tmp_path / "job.sh"
    output = tmp_path / "job.out"
    script.write_text(f"#!/bin/bash\n#SBATCH -n 2\n"
                      f"exec {os.path.join(BUILD, 'tuttirun')} -np 2 "
                      f"{os.path.join(BUILD, 'example_process_sets')}\n")
    result = subprocess.run(["sbatch", "--wait", "-o", str(output), str(script)], env=launcher_env({"SLURM_CONF": cluster.conf}),
                            capture_output=True, text=True, timeout=240)
    text = output.read_text() if output.exists() else ""
    assert result.returncode == 0, result.stdout + result.stderr + text
    assert "[0] " in text and "[1] " in text, text


def test_scancel_ends_the_tasks_and_leaves_nothing_behind(cluster, tuttid):
    marker = f"tutti-cancel-{os.getpid()}"
    job = subprocess.Popen(["srun", "-n", "3", "-J", marker, sys.executable, WORKER, "hang"],
                           env=slurm_env(cluster, tuttid), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    try:
        waiting = set()
        for line in job.stdout:
            if line.startswith("task ") and line.strip().endswith("waiting"):
                waiting.add(line.split()[1])
            if len(waiting) == 3:
                break
        assert len(waiting) == 3, "the tasks never started"
        ids = subprocess.run(["squeue", "-h", "-n", marker, "-o", "%i"], env=cluster.env(),
                             capture_output=True, text=True, timeout=60).stdout.split()
        assert len(ids) == 1, ids
        subprocess.run(["scancel", ids[0]], env=cluster.env(), check=True, timeout=60)
        job.stdout.read()
        assert job.wait(timeout=60) != 0
        # The tasks are gone (Slurm signals, then kills after KillWait) and the job with them.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            left = subprocess.run(["pgrep", "-f", f"{WORKER} hang"], capture_output=True,
                                  text=True).stdout.split()
            queued = subprocess.run(["squeue", "-h", "-n", marker], env=cluster.env(),
                                    capture_output=True, text=True).stdout.strip()
            if not left and not queued:
                break
            time.sleep(0.2)  # polling the process table: there is nothing to wait on
        assert not left, f"tasks left behind: {left}"
        assert not queued, queued
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
