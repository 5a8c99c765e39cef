"""What running tutti under Ray costs, against the same function under `tuttirun -np 2`.

    PYTHONPATH=python TUTTI_LIBRARY=build/libtutti.so python bench/ray_overhead.py [--repeats 5]

Measured, medians over --repeats (one fresh executor or tuttirun job each):
- start: RayExecutor.start() (coordinator, placement group, actors), on a running Ray cluster;
- first collective: from the driver's run() call (tuttirun: from spawning tuttirun) to the end
  of the first allreduce inside the function, which does tutti.init() itself;
- second run: the same on the executor's second run(), with tutti still initialized;
- run() round trip of a function that does nothing (the driver-side cost of a call);
- per step: one allreduce of 4 KiB and of 1 MiB (float32), the mean of 100 after 10 warm-ups.
The driver and the ranks share this machine's clock (time.time()), so the first-collective
times are differences of timestamps taken in two processes. Nothing here is asserted.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

STEPS, WARMUP = 100, 10
SIZES = {"4 KiB": 1024, "1 MiB": 256 * 1024}  # float32 elements


def the_function():
    """The measured function: the same under Ray and under tuttirun."""
    import tutti
    tutti.init()
    tutti.allreduce(np.ones(1, np.float32))
    first = time.time()
    per_step = {}
    for label, count in SIZES.items():
        data = np.ones(count, np.float32)
        for _ in range(WARMUP):
            tutti.allreduce(data)
        began = time.perf_counter()
        for _ in range(STEPS):
            tutti.allreduce(data)
        per_step[label] = (time.perf_counter() - began) / STEPS
    return {"first": first, "per_step": per_step}


def first_collective_only():
    import tutti
    tutti.init()
    tutti.allreduce(np.ones(1, np.float32))
    return time.time()


def nothing():
    return None


def under_ray(repeats):
    import ray
    import tutti.ray
    ray.init(num_cpus=4, include_dashboard=False)
    rows = {"start": [], "first": [], "second": [], "roundtrip": [],
            **{f"step {k}": [] for k in SIZES}}
    try:
        for _ in range(repeats):
            executor = tutti.ray.RayExecutor(num_workers=2)
            began = time.time()
            executor.start()
            rows["start"].append(time.time() - began)
            began = time.time()
            results = executor.run(the_function)
            rows["first"].append(max(r["first"] for r in results) - began)
            for label in SIZES:
                rows[f"step {label}"].append(results[0]["per_step"][label])
            began = time.time()
            rows["second"].append(max(executor.run(first_collective_only)) - began)
            calls = []
            for _ in range(20):
                began = time.perf_counter()
                executor.run(nothing)
                calls.append(time.perf_counter() - began)
            rows["roundtrip"].append(statistics.median(calls))
            executor.shutdown()
    finally:
        ray.shutdown()
    return rows


def under_tuttirun(repeats, tuttirun, binding):
    rows = {"first": [], **{f"step {k}": [] for k in SIZES}}
    for _ in range(repeats):
        began = time.time()
        out = subprocess.run([tuttirun, "-np", "2", "--bind-to", binding, sys.executable,
                              os.path.abspath(__file__), "--rank"],
                             capture_output=True, text=True, check=True).stdout
        results = [json.loads(line.split("] ", 1)[1]) for line in out.splitlines()
                   if line.startswith("[") and "] {" in line]
        rows["first"].append(max(r["first"] for r in results) - began)
        for label in SIZES:
            rows[f"step {label}"].append(results[0]["per_step"][label])
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rank", action="store_true", help="(internal) one rank under tuttirun")
    parser.add_argument("--tuttirun", default=os.path.join(
        os.path.dirname(os.environ.get("TUTTI_LIBRARY", "build/libtutti.so")), "tuttirun"))
    args = parser.parse_args()
    if args.rank:
        print(json.dumps(the_function()), flush=True)
        return
    ray_rows = under_ray(args.repeats)
    # tuttirun binds each rank to a core by default; Ray does not bind its actors.
    bound = under_tuttirun(args.repeats, args.tuttirun, "core")
    unbound = under_tuttirun(args.repeats, args.tuttirun, "none")

    def ms(values):
        return f"{statistics.median(values) * 1e3:.2f} ms" if values else "-"

    print(f"| median of {args.repeats} | Ray, 2 actors | tuttirun -np 2 | "
          f"tuttirun -np 2 --bind-to none |")
    print("|---|---|---|---|")
    rows = [("start()", "start"), ("run() to the first collective (tuttirun: from spawning it)",
                                   "first"),
            ("second run() to the first collective", "second"),
            ("run() of a function that does nothing", "roundtrip")]
    rows += [(f"allreduce {label} (float32), per step", f"step {label}") for label in SIZES]
    for title, key in rows:
        print(f"| {title} | {ms(ray_rows.get(key, []))} | {ms(bound.get(key, []))} | "
              f"{ms(unbound.get(key, []))} |")


if __name__ == "__main__":
    main()
