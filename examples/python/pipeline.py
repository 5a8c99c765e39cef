"""A two-stage pipeline: the frontend ranks compute features, the backend ranks classify them.

The first half of the ranks hold the feature layers (the frontend set), the second half the
classifier (the backend set). Frontend rank i works with backend rank i + n/2 on the same shard
of the data: it sends its batch's features there with hvd.send, and receives back the gradient
of the loss with respect to those features, which it backpropagates through its own layers.
Each stage steps its own optimizer; a stage with several ranks is data-parallel inside its set
(DistributedOptimizer on the stage's process set). Needs an even number of ranks.

    tuttirun -np 4 python3 examples/python/pipeline.py [--epochs 8]
"""
import argparse
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

import tutti.torch as hvd

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=8)
parser.add_argument("--batch-size", type=int, default=32, help="per pair of ranks")
parser.add_argument("--lr", type=float, default=0.02)
args = parser.parse_args()

FORWARD, BACKWARD = 1, 2  # tags: features go forward, their gradients come back
HIDDEN = 32               # features per sample sent from frontend to backend

# Static process sets are passed to init: take the world size from the launcher's environment.
world = int(os.environ["TUTTI_SIZE"])
if world % 2:
    raise SystemExit("pipeline.py needs an even number of ranks")
half = world // 2
frontend = hvd.ProcessSet(range(0, half))
backend = hvd.ProcessSet(range(half, world))
hvd.init(process_sets=[frontend, backend])
torch.set_num_threads(1)  # several ranks share this machine's cores

is_frontend = frontend.included()
stage = frontend if is_frontend else backend
partner = hvd.rank() + half if is_frontend else hvd.rank() - half  # global ranks


def make_data(samples=2048, features=20, classes=4):
    """The same data set on every rank (fixed seed): labels from a random nonlinear teacher."""
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(samples, features, generator=g)
    w1, w2 = torch.randn(features, 16, generator=g), torch.randn(16, classes, generator=g)
    return x, (torch.tanh(x @ w1) @ w2).argmax(dim=1)


# Both ranks of a pair take the same shard: the frontend needs the inputs, the backend the labels.
x, y = make_data()
x, y = x[stage.rank()::half], y[stage.rank()::half]

torch.manual_seed(100 + hvd.rank())
if is_frontend:
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, HIDDEN), nn.ReLU())
else:
    model = nn.Linear(HIDDEN, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * stage.size(), momentum=0.9)
# The replicas of one stage start equal and stay equal: broadcast, then average within the stage.
hvd.broadcast_parameters(model.state_dict(), root_rank=stage.ranks[0], process_set=stage)
if stage.size() > 1:
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         process_set=stage)

# The pair shuffles its shard identically, so that features and labels stay matched.
shuffle = torch.Generator().manual_seed(7 + stage.rank())
first = None
for epoch in range(1, args.epochs + 1):
    total, batches = 0.0, 0
    for batch in torch.randperm(len(x), generator=shuffle).split(args.batch_size):
        optimizer.zero_grad()
        if is_frontend:
            features = model(x[batch])
            hvd.send(features.detach(), partner, tag=FORWARD)
            grad = hvd.recv(torch.empty_like(features), partner, tag=BACKWARD)
            features.backward(grad)  # continue backpropagation from the backend's gradient
        else:
            features = hvd.recv(torch.empty(len(batch), HIDDEN), partner, tag=FORWARD)
            features.requires_grad_()  # so that backward leaves d loss / d features in .grad
            loss = F.cross_entropy(model(features), y[batch])
            loss.backward()
            hvd.send(features.grad, partner, tag=BACKWARD)
            total, batches = total + loss.item(), batches + 1
        optimizer.step()
    if not is_frontend:  # only the backend sees the loss; average it over the backend set
        epoch_loss = hvd.allreduce(torch.tensor(total / batches), name="epoch_loss",
                                   process_set=backend).item()
        first = epoch_loss if first is None else first
        if hvd.rank() == backend.ranks[0]:
            print(f"epoch {epoch} loss {epoch_loss:.4f}")

if hvd.rank() == backend.ranks[0]:
    print(f"final loss {epoch_loss:.4f} (first {first:.4f})")

# Check: every stage's replicas hold identical parameters (allgather within the stage).
flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
rows = hvd.allgather(flat.unsqueeze(0), name="check.parameters", process_set=stage)
consistent = all(torch.equal(row, rows[0]) for row in rows)
if all(hvd.allgather_object(consistent)):
    if hvd.rank() == 0:
        print("stages consistent")
else:
    raise SystemExit(f"rank {hvd.rank()}: a stage's replicas diverged")

hvd.shutdown()
