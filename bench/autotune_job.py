"""One rank of bench/autotune.sh: two process sets with different workloads in one step loop,
each step running both in turn: set "many" (every rank) allreduces 200 tensors of 4 KiB, set "few"
(every rank but the last) 4 of 8 MiB. Two distinct sets need distinct rank lists: tuttid hands an
add of an existing set's ranks that set (so on 2 ranks, "few" would be the world set itself).
The last rank runs "many" only, and waits in the next step's "many" for the others.
Prints, on rank 0, one JSON line: per set, the mean time of its part of the step over the last
LAST steps, and (when tuttid's status URL is given) the set's autotune entry from /status.json.
  python3 bench/autotune_job.py STEPS LAST [STATUS_URL]"""
import json
import os
import sys
import time
import urllib.request

import numpy as np

import tutti

steps, last = int(sys.argv[1]), int(sys.argv[2])
status_url = sys.argv[3] if len(sys.argv) > 3 else None
tutti.init()
assert tutti.size() >= 3, "two distinct sets need 3 ranks or more (see above)"
many = tutti.WORLD
few = tutti.add_process_set(list(range(tutti.size() - 1)))
assert few != many
workloads = {"many": (many, [np.ones(1024, np.float32) for _ in range(200)]),
             "few": (few, [np.ones(2 << 20, np.float32) for _ in range(4)])}
if tutti.rank() == tutti.size() - 1:
    del workloads["few"]
times = {name: [] for name in workloads}
for step in range(steps):
    for name, (process_set, tensors) in workloads.items():
        began = time.perf_counter()
        handles = [tutti.allreduce_async(t, name=f"{name}.{i}", process_set=process_set)
                   for i, t in enumerate(tensors)]
        for h in handles:
            h.wait()
        times[name].append(time.perf_counter() - began)
result = {name: {"mean_ms": round(1000 * float(np.mean(t[-last:])), 3)} for name, t in times.items()}
if status_url and tutti.rank() == 0:
    with urllib.request.urlopen(f"{status_url}/status.json", timeout=30) as response:
        jobs = json.loads(response.read())["jobs"]
    mine = next(job for job in jobs if job["id"] == os.environ["TUTTI_JOB"])
    sets = {s["id"]: s for s in mine["process_sets"]}
    for name, (process_set, _) in workloads.items():
        set_id = getattr(process_set, "process_set_id", process_set)
        tune = sets.get(set_id, {}).get("autotune")
        result[name]["fast_path"] = sets.get(set_id, {}).get("fast_path")
        if tune:
            result[name]["autotune"] = {"state": tune["state"], "values": tune["current"],
                                        "trials": len(tune["trials"])}
if tutti.rank() == 0:
    print(json.dumps(result), flush=True)
tutti.barrier()  # the job stays registered while rank 0 reads the status page
tutti.shutdown()
