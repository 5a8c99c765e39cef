"""Rank of an autotuned job (tests/service/test_autotune.py): STEPS steps, each allreducing three
tensors at once (8 KiB, 64 KiB, 1 MiB of float32) and checking the sums; then, from its own
timeline, one line per collective the lane ran: "ran <tensors> <algorithm>", in order, so the
test can compare the members. Prints "done", waits for a line on stdin, leaves, and prints
"autotune job ok".
  python3 autotune_job.py STEPS TIMELINE"""
import json
import sys

import numpy as np

import tutti

steps, timeline = int(sys.argv[1]), sys.argv[2]
tutti.init()
rank, size = tutti.rank(), tutti.size()
tutti.start_timeline(timeline)
sizes = {"small": 2048, "mid": 16384, "big": 262144}
for step in range(steps):
    handles = {name: tutti.allreduce_async(np.full(n, rank + step, np.float32), name=name,
                                           op=tutti.Sum)
               for name, n in sizes.items()}
    want = sum(r + step for r in range(size))
    for name, handle in handles.items():
        if not np.all(handle.wait() == want):
            print(f"fail {name} step {step}", flush=True)
            sys.exit(1)
tutti.stop_timeline()
with open(timeline) as f:
    events = json.load(f)["traceEvents"]
for event in sorted((e for e in events if e.get("ph") == "X" and "algorithm" in e.get("args", {})),
                    key=lambda e: e["ts"]):
    args = event["args"]
    tensors = args.get("tensors") or [args.get("tensor")]
    print("ran", "+".join(tensors), args["algorithm"], flush=True)
print("done", flush=True)
sys.stdin.readline()  # the test reads tuttid's status page while the job is still there
tutti.shutdown()
print("autotune job ok", flush=True)
