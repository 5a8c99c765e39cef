"""One rank of a zero-setup job (tests/python/test_zero_setup.py, test_slurm.py): started by
mpirun or srun with no TUTTI_* variable, so tutti.init() finds its coordinator through the
launcher's PMIx or PMI2. Prints "rank R: ..." lines the tests check.

Modes (argv[1]):
  sets        a set of the even and one of the odd ranks, an allreduce on each and on the world
              (two jobs at once each sum over their own ranks only);
  init-error  init only; prints the exception's class and message;
  lose-rank0  rank 0 kills itself once every rank is up; the others run collectives on a set
              without it until tutti reports the coordinator lost (its tuttid ends with rank 0).
"""
import os
import signal
import sys
import time

import numpy as np

import tutti

mode = sys.argv[1] if len(sys.argv) > 1 else "sets"
if mode == "init-error":
    try:
        tutti.init()
    except tutti.TuttiError as e:
        print(f"rank {os.environ.get('OMPI_COMM_WORLD_RANK', os.environ.get('SLURM_PROCID'))}: "
              f"{type(e).__name__}: {e}", flush=True)
        sys.exit(3)
    print("rank ?: init succeeded", flush=True)
    sys.exit(0)

tutti.init()
rank, size = tutti.rank(), tutti.size()
if mode == "sets":
    evens = tutti.add_process_set(list(range(0, size, 2)))
    odds = tutti.add_process_set(list(range(1, size, 2)))
    mine = evens if rank % 2 == 0 else odds
    got = tutti.allreduce(np.array([rank], np.float32), name="g", process_set=mine)
    world = tutti.allreduce(np.array([1], np.float32), name="w")
    print(f"rank {rank}: size {size} set sum {got[0]:g} world {world[0]:g}", flush=True)
    tutti.shutdown()
elif mode == "lose-rank0":
    others = tutti.add_process_set(list(range(1, size)))
    tutti.barrier()
    if rank == 0:
        os.kill(os.getpid(), signal.SIGKILL)
    deadline = time.monotonic() + 120
    step = 0
    try:
        while time.monotonic() < deadline:
            tutti.allreduce(np.ones(4, np.float32), name=f"s{step}", process_set=others)
            step += 1
        print(f"rank {rank}: still running after 120 s", flush=True)
        sys.exit(1)
    except tutti.TuttiError as e:
        print(f"rank {rank}: {type(e).__name__}", flush=True)
        sys.exit(0)
