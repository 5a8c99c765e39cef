"""A small hyperparameter search: two process sets train two copies of a model at the same time.

The world splits into the even and the odd ranks. Each set is a data-parallel job of its own with
its own learning rate: DistributedOptimizer and broadcast_parameters take process_set=..., so
gradients are averaged only among the set's members and the two sets never wait for each other.
Needs at least 2 ranks.

    tuttirun -np 4 python3 examples/python/two_models.py [--epochs 8] [--lrs 0.002 0.05]
"""
import argparse
import hashlib
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

import tutti.torch as hvd

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=8)
parser.add_argument("--batch-size", type=int, default=32, help="per rank")
parser.add_argument("--lrs", type=float, nargs=2, default=[0.002, 0.05],
                    help="learning rates of the even and the odd set")
args = parser.parse_args()

# Static process sets are passed to init, before hvd.size() can be asked: take the world size
# from the launcher's environment (tuttirun sets TUTTI_SIZE for every rank).
world = int(os.environ["TUTTI_SIZE"])
if world < 2:
    raise SystemExit("two_models.py needs at least 2 ranks (one per process set)")
evens = hvd.ProcessSet(range(0, world, 2))
odds = hvd.ProcessSet(range(1, world, 2))
hvd.init(process_sets=[evens, odds])
torch.set_num_threads(1)  # several ranks share this machine's cores

mine = evens if evens.included() else odds
name = "even" if mine is evens else "odd"
lr = args.lrs[0] if mine is evens else args.lrs[1]
leader = mine.ranks[0]  # a global rank, as every rank argument in the API


def make_data(samples=2048, features=20, classes=4):
    """The same data set on every rank (fixed seed): labels from a random linear teacher."""
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(samples, features, generator=g)
    teacher = torch.randn(features, classes, generator=g)
    return x, (x @ teacher).argmax(dim=1)


x, y = make_data()
# Both sets see the whole data set; within a set, each member keeps its own shard.
x, y = x[mine.rank()::mine.size()], y[mine.rank()::mine.size()]

# Seeded differently on each rank: broadcast_parameters makes the members of a set agree.
torch.manual_seed(100 + hvd.rank())
model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=lr * mine.size(), momentum=0.9)
hvd.broadcast_parameters(model.state_dict(), root_rank=leader, process_set=mine)
hvd.broadcast_optimizer_state(optimizer, root_rank=leader, process_set=mine)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                     process_set=mine)
if hvd.rank() == leader:
    print(f"{name} set, ranks {mine.ranks}: lr {lr}")

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
    # Average the epoch's loss over this set only (the other set is a different experiment).
    epoch_loss = hvd.allreduce(torch.tensor(total / batches), name="epoch_loss",
                               process_set=mine).item()
    first = epoch_loss if first is None else first
    if hvd.rank() == leader:
        print(f"epoch {epoch} loss {epoch_loss:.4f}")

if hvd.rank() == leader:
    print(f"final loss {epoch_loss:.4f} (first {first:.4f})")

# Check on the world: members of a set hold the same parameters, the two sets different ones.
flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
checksum = hashlib.sha256(flat.numpy().tobytes()).hexdigest()
results = hvd.allgather_object((name, lr, epoch_loss, checksum))  # one tuple per rank
checksums = {set_name: {r[3] for r in results if r[0] == set_name} for set_name in ("even", "odd")}
assert all(len(sums) == 1 for sums in checksums.values()), f"a set's replicas diverged: {results}"
assert checksums["even"] != checksums["odd"], "the two sets hold the same parameters"
if hvd.rank() == 0:
    best_name, best_lr, best_loss, _ = min(results, key=lambda r: r[2])
    print(f"best: {best_name} set, lr {best_lr}, final loss {best_loss:.4f}")
    print("sets independent")

hvd.shutdown()
