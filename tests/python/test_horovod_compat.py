"""horovod.torch's behaviour on tutti.torch, on 2 and 4 ranks: one tuttirun job per rank count
runs every check of workers/horovod_compat.py (exceptions, lifecycle, process sets called by
every rank, dtypes, gradients against a single-process reference, Adasum against its formula,
SyncBatchNorm against batch norm of the whole batch, the optimizer); each check is reported as
its own test."""
import re

import pytest

from conftest import WORKERS, lines_of, run_job

with open(f"{WORKERS}/horovod_compat.py") as source:
    CHECKS = re.findall(r"^@check\ndef (\w+)\(", source.read(), re.M)

_jobs = {}


def job(ranks):
    if ranks not in _jobs:
        _jobs[ranks] = run_job(ranks, "horovod_compat.py", timeout=600)
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
