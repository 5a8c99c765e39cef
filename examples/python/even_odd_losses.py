"""One model trained on the world, its loss reported per group of ranks.

All ranks train one data-parallel model (DistributedOptimizer on the world). The even and the odd
ranks form two process sets, and each set averages its own members' losses for reporting with
hvd.allreduce(loss, process_set=...). The odd ranks' shards carry label noise, so the two sets
report different losses for the same model. Needs at least 2 ranks.

    tuttirun -np 4 python3 examples/python/even_odd_losses.py [--epochs 8]
"""
import argparse
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

import tutti.torch as hvd

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=8)
parser.add_argument("--batch-size", type=int, default=32, help="per rank")
parser.add_argument("--lr", type=float, default=0.02, help="per rank; scaled by the world size")
parser.add_argument("--noise", type=float, default=0.2, help="odd ranks' share of wrong labels")
args = parser.parse_args()

# Static process sets are passed to init: take the world size from the launcher's environment.
world = int(os.environ["TUTTI_SIZE"])
if world < 2:
    raise SystemExit("even_odd_losses.py needs at least 2 ranks (one per process set)")
evens = hvd.ProcessSet(range(0, world, 2))
odds = hvd.ProcessSet(range(1, world, 2))
hvd.init(process_sets=[evens, odds])
torch.set_num_threads(1)  # several ranks share this machine's cores

mine = evens if evens.included() else odds
name = "even" if mine is evens else "odd"


def make_data(samples=2048, features=20, classes=4):
    """The same data set on every rank (fixed seed): labels from a random linear teacher."""
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(samples, features, generator=g)
    teacher = torch.randn(features, classes, generator=g)
    return x, (x @ teacher).argmax(dim=1)


x, y = make_data()
x, y = x[hvd.rank()::hvd.size()], y[hvd.rank()::hvd.size()].clone()
if mine is odds:  # replace a share of the odd ranks' labels by random ones
    g = torch.Generator().manual_seed(99 + hvd.rank())
    noisy = torch.rand(len(y), generator=g) < args.noise
    y[noisy] = torch.randint(0, 4, (int(noisy.sum()),), generator=g)

torch.manual_seed(100 + hvd.rank())
model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)
# No process_set: gradients are averaged over the world, so every rank trains the same model.
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

shuffle = torch.Generator().manual_seed(7 + hvd.rank())
first = None
for epoch in range(1, args.epochs + 1):
    total, batches = 0.0, 0
    for batch in torch.randperm(len(x), generator=shuffle).split(args.batch_size):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x[batch]), y[batch])
        loss.backward()
        optimizer.step()
        total, batches = total + loss.item(), batches + 1
    mean = torch.tensor(total / batches, dtype=torch.float64)
    # The set's average, for reporting; the world's average, to check it against.
    set_loss = hvd.allreduce(mean, name="set_loss", process_set=mine).item()
    world_loss = hvd.allreduce(mean, name="world_loss").item()
    # Check: the world's average is the size-weighted mean of the two sets' averages, which is
    # what averaging the set averages over the world computes (each counted once per member).
    weighted = hvd.allreduce(torch.tensor(set_loss, dtype=torch.float64), name="weighted")
    assert math.isclose(weighted.item(), world_loss, rel_tol=1e-9), (weighted, world_loss)
    first = set_loss if first is None else first
    if hvd.rank() == mine.ranks[0]:
        print(f"epoch {epoch} loss {set_loss:.4f} ({name} set, world {world_loss:.4f})")

if hvd.rank() == mine.ranks[0]:
    print(f"final loss {set_loss:.4f} (first {first:.4f})")
if hvd.rank() == 0:
    print("set losses consistent")

hvd.shutdown()
