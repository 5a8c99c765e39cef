"""Horovod's MPI-mode process sets with mpi4py, under mpirun (tests/python/test_mpi_mode.py):
  init_comm  hvd.init(comm=MPI.COMM_WORLD, process_sets=[hvd.ProcessSet(colour)])
  implicit   hvd.init(process_sets=[hvd.ProcessSet(colour)]) (MPI.COMM_WORLD implied)
  added      hvd.init(comm=MPI.COMM_WORLD), then hvd.add_process_set(hvd.ProcessSet(half))
Each rank prints "rank R: set ID ranks [...] sum S comm SIZE" and "rank R: ok"."""
import sys

from mpi4py import MPI
import torch

import tutti
import tutti.torch as hvd

mode = sys.argv[1]
world = MPI.COMM_WORLD
me = world.Get_rank()
if mode == "added":
    hvd.init(comm=world)
    half = world.Split(me // 2, me)
    ps = hvd.add_process_set(hvd.ProcessSet(half))
else:
    colour = world.Split(me % 2, me)
    ps = hvd.ProcessSet(colour)
    if mode == "init_comm":
        hvd.init(comm=world, process_sets=[ps])
    else:
        hvd.init(process_sets=[ps])
assert hvd.rank() == me and hvd.size() == world.Get_size()
total = hvd.allreduce(torch.tensor([float(me)]), op=hvd.Sum, process_set=ps, name="sum")
counted = hvd.allreduce(torch.tensor([1.0]), op=hvd.Sum, name="count")
back = tutti.process_set_comm(ps.process_set_id)
print(f"rank {me}: set {ps.process_set_id} ranks {ps.ranks} sum {total.item():g} "
      f"comm {back.Get_size()} world {counted.item():g}", flush=True)
back.Free()
hvd.shutdown()
print(f"rank {me}: ok", flush=True)
