"""tutti.jax on a GPU: one job on 1 rank and one on 2 ranks sharing the GPU
(workers/jax_gpu.py). Runs on the GPU machine (tests/gpu/device_check.sh); skips, saying so,
where JAX has no GPU."""
import os
import re

import pytest

from conftest import WORKERS, lines_of, run_job

try:
    import jax
    gpus = jax.local_devices(backend="gpu")
except Exception as error:  # no jax, or no GPU backend: RuntimeError from jax
    gpus, why = [], f"JAX has no GPU here ({type(error).__name__}: {error})"
else:
    why = "JAX has no GPU here"

with open(f"{WORKERS}/jax_gpu.py") as source:
    CHECKS = [f"allreduce_{t}" for t in ("float32", "float16", "bfloat16", "int32", "int8",
                                          "uint8")] + re.findall(r'check\("(\w+)"', source.read())

_jobs = {}


def job(ranks):
    if not gpus:
        pytest.skip(why)
    if ranks not in _jobs:
        # Two processes on one GPU: JAX must not take most of its memory for the first one.
        _jobs[ranks] = run_job(ranks, "jax_gpu.py", env={"XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
                               timeout=240)
    return _jobs[ranks]


@pytest.mark.parametrize("ranks", [1, 2])
@pytest.mark.parametrize("name", CHECKS)
def test_jax_gpu(ranks, name):
    result = job(ranks)
    for r in range(ranks):
        outcome = [line for line in lines_of(result, r)
                   if line == f"ok {name}" or line.startswith(f"fail {name}:")]
        assert outcome, f"rank {r} never reached {name}:\n{result.stdout[-3000:]}\n" \
                        f"{result.stderr[-3000:]}"
        assert outcome[0] == f"ok {name}", f"rank {r}: {outcome[0]}"


@pytest.mark.parametrize("ranks", [1, 2])
def test_jax_gpu_job_exits_cleanly(ranks):
    result = job(ranks)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    times = [line for line in lines_of(result, 0) if line.startswith("time ")]
    artifacts = os.environ.get("TUTTI_GPU_ARTIFACTS")
    if artifacts:  # the device check's log of measurements (never asserted)
        with open(os.path.join(artifacts, "jax_gpu_times.txt"), "a") as log:
            log.writelines(line + "\n" for line in times)
