"""horovod.torch's API on tutti against torch references; prints "torch api ok"."""
import gc
import json
import os

import torch

import tutti
import tutti.torch as hvd

evens_set = hvd.ProcessSet(range(0, int(os.environ["TUTTI_SIZE"]), 2))  # tuttirun sets it
hvd.init(process_sets=[evens_set])
rank, size = hvd.rank(), hvd.size()
assert hvd.is_initialized()
try:  # the build queries answer for tutti's GPU module (docs/python.md, porting table)
    module = (tutti.nccl_version(), True)
except tutti.DeviceUnavailableError:
    module = (0, False)
assert (hvd.nccl_built(), hvd.cuda_built()) == module
assert evens_set.process_set_id == 1 and hvd.global_process_set.ranks == list(range(size))
everyone = [torch.arange(12, dtype=torch.float32).reshape(3, 4) + r for r in range(size)]
mine = everyone[rank]
total = sum(everyone)

torch.testing.assert_close(hvd.allreduce(mine), total / size)                     # Average
torch.testing.assert_close(hvd.allreduce(mine, op=hvd.Sum), total)
torch.testing.assert_close(hvd.allreduce(mine, average=False, name="legacy"), total)
torch.testing.assert_close(hvd.allreduce(mine, op=hvd.Min), everyone[0])
torch.testing.assert_close(hvd.allreduce(mine, op=hvd.Sum, prescale_factor=0.5, postscale_factor=4.0),
                           total * 2)
torch.testing.assert_close(hvd.allreduce(mine, compression=hvd.Compression.fp16), total / size)
for dtype in (torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64, torch.uint8,
              torch.int8):
    got = hvd.allreduce(torch.ones(5, dtype=dtype) * (rank + 1), op=hvd.Sum, name=f"d.{dtype}")
    assert got.dtype == dtype and int(got[0]) == size * (size + 1) // 2, (dtype, got)
t = mine.clone()
assert hvd.allreduce_(t, op=hvd.Sum) is t
torch.testing.assert_close(t, total)
# A non-contiguous tensor reduces in place too.
wide = torch.zeros(4, 6)
view = wide[:, ::2]
view += rank + 1
hvd.allreduce_(view, op=hvd.Sum, name="strided")
assert float(wide[0, 0]) == size * (size + 1) / 2 and float(wide[0, 1]) == 0

# Async handles; the tensor's last Python reference dropped before synchronize.
handle = hvd.allreduce_async_(torch.full((1000,), float(rank)), op=hvd.Sum, name="dropped")
gc.collect()
result = hvd.synchronize(handle)
assert float(result[0]) == size * (size - 1) / 2
handle = hvd.allreduce_async(mine, name="polled")
while not hvd.poll(handle):
    pass
torch.testing.assert_close(hvd.synchronize(handle), total / size)
a, b = hvd.grouped_allreduce([mine, mine * 2], op=hvd.Sum)
torch.testing.assert_close(b, total * 2)
group = [mine.clone(), mine.clone()]
hvd.grouped_allreduce_(group, op=hvd.Sum)
torch.testing.assert_close(group[0], total)

gathered = hvd.allgather(torch.full((rank + 1, 2), rank))
assert gathered.shape == (size * (size + 1) // 2, 2) and int(gathered[-1, 0]) == size - 1
x, y = hvd.grouped_allgather([torch.tensor([rank]), torch.tensor([[rank, rank]])])
assert x.tolist() == list(range(size)) and y.shape == (size, 2)
b = torch.full((3,), float(rank))
assert float(hvd.broadcast(b, root_rank=size - 1)[0]) == size - 1 and float(b[0]) == rank
hvd.broadcast_(b, root_rank=0)
assert float(b[0]) == 0
received = hvd.alltoall(torch.arange(2 * size) + 100 * rank)
assert received.tolist() == [100 * r + 2 * rank + k for r in range(size) for k in range(2)]
out, splits = hvd.alltoall(torch.full((size,), rank), splits=[1] * size)
assert splits.tolist() == [1] * size and out.tolist() == list(range(size))
rows = hvd.reducescatter(torch.ones(2 * size, 3), op=hvd.Sum)
assert rows.shape == (2, 3) and float(rows[0, 0]) == size
hvd.barrier()

# Autograd through collectives, as in Horovod: an allreduce's gradient is reduced alike; those of
# allgather and broadcast are averaged over the set (Horovod's convention).
x = torch.full((2,), float(rank + 1), requires_grad=True)
hvd.allreduce(x, op=hvd.Sum, name="ad.allreduce").sum().backward()
assert x.grad.tolist() == [float(size)] * 2, x.grad
x = torch.ones(rank + 1, 2, requires_grad=True)
gathered = hvd.allgather(x, name="ad.allgather")
(gathered * torch.arange(gathered.shape[0]).unsqueeze(1)).sum().backward()
first_row = rank * (rank + 1) // 2  # this rank's rows start after everyone before it
assert x.grad[:, 0].tolist() == [float(first_row + k) for k in range(rank + 1)], x.grad
x = torch.ones(3, requires_grad=True)
hvd.broadcast(x, root_rank=0, name="ad.broadcast").sum().backward()
assert x.grad.tolist() == [float(1 if rank == 0 else 0)] * 3, x.grad

# Process sets: static (evens), dynamic (odds), calls on the set object.
if evens_set.included():
    assert evens_set.rank() == evens_set.ranks.index(rank)
    torch.testing.assert_close(evens_set.allreduce(torch.ones(2), op=hvd.Sum),
                               torch.full((2,), float(evens_set.size())))
else:
    assert evens_set.rank() == -1
odds = hvd.add_process_set(hvd.ProcessSet(range(1, size, 2)))
if odds.included():
    torch.testing.assert_close(hvd.allreduce(torch.ones(1), op=hvd.Sum, process_set=odds),
                               torch.full((1,), float(odds.size())))
assert hvd.remove_process_set(odds)  # every rank removes it, as in Horovod
assert odds.process_set_id is None and not hvd.remove_process_set(odds)

# Objects and model state.
assert hvd.broadcast_object({"from": rank}, root_rank=0) == {"from": 0}
assert hvd.allgather_object(rank * 10) == [r * 10 for r in range(size)]
torch.manual_seed(rank)
model = torch.nn.Linear(3, 2)
opt = torch.optim.Adam(model.parameters(), lr=0.01 * (rank + 1))
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(opt, root_rank=0)
weights = hvd.allgather(model.weight.detach().reshape(1, -1))
assert all(torch.equal(weights[0], weights[r]) for r in range(size))
assert opt.param_groups[0]["lr"] == 0.01
assert hvd.join() in range(size)
timeline = f"/tmp/tutti-torch-api-{os.getpid()}.json"
hvd.start_timeline(timeline)
hvd.allreduce(torch.ones(2), name="traced")
hvd.stop_timeline()
with open(timeline) as f:
    events = json.load(f)["traceEvents"]
os.remove(timeline)
assert any(e.get("name") == "traced" for e in events), events
hvd.shutdown()
print("torch api ok")
