"""The framework-neutral array core's device path ("core only": no framework runs on a GPU here),
on 2 ranks sharing simulated GPU 0: DLPack producers over the simulator's memory, a binding's
hooks, every collective, results on the device, the producer's stream asked for, and the errors
(workers/arrays_device.py)."""
import os
import re

import pytest

from conftest import BUILD, WORKERS, lines_of, run_job

with open(os.path.join(WORKERS, "arrays_device.py")) as source:
    CHECKS = re.findall(r'check\("(\w+)"', source.read())

_job = []


def job():
    if not _job:
        sim = os.path.join(BUILD, "tests", "libtutti_gpu_sim.so")
        _job.append(run_job(2, "arrays_device.py", env={"TUTTI_GPU_MODULE": sim}))
    return _job[0]


@pytest.mark.parametrize("name", CHECKS)
def test_device_arrays_through_the_core(name):
    result = job()
    for r in range(2):
        outcome = [line for line in lines_of(result, r) if line.split(" ")[1:2] == [name] or
                   line.split(" ")[1].rstrip(":") == name]
        assert outcome, f"rank {r} never reached {name}:\n{result.stdout[-3000:]}\n{result.stderr}"
        assert outcome[0] == f"ok {name}", f"rank {r}: {outcome[0]}"


def test_job_exits_cleanly():
    result = job()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
