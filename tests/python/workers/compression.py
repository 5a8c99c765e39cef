"""Library compression on every rank (docs/compression.md), checked against the NumPy versions
of the same algorithms (compression_reference.py) with the same seeds. Prints:
  "cast KIND ok" / "fail ...": fp16 and bf16 sums equal bit for bit to the reference ring;
  "topk ok": three steps of top-k with error feedback, bit for bit;
  "hash NAME HEX": results the test compares across ranks;
  "converged DISTANCE": gradient descent on a toy quadratic with top-k at 5%;
  "decisions NAME CHOICE@ALLREDUCE...": the adaptive policy's revisits, from this rank's timeline;
  "counters K V...", "error WHAT Class message", "compression ok"."""
import hashlib
import json
import sys

import numpy as np

import tutti
from compression_reference import TopK, cast_ring_allreduce

tutti.init()
rank, size = tutti.rank(), tutti.size()
timeline = sys.argv[1] + f".{rank}.json"
tutti.start_timeline(timeline)


def data(seed, member, count):
    return np.random.default_rng(seed * 1000 + member).standard_normal(count).astype(np.float32)


def say(*words):
    print(*words, flush=True)


def digest(array):
    return hashlib.sha256(array.tobytes()).hexdigest()[:16]


# fp16 and bf16 rings, sums of an uneven count, against the reference bit for bit.
count = 100003
for kind, compression in (("fp16", tutti.Compression.wire_fp16),
                          ("bf16", tutti.Compression.wire_bf16)):
    got = tutti.allreduce(data(1, rank, count), op=tutti.Sum, name=f"cast.{kind}",
                          compression=compression)
    want = cast_ring_allreduce([data(1, m, count) for m in range(size)], kind)
    exact = np.sum([data(1, m, count).astype(np.float64) for m in range(size)], axis=0)
    if got.dtype != np.float32 or not np.array_equal(got, want):
        say("fail", kind, "differs from the reference at", int(np.argmax(got != want)))
    else:
        say("cast", kind, "ok", f"{float(np.max(np.abs(got - exact))):.3g}")
    say("hash", kind, digest(got))
    # Average: the sum divided by the set size.
    averaged = tutti.allreduce(data(1, rank, count), op=tutti.Average, name=f"cast.avg.{kind}",
                               compression=compression)
    if not np.allclose(averaged, want / size, rtol=1e-6, atol=1e-7):
        say("fail", kind, "average")

# Top-k, three steps of one tensor (error feedback carried), bit for bit.
reference = TopK(size, 5001, 0.02)
for step in range(3):
    inputs = [data(10 + step, m, 5001) for m in range(size)]
    got = tutti.allreduce(inputs[rank], op=tutti.Sum, name="sparse",
                          compression=tutti.Compression.topk(0.02))
    want = reference.step(inputs)
    if not np.array_equal(got, want):
        say("fail topk step", step, "differs at", int(np.argmax(got != want)))
        break
else:
    say("topk ok")
say("hash topk", digest(got))

# Error feedback converging: minimise sum_r |d_r * (w - w*)|^2 / 2 (each member its own
# curvature d_r, one optimum w*) with 5% top-k gradients and a constant step.
dim = 2000
optimum = data(20, 99, dim)
curvature = (0.5 + np.random.default_rng(40 + rank).random(dim)).astype(np.float32)
w = np.zeros(dim, np.float32)
for step in range(400):
    grad = tutti.allreduce(curvature * (w - optimum), op=tutti.Average, name="toy",
                           compression=tutti.Compression.topk(0.05))
    w -= 0.2 * grad
say("converged", f"{float(np.linalg.norm(w - optimum) / np.linalg.norm(optimum)):.3g}")
say("hash toy", digest(w))

# The adaptive policy: revisits every 4 allreduces; tensors of 64 KiB and more whose reduced
# norm changes by at most 20% over an interval get bf16.
policy = tutti.Compression.adaptive(tutti.Compression.wire_bf16, interval=4, min_bytes=65536,
                                    max_change=0.2)
rng = np.random.default_rng(30 + rank)
for step in range(16):
    stable = (1.0 + 0.01 * rng.standard_normal(40000)).astype(np.float32)  # 160 KB
    moving = (rng.standard_normal(40000) * (1 + 4 * (step % 2))).astype(np.float32)
    small = rng.standard_normal(1000).astype(np.float32)  # 4 KB
    handles = [tutti.allreduce_async(t, name=name, compression=policy)
               for name, t in (("stable", stable), ("moving", moving), ("small", small))]
    results = [h.wait() for h in handles]
say("hash adaptive", digest(np.concatenate(results)))
counters = tutti.set_counters()
say("counters", " ".join(f"{k} {counters[k]}" for k in
                         ("tensors_compressed", "adaptive_revisits", "adaptive_compress_choices")))

# Errors, on every rank.
try:
    tutti.allreduce(np.ones(10, np.float64), name="wide", compression=tutti.Compression.wire_fp16)
except tutti.TuttiError as e:
    say("error dtype", type(e).__name__, e)
try:
    tutti.allreduce(np.ones(10, np.float32), name="ratio", compression=tutti.Compression.topk(0))
except tutti.TuttiError as e:
    say("error ratio", type(e).__name__, e)
try:
    tutti.allreduce(np.ones(10, np.float32), op=tutti.Max, name="max",
                    compression=tutti.Compression.wire_bf16)
except tutti.TuttiError as e:
    say("error op", type(e).__name__, e)
try:
    # Rank 0 compresses, the others do not: refused on every rank.
    tutti.allreduce(np.ones(10, np.float32), name="mixed",
                    compression=tutti.Compression.wire_fp16 if rank == 0 else None)
except tutti.TuttiError as e:
    say("error mixed", type(e).__name__, e)

tutti.stop_timeline()
decisions = {}
with open(timeline) as f:
    events = json.load(f)["traceEvents"]
for event in events:
    if event.get("name") == "COMPRESSION_DECISION":
        a = event["args"]
        decisions.setdefault(a["tensor"], []).append(f"{a['choice']}@{a['allreduce']}")
for name in sorted(decisions):
    say("decisions", name, " ".join(decisions[name]))
tutti.shutdown()
say("compression ok")
