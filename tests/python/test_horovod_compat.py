"""horovod.torch's behaviour on tutti.torch, on 2 and 4 ranks: one tuttirun job per rank count
runs every check of workers/horovod_compat.py (exceptions, lifecycle, process sets called by
every rank, dtypes, gradients against a single-process reference, Adasum against its formula,
SyncBatchNorm against batch norm of the whole batch, the optimizer); each check is reported as
its own test."""
import os
import re
import subprocess
import sys

import pytest

from conftest import BUILD, WORKERS, job_env, lines_of, run_job

with open(f"{WORKERS}/horovod_compat.py") as source:
    CHECKS = re.findall(r"^@check\ndef (\w+)\(", source.read(), re.M)

_jobs = {}


def job(ranks):
    if ranks not in _jobs:
        _jobs[ranks] = run_job(ranks, "horovod_compat.py", timeout=600,
                               env={"HOROVOD_FUSION_THRESHOLD": "12345",
                                    "HOROVOD_CYCLE_TIME": "2.5"})
    return _jobs[ranks]


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("name", CHECKS)
def test_check(ranks, name):
    result = job(ranks)
    for r in range(ranks):
        lines = lines_of(result, r)
        outcome = [line for line in lines if line.startswith(("ok ", "fail ")) and
                   line.split(" ")[1].rstrip(":") == name]
        assert outcome, f"rank {r} never reached {name}:\n{result.stdout[-3000:]}\n{result.stderr}"
        assert outcome[0] == f"ok {name}", f"rank {r}: {outcome[0]}"


def test_job_exits_cleanly():
    for ranks in (2, 4):
        result = job(ranks)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr


def test_reinit_on_a_standalone_tuttid():
    """shutdown() then init() on ranks that a standalone tuttid coordinates (not tuttirun's
    embedded one)."""
    tuttid = subprocess.Popen([os.path.join(BUILD, "tuttid"), "--bind", "tcp://127.0.0.1:*"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        endpoint = tuttid.stdout.readline().split()[-1]
        assert endpoint.startswith("tcp://"), endpoint
        result = subprocess.run(
            [os.path.join(BUILD, "tuttirun"), "-np", "3", "--coordinator", endpoint,
             sys.executable, os.path.join(WORKERS, "horovod_compat.py"),
             "reinit_with_other_process_sets", "every_rank_adds_and_removes_overlapping_sets"],
            env=job_env(), capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stdout + result.stderr
        for r in range(3):
            assert "ok reinit_with_other_process_sets" in lines_of(result, r), result.stdout
    finally:
        tuttid.terminate()
        tuttid.wait(timeout=60)


def test_the_other_bindings_init_reads_and_refuses_horovod_variables(tmp_path):
    """tutti.tensorflow, .keras, .jax and .mxnet share tutti._process_sets.init: a Horovod TF or
    JAX script's HOROVOD_ variables must count there as in tutti.torch."""
    log = tmp_path / "trials.csv"
    result = run_job(2, "horovod_env_other_bindings.py",
                     env={"HOROVOD_FUSION_THRESHOLD": "12345", "HOROVOD_AUTOTUNE_LOG": str(log)})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    for r in range(2):
        assert lines_of(result, r) == [f"fusion 12345 log {log}"], result.stdout
    result = run_job(2, "horovod_env_other_bindings.py",
                     env={"HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE": "0.5"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    for r in range(2):
        assert lines_of(result, r) == [
            "refused UnsupportedError HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE=0.5 is not "
            "supported: tutti's autotuner is a coordinate search with a confirmation round, not "
            "Bayesian optimisation (docs/autotune.md)"], result.stdout
