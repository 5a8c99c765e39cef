"""Multi-GPU readiness on the simulator (docs/gpu.md): the NCCL path with ranks as processes, a
real tuttid relaying the unique ids, and a communicator per (set, device combination) that the
simulated NCCL makes between the processes (tests/gpu_sim/sim_nccl.h). One job of 4 ranks, each
on a simulated GPU of its own, runs every collective and dtype, a second device combination, a
set of its own and a set mixing shared and own GPUs; a job of 3 loses its last rank during an
NCCL allreduce; an elastic job of 3 loses one and goes on with NCCL in the next membership epoch
(workers/nccl_sim.py)."""
import os
import re
import subprocess
import sys

import pytest

from conftest import BUILD, WORKERS, job_env, lines_of, run_job

with open(os.path.join(WORKERS, "nccl_sim.py")) as source:
    text = source.read()
CHECKS = sorted(set(re.findall(r'check\(f?"(\w+)', text)) - {"max_"})
DTYPES = ["float16", "float64", "int8", "uint8", "int32", "int64"]
LOST_PEER = ["before_the_loss", "peer_lost"]
REFORMED = ["before_the_reformation", "loss_seen", "nccl_after_the_reformation"]

_jobs = {}


SIM = {"TUTTI_GPU_MODULE": os.path.join(BUILD, "tests", "libtutti_gpu_sim.so"),
       "TUTTI_SIM_GPUS": "4"}


def job(scenario, ranks):
    if scenario not in _jobs:
        if scenario == "reformed":  # elastic: tuttirun --min-np
            _jobs[scenario] = subprocess.run(
                [os.path.join(BUILD, "tuttirun"), "-np", str(ranks), "--min-np", "2",
                 sys.executable, os.path.join(WORKERS, "nccl_sim.py"), scenario],
                env=job_env(SIM), capture_output=True, text=True, timeout=180)
        else:
            _jobs[scenario] = run_job(ranks, "nccl_sim.py", scenario, env=SIM, timeout=180)
    return _jobs[scenario]


def assert_ok(result, name, ranks):
    for r in ranks:
        outcome = [line for line in lines_of(result, r)
                   if line.split(" ")[1].rstrip(":") == name]
        assert outcome, f"rank {r} never reached {name}:\n{result.stdout[-3000:]}\n{result.stderr}"
        assert outcome[0] == f"ok {name}", f"rank {r}: {outcome[0]}"


@pytest.mark.parametrize("name", [c for c in CHECKS if c not in LOST_PEER + REFORMED] +
                         [f"max_{d}" for d in DTYPES])
def test_nccl_path_on_four_ranks(name):
    assert_ok(job("collectives", 4), name, range(4))


def test_four_rank_job_exits_cleanly():
    result = job("collectives", 4)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr


@pytest.mark.parametrize("name", LOST_PEER)
def test_a_lost_peer_fails_the_nccl_collective_instead_of_hanging(name):
    assert_ok(job("lost_peer", 3), name, range(2))


@pytest.mark.parametrize("name", REFORMED)
def test_an_elastic_job_goes_on_with_nccl_in_the_next_epoch(name):
    assert_ok(job("reformed", 3), name, range(2))


def test_the_elastic_job_exits_cleanly():
    result = job("reformed", 3)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr


def test_no_shared_memory_left_behind():
    job("collectives", 4)
    job("lost_peer", 3)
    job("reformed", 3)
    left = [f for f in os.listdir("/dev/shm") if f.startswith("tutti-simnccl-")]
    assert not left, left
