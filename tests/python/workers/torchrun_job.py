"""A torchrun job (tests/python/test_torchrun.py): torch.distributed.init_process_group('gloo'),
then hvd.init() with no coordinator named (zero-setup: rank 0 starts tuttid and publishes it
through torchrun's TCPStore). `early` calls hvd.init() first, with a short timeout."""
import os
import sys

import torch
import torch.distributed as dist

import tutti.torch as hvd

if len(sys.argv) > 1 and sys.argv[1] == "early":
    try:
        hvd.init(timeout_ms=3000)
        print(f"rank {os.environ['RANK']}: init returned", flush=True)
    except Exception as e:
        print(f"rank {os.environ['RANK']}: {type(e).__name__}: {e}", flush=True)
    sys.exit(0)
dist.init_process_group("gloo")
hvd.init()
r = hvd.rank()
assert r == dist.get_rank() and hvd.size() == dist.get_world_size()
t = hvd.allreduce(torch.tensor([float(r + 1)]), op=hvd.Sum, name="x")
g = torch.tensor([float(r + 1)])
dist.all_reduce(g)
print(f"rank {r}: tutti {t.item():g} gloo {g.item():g} size {hvd.size()}", flush=True)
hvd.shutdown()
dist.destroy_process_group()
print(f"rank {r}: ok", flush=True)
