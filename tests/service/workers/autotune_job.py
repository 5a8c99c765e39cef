"""Rank of an autotuned job (tests/service/test_autotune.py): STEPS steps, each allreducing three
tensors at once (8 KiB, 64 KiB, 1 MiB of float32) and checking the sums; then, from its own
timeline, one line per collective the lane ran: "ran <set> <tensors> <algorithm>", in order, so
the test can compare the members. Prints "done", waits for a line on stdin, leaves, and prints
"autotune job ok".

With ASK (the third argument) the job also adds the set of ranks 0 and 1, whose members run the
same three tensors on it each step. From step ASK on, rank 0 asks for it to be tuned
(tutti.process_set_autotune) at the first step by which tuttid has put the set on its members'
fast path (or 100 steps later), printing "grants before the ask <n>" (tuttid's fast-path grants
of the set) and then "unknown <class>: <message>" for a set that does not exist; at step ASK
rank 2, no member, tries and prints "refused <class>: <message>".
  python3 autotune_job.py STEPS TIMELINE [ASK]"""
import json
import sys

import numpy as np

import tutti

steps, timeline = int(sys.argv[1]), sys.argv[2]
ask_at = int(sys.argv[3]) if len(sys.argv) > 3 else None
tutti.init()
rank, size = tutti.rank(), tutti.size()
sets = {tutti.WORLD: list(range(size))}
if ask_at is not None:
    pair = tutti.add_process_set([0, 1])
    sets[pair] = [0, 1]
tutti.start_timeline(timeline)
sizes = {"small": 2048, "mid": 16384, "big": 262144}
asked = False
for step in range(steps):
    if ask_at is not None and step >= ask_at and rank == 0 and not asked:
        grants = tutti.coordinator_counters(pair)["fast_path_grants"]
        asked = grants > 0 or step >= ask_at + 100
    if asked is True and rank == 0:
        asked = "yes"
        print("grants before the ask", grants, flush=True)
        tutti.process_set_autotune(pair)
        try:
            tutti.process_set_autotune(77)
        except tutti.TuttiError as error:
            print(f"unknown {type(error).__name__}: {error}", flush=True)
    if step == ask_at and rank == 2:
        try:
            tutti.process_set_autotune(pair)
        except tutti.TuttiError as error:
            print(f"refused {type(error).__name__}: {error}", flush=True)
    handles = {(set_id, name): tutti.allreduce_async(np.full(n, rank + step, np.float32),
                                                     name=name, op=tutti.Sum, process_set=set_id)
               for set_id, members in sets.items() if rank in members
               for name, n in sizes.items()}
    for (set_id, name), handle in handles.items():
        if not np.all(handle.wait() == sum(r + step for r in sets[set_id])):
            print(f"fail {name} set {set_id} step {step}", flush=True)
            sys.exit(1)
tutti.stop_timeline()
with open(timeline) as f:
    events = json.load(f)["traceEvents"]
track = {e["tid"]: e["args"]["name"].split()[-1] for e in events if e.get("name") == "thread_name"}
for event in sorted((e for e in events if e.get("ph") == "X" and "algorithm" in e.get("args", {})),
                    key=lambda e: e["ts"]):
    args = event["args"]
    tensors = args.get("tensors") or [args.get("tensor")]
    print("ran", track.get(event["tid"], "?"), "+".join(tensors), args["algorithm"], flush=True)
print("done", flush=True)
sys.stdin.readline()  # the test reads tuttid's status page while the job is still there
tutti.shutdown()
print("autotune job ok", flush=True)
