"""tutti.torch's compression names on 3 ranks: the library compressors through hvd.allreduce
(compared with NumPy), then a DistributedOptimizer trained 30 steps on synthetic data with none,
wire_bf16, topk(0.1) and adaptive(...). Prints "names ...", "functions ok", per compressor
"params NAME HASH" and "loss NAME FIRST LAST", and "torch compression ok"."""
import hashlib

import numpy as np
import torch

import tutti.torch as hvd
from compression_reference import cast_ring_allreduce

hvd.init()
rank, size = hvd.rank(), hvd.size()
C = hvd.Compression
adaptive = C.adaptive(C.wire_bf16, interval=5, min_bytes=1024, max_change=0.5)
print("names", C.wire_fp16, C.wire_bf16, C.topk(0.1), adaptive, flush=True)

inputs = [np.random.default_rng(m).standard_normal(1001).astype(np.float32) for m in range(size)]
got = hvd.allreduce(torch.from_numpy(inputs[rank]), op=hvd.Sum, name="f",
                    compression=C.wire_fp16)
assert np.array_equal(got.numpy(), cast_ring_allreduce(inputs, "fp16")), "fp16 differs"
# Not float32: reduced exactly, as Horovod's fp16 leaves what it cannot cast.
ints = hvd.allreduce(torch.full((5,), rank, dtype=torch.int64), op=hvd.Sum, name="i",
                     compression=C.wire_fp16)
assert ints.tolist() == [sum(range(size))] * 5
print("functions ok", flush=True)

for label, compression in (("none", C.none), ("bf16", C.wire_bf16), ("topk", C.topk(0.1)),
                           ("adaptive", adaptive)):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                         named_parameters=model.named_parameters(),
                                         compression=compression)
    generator = torch.Generator().manual_seed(100 + rank)
    truth = torch.arange(32, dtype=torch.float32) / 32
    losses = []
    for step in range(30):
        x = torch.randn(64, 32, generator=generator)
        y = (x @ truth).unsqueeze(1)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(hvd.allreduce(loss.detach(), name=f"loss.{label}").item())
    digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes()
                                     for p in model.parameters())).hexdigest()[:16]
    print("params", label, digest, flush=True)
    print("loss", label, f"{losses[0]:.4f}", f"{losses[-1]:.4f}", flush=True)
hvd.shutdown()
print("torch compression ok", flush=True)
