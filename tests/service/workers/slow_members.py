"""Rank of a job whose per-set pages the tests read: one member of each set is slow on purpose.

On the world, rank 2 submits each of STEPS allreduces SLOW_S after the others; on the set [0, 2]
(added by every rank), rank 0 does. Every tensor has a name of its own, so every negotiation goes
through tuttid (a cached one could move the set to its members' fast path, which tuttid does not
see tensor by tensor). Then a few small allreduces submitted together (for fusion) and a
broadcast (another kind). Prints "ready <set id>" and keeps the job alive until a line on stdin,
so that the pages can be read while it runs; then shuts down and prints "done"."""
import os
import sys
import time

import numpy as np

import tutti

STEPS = int(os.environ.get("SLOW_STEPS", "5"))
SLOW_S = float(os.environ.get("SLOW_SECONDS", "0.1"))

tutti.init()
rank = tutti.rank()
pair = tutti.add_process_set([0, 2])

for step in range(STEPS):
    if rank == 2:
        time.sleep(SLOW_S)  # the straggler the world's page must name, not a synchronisation
    tutti.allreduce(np.ones(256, np.float32), name=f"world/step{step}")

if rank in (0, 2):
    for step in range(STEPS):
        if rank == 0:
            time.sleep(SLOW_S)
        tutti.allreduce(np.ones(64, np.float32), name=f"pair/step{step}", process_set=pair)

handles = [tutti.allreduce_async(np.ones(16, np.float32), name=f"small/{i}") for i in range(4)]
for handle in handles:
    handle.wait()
tutti.broadcast(np.ones(8, np.float32), 0, name="weights")

print(f"ready {pair}", flush=True)
sys.stdin.readline()
tutti.shutdown()
print("done", flush=True)
