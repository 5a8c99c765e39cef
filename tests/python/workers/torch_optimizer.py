"""DistributedOptimizer: replicas stay identical and match one process training on the
concatenated batch; backward_passes_per_step=2 halves the allreduces; a DataLoader forking
worker processes during training works. Prints "optimizer ok"."""
import copy

import torch

import tutti
import tutti.torch as hvd

hvd.init()
rank, size = hvd.rank(), hvd.size()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
reference = copy.deepcopy(model)
shards = [torch.randn(16, 6, generator=torch.Generator().manual_seed(100 + r)) for r in range(size)]
targets = [s.sum(1, keepdim=True) for s in shards]


def loss_of(net, x, y):
    return torch.nn.functional.mse_loss(net(x), y)


# 1. Distributed SGD on each rank's shard == SGD on all shards at once.
opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                               named_parameters=model.named_parameters())
ref_opt = torch.optim.SGD(reference.parameters(), lr=0.05)
for step in range(10):
    opt.zero_grad()
    loss_of(model, shards[rank], targets[rank]).backward()
    opt.step()
    ref_opt.zero_grad()
    loss_of(reference, torch.cat(shards), torch.cat(targets)).backward()
    ref_opt.step()
for p, q in zip(model.parameters(), reference.parameters()):
    torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
flat = torch.cat([p.detach().flatten() for p in model.parameters()]).unsqueeze(0)
replicas = hvd.allgather(flat)
assert all(torch.equal(replicas[0], replicas[r]) for r in range(size)), "replicas differ"

# 2. Two backward passes per step: one allreduce per parameter per step, not two.
# (A fresh copy: the first optimizer's hooks stay on the first model's parameters.)
model = copy.deepcopy(reference)
n_params = len(list(model.parameters()))
opt2 = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                named_parameters=[("b." + n, p) for n, p in model.named_parameters()],
                                backward_passes_per_step=2)
before = tutti.counters()["tensors_executed"]
for step in range(3):
    opt2.zero_grad()
    for half in torch.chunk(shards[rank], 2):
        loss_of(model, half, half.sum(1, keepdim=True)).backward()
    opt2.step()
executed = tutti.counters()["tensors_executed"] - before
assert executed == 3 * n_params, f"{executed} allreduces for 3 steps of {n_params} parameters"

# 3. A DataLoader whose workers are forked from this (multi-threaded) process.
model = copy.deepcopy(reference)
dataset = torch.utils.data.TensorDataset(shards[rank], targets[rank])
loader = torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=2)
opt3 = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                named_parameters=[("c." + n, p) for n, p in model.named_parameters()])
for epoch in range(2):
    for x, y in loader:
        opt3.zero_grad()
        loss_of(model, x, y).backward()
        opt3.step()
flat = torch.cat([p.detach().flatten() for p in model.parameters()]).unsqueeze(0)
replicas = hvd.allgather(flat)
assert all(torch.equal(replicas[0], replicas[r]) for r in range(size)), "replicas differ"
hvd.shutdown()
print("optimizer ok")
