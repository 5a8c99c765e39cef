"""Data-parallel training of one model on every rank, as in Horovod's PyTorch examples.

Each rank trains a replica of a small MLP on its own shard of a synthetic classification data
set; DistributedOptimizer averages the gradients over all ranks, so the replicas stay identical.

    tuttirun -np 4 python3 examples/python/data_parallel.py [--epochs 8] [--device cuda]

With --device cuda each rank trains on GPU local_rank % (GPUs on its host), as Horovod scripts
pin it; gradients are then averaged on the GPU (NCCL when every rank has a GPU of its own, else
through host memory: docs/gpu.md).
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

import tutti.torch as hvd

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=8)
parser.add_argument("--batch-size", type=int, default=32, help="per rank")
parser.add_argument("--lr", type=float, default=0.02, help="per rank; scaled by the world size")
parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
args = parser.parse_args()
if args.device == "cuda" and not torch.cuda.is_available():
    parser.error("--device cuda: PyTorch sees no CUDA device here")

hvd.init()
torch.set_num_threads(1)  # several ranks share this machine's cores
if args.device == "cuda":
    torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())
    device = torch.device("cuda", torch.cuda.current_device())
else:
    device = torch.device("cpu")


def make_data(samples=2048, features=20, classes=4):
    """The same data set on every rank (fixed seed): labels from a random linear teacher."""
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(samples, features, generator=g)
    teacher = torch.randn(features, classes, generator=g)
    return x, (x @ teacher).argmax(dim=1)


x, y = (t.to(device) for t in make_data())
# Each rank keeps its own shard (what DistributedSampler does in a real script).
x, y = x[hvd.rank()::hvd.size()], y[hvd.rank()::hvd.size()]

# Seeded differently on each rank on purpose: broadcast_parameters below makes them agree.
torch.manual_seed(100 + hvd.rank())
model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 4)).to(device)

# Horovod's convention: the effective batch is size() times larger, so scale the learning rate.
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)

# Start every replica from rank 0's weights and optimizer state.
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)

# Gradients are averaged over the world as backward produces them; step() waits for them.
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

shuffle = torch.Generator().manual_seed(7 + hvd.rank())
first = None
for epoch in range(1, args.epochs + 1):
    total, batches = 0.0, 0
    for batch in torch.randperm(len(x), generator=shuffle).to(device).split(args.batch_size):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x[batch]), y[batch])
        loss.backward()
        optimizer.step()
        total, batches = total + loss.item(), batches + 1
    # The metric every rank reports: this rank's mean loss, averaged over the world.
    epoch_loss = hvd.allreduce(torch.tensor(total / batches, device=device), name="epoch_loss").item()
    first = epoch_loss if first is None else first
    if hvd.rank() == 0:
        print(f"epoch {epoch} loss {epoch_loss:.4f}")

if hvd.rank() == 0:
    print(f"final loss {epoch_loss:.4f} (first {first:.4f})")

# Every replica must hold exactly rank 0's parameters: gather one flat row per rank and compare.
flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
rows = hvd.allgather(flat.unsqueeze(0), name="check.parameters")
assert all(torch.equal(row, rows[0]) for row in rows), "replicas diverged"
if hvd.rank() == 0:
    print("replicas identical")

hvd.shutdown()
