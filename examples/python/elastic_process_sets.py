"""Elastic training with process sets: two sets train two models, and one set loses a rank.

The world splits into the even and the odd ranks, each a data-parallel job of its own (as in
two_models.py), each wrapped in hvd.elastic.run with a TorchState and an ElasticSampler bound to
its set. Rank --kill-rank kills itself with SIGKILL in --kill-epoch. Its set restores its last
commit, re-shards the rest of the epoch over its survivors and goes on; the other set never
notices and never restores. Run it as an elastic job (tuttirun --min-np); needs 4 ranks or more.

    tuttirun -np 4 --min-np 2 python3 examples/python/elastic_process_sets.py [--kill-rank 3]
"""
import argparse
import os
import signal

import torch
import torch.nn as nn
import torch.nn.functional as F

import tutti
import tutti.torch as hvd

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=6)
parser.add_argument("--batch-size", type=int, default=32, help="per rank")
parser.add_argument("--kill-rank", type=int, default=3, help="the rank that dies (-1: none)")
parser.add_argument("--kill-epoch", type=int, default=2)
args = parser.parse_args()

world = int(os.environ["TUTTI_SIZE"])
if world < 4:
    raise SystemExit("elastic_process_sets.py needs at least 4 ranks (two sets of two)")
evens = hvd.ProcessSet(range(0, world, 2))
odds = hvd.ProcessSet(range(1, world, 2))
hvd.init(process_sets=[evens, odds])
torch.set_num_threads(1)  # several ranks share this machine's cores
me = hvd.rank()  # this process's rank at the start; ranks are renumbered when the job re-forms
mine = evens if evens.included() else odds
name = "even" if mine is evens else "odd"


def make_data(samples=2048, features=20, classes=4):
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(samples, features, generator=g)
    teacher = torch.randn(features, classes, generator=g)
    return x, (x @ teacher).argmax(dim=1)


x, y = make_data()
dataset = torch.utils.data.TensorDataset(x, y)
sampler = hvd.elastic.ElasticSampler(dataset, seed=7, process_set=mine)
torch.manual_seed(100 + me)
model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                     process_set=mine)
state = hvd.elastic.TorchState(model, optimizer, process_set=mine, sampler=sampler, epoch=0,
                               first=None)
restores = 0  # how often this rank's set went back to a commit
state.register_reset_callbacks([lambda: print(f"{name} set re-formed: ranks {mine.ranks}, "
                                              f"this rank is now {hvd.rank()}", flush=True)])


@hvd.elastic.run
def train(state):
    for state.epoch in range(state.epoch, args.epochs):
        loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size,
                                             sampler=state.sampler)
        total, batches = 0.0, 0
        for index, (xb, yb) in enumerate(loader):
            if me == args.kill_rank and state.epoch == args.kill_epoch and index == 3:
                os.kill(os.getpid(), signal.SIGKILL)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            state.sampler.record_batch(index, args.batch_size)
            total, batches = total + loss.item(), batches + 1
            if index % 8 == 7:
                state.commit()
        epoch_loss = hvd.allreduce(torch.tensor(total / max(batches, 1)), name="epoch_loss",
                                   process_set=mine).item()
        state.first = epoch_loss if state.first is None else state.first
        if hvd.rank() == min(mine.ranks):
            print(f"{name} set epoch {state.epoch} loss {epoch_loss:.4f}", flush=True)
        state.sampler.set_epoch(state.epoch + 1)
        state.epoch += 1
        state.commit()
    return epoch_loss


original_restore = state.restore


def restore():
    global restores
    restores += 1
    original_restore()


state.restore = restore
final = train(state)
if hvd.rank() == min(mine.ranks):
    print(f"{name} set final loss {final:.4f} (first {state.first:.4f}), restored "
          f"{restores} times, membership epoch {tutti.membership_epoch()}", flush=True)
    print("final loss %.4f (first %.4f)" % (final, state.first), flush=True)
# A world collective after the job re-formed: acknowledge the re-formation first (the set that
# lost a rank did so in hvd.elastic.run; the other set never had to).
tutti.await_membership_epoch(0)
everyone = hvd.allgather_object((name, restores), name="restores")
if hvd.rank() == 0:
    lost = {n for n, r in everyone if r > 0}
    expected = set() if args.kill_rank < 0 else {"even" if args.kill_rank % 2 == 0 else "odd"}
    print("sets survived" if lost == expected else f"unexpected restores: {everyone}", flush=True)
hvd.shutdown()
