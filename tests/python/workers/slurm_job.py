"""One task of an srun job (tests/python/test_slurm.py): identity from Slurm's variables, a set of
the even and one of the odd tasks, an allreduce on each and on the world. `hang`: every task but
the last waits in an allreduce the last never submits, until the job is cancelled."""
import os
import sys
import time

import numpy as np

import tutti

tutti.init()
rank, size = tutti.rank(), tutti.size()
assert rank == int(os.environ["SLURM_PROCID"]) and size == int(os.environ["SLURM_NTASKS"])
assert tutti.local_rank() == int(os.environ["SLURM_LOCALID"]), (tutti.local_rank(), os.environ["SLURM_LOCALID"])
if len(sys.argv) > 1 and sys.argv[1] == "hang":
    print(f"task {rank}: waiting", flush=True)
    if rank == size - 1:
        time.sleep(3600)
    tutti.allreduce(np.ones(4, np.float32), name="never")
    sys.exit(1)
evens = tutti.add_process_set(list(range(0, size, 2)))
odds = tutti.add_process_set(list(range(1, size, 2)))
mine = evens if rank % 2 == 0 else odds
got = tutti.allreduce(np.array([rank], np.float32), name="g", process_set=mine)
world = tutti.allreduce(np.array([1], np.float32), name="w")
print(f"task {rank}: set {mine} sum {got[0]:g} world {world[0]:g} local {tutti.local_rank()} "
      f"of {tutti.local_size()}", flush=True)
tutti.shutdown()
