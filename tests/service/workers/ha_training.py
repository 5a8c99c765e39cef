"""Rank of a training loop the HA failover tests run while they kill, freeze or cut off the HA
group's leader: STEPS steps of three allreduces whose results are known exactly. Prints
"step <i> <unix time>" after each step and "done" at the end; a wrong result prints "bad ..."
and exits 3, an error prints it and exits 2."""
import os
import sys
import time

import numpy as np

import tutti

STEPS = int(os.environ.get("HA_STEPS", "60"))
# Between steps, as a training step's compute would: the test kills the leader mid-loop.
PAUSE = float(os.environ.get("HA_PAUSE_S", "0.02"))

tutti.init()
rank, size = tutti.rank(), tutti.size()
expected_base = size * (size + 1) / 2
try:
    for step in range(STEPS):
        for i, shape in enumerate([(1024,), (16, 16), (3,)]):
            value = np.full(shape, (rank + 1) * (step + 1) * (i + 1), np.float32)
            out = tutti.allreduce(value, name=f"grad/{i}", op=tutti.Sum)
            want = expected_base * (step + 1) * (i + 1)
            if not np.all(out == want):
                print(f"bad step {step} tensor {i}: {out.ravel()[:3]} != {want}", flush=True)
                sys.exit(3)
        print(f"step {step} {time.time():.6f}", flush=True)
        time.sleep(PAUSE)
except tutti.TuttiError as e:
    print(f"error {type(e).__name__}: {e}", flush=True)
    sys.exit(2)
print("done", flush=True)
tutti.shutdown()
