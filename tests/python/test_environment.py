"""Ranks find their identity in other launchers' variables (torchrun, OpenMPI, Slurm) plus
TUTTI_COORDINATOR, against a real tuttid."""
import os
import subprocess
import sys

import pytest

from conftest import BUILD, WORKERS, job_env

LAUNCHERS = {
    "torchrun": lambda r, n: {"RANK": str(r), "WORLD_SIZE": str(n), "LOCAL_RANK": str(r)},
    "openmpi": lambda r, n: {"OMPI_COMM_WORLD_RANK": str(r), "OMPI_COMM_WORLD_SIZE": str(n)},
    "slurm": lambda r, n: {"SLURM_PROCID": str(r), "SLURM_NTASKS": str(n)},
}


@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
def test_identity_from_another_launchers_variables(launcher):
    tuttid = subprocess.Popen([os.path.join(BUILD, "tuttid"), "--bind", "tcp://127.0.0.1:*",
                               "--log-level", "warn"], stdout=subprocess.PIPE, text=True)
    ranks = []
    try:
        endpoint = tuttid.stdout.readline().split()[-1]
        for r in range(2):
            env = {k: v for k, v in job_env().items() if not k.startswith("TUTTI_RANK")
                   and k != "TUTTI_SIZE"}
            env.update(LAUNCHERS[launcher](r, 2), TUTTI_COORDINATOR=endpoint,
                       TUTTI_JOB=f"env-{launcher}")
            ranks.append(subprocess.Popen([sys.executable, os.path.join(WORKERS, "identity.py")],
                                          env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
        outputs = [p.communicate(timeout=120)[0] for p in ranks]
    finally:
        for p in ranks:
            if p.poll() is None:
                p.kill()
                p.wait()
        tuttid.terminate()
        tuttid.wait(timeout=30)
    for r, (p, out) in enumerate(zip(ranks, outputs)):
        assert p.returncode == 0, out
        assert f"identity {r} 2 {r} 2" in out, out  # one host: local rank = rank
