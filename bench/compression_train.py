"""One rank of bench/compression.sh: trains a small MLP on synthetic data (a fixed random teacher
network labels Gaussian inputs into 10 classes) with tutti.torch's DistributedOptimizer and one
compressor, then prints one JSON line: the compressor, steps, median and mean step time, the
bytes this rank sent on the data plane per step (tutti.peer_stats, every peer), the training loss
at the start and the end (averaged over ranks and the last 10 steps), and the held-out loss and
accuracy after training (every rank evaluates the same held-out set).

  python3 bench/compression_train.py COMPRESSOR [STEPS]
COMPRESSOR: none, fp16 (Horovod's cast), wire_fp16, wire_bf16, topk (1%), adaptive (bf16)."""
import json
import statistics
import sys
import time

import torch

import tutti
import tutti.torch as hvd

name = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 100
hvd.init()
torch.set_num_threads(1)
C = hvd.Compression
compression = {"none": C.none, "fp16": C.fp16, "wire_fp16": C.wire_fp16,
               "wire_bf16": C.wire_bf16, "topk": C.topk(0.01),
               "adaptive": C.adaptive(C.wire_bf16, interval=10, min_bytes=65536,
                                      max_change=0.3)}[name]

torch.manual_seed(0)
teacher = torch.nn.Sequential(torch.nn.Linear(256, 64), torch.nn.Tanh(), torch.nn.Linear(64, 10))
model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(),
                            torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10))
optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
                                     named_parameters=model.named_parameters(),
                                     compression=compression)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)


def batch(generator, size):
    x = torch.randn(size, 256, generator=generator)
    with torch.no_grad():
        y = teacher(x).argmax(dim=1)
    return x, y


generator = torch.Generator().manual_seed(1000 + hvd.rank())
held_out = batch(torch.Generator().manual_seed(7), 4096)
peers = [p for p in range(hvd.size()) if p != hvd.rank()]
sent = lambda: sum(tutti.peer_stats(p)["bytes_sent"] for p in peers)

times, losses = [], []
warmup = 5
for step in range(warmup + steps):
    if step == warmup:
        start_bytes = sent()
    x, y = batch(generator, 64)
    began = time.perf_counter()
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    if step >= warmup:
        times.append(time.perf_counter() - began)
    losses.append(hvd.allreduce(loss.detach(), name="loss").item())
bytes_per_step = (sent() - start_bytes) / steps
with torch.no_grad():
    logits = model(held_out[0])
    test_loss = torch.nn.functional.cross_entropy(logits, held_out[1]).item()
    accuracy = (logits.argmax(dim=1) == held_out[1]).float().mean().item()
if hvd.rank() == 0:
    print(json.dumps({
        "compressor": name, "ranks": hvd.size(), "steps": steps,
        "gradient_bytes": sum(p.numel() * 4 for p in model.parameters()),
        "median_step_ms": round(1000 * statistics.median(times), 2),
        "mean_step_ms": round(1000 * statistics.mean(times), 2),
        "bytes_sent_per_step": round(bytes_per_step),
        "first_loss": round(statistics.mean(losses[:10]), 4),
        "last_loss": round(statistics.mean(losses[-10:]), 4),
        "test_loss": round(test_loss, 4), "test_accuracy": round(accuracy, 4)}), flush=True)
hvd.shutdown()
