"""Start-up and per-step overhead of a tutti job under an engine, versus the same function under
tuttirun: the time from the launch call (tutti.spark.run, or starting tuttirun) to the end of the
first collective in fn, and the mean time of STEPS allreduces of 4 KiB and of 1 MiB.

    .venv-engines/bin/python bench/engine_overhead.py --engine spark [--np 2] [--runs 3]
    .venv-engines/bin/python bench/engine_overhead.py --engine spark-elastic [--np 2] [--runs 3]
    .venv-engines/bin/python bench/engine_overhead.py --engine tuttirun [--np 2] [--runs 3]

TUTTI_BUILD_DIR (default build/) names the build. For spark, the session (local-cluster[NP,1,1024])
is started before the clock starts; the first run also pays for forking the Python workers, so
each run is reported. Prints one JSON line per run."""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES = (4096, 1 << 20)


def measure(launched_at, steps):
    """One rank: time.time() is comparable across processes of one host."""
    import numpy as np
    import tutti
    tutti.init()
    tutti.allreduce(np.ones(1, np.float32))
    first_collective_s = time.time() - launched_at
    per_step_us = {}
    for size in SIZES:
        data = np.ones(size // 4, np.float32)
        for _ in range(5):
            tutti.allreduce(data)
        tutti.barrier()
        began = time.perf_counter()
        for _ in range(steps):
            tutti.allreduce(data)
        per_step_us[size] = (time.perf_counter() - began) / steps * 1e6
    rank = tutti.rank()
    tutti.shutdown()
    return {"rank": rank, "first_collective_s": first_collective_s, "per_step_us": per_step_us}


def summary(engine, results, total_s):
    return {"engine": engine, "np": len(results), "run_s": round(total_s, 3),
            "first_collective_s": round(max(r["first_collective_s"] for r in results), 3),
            **{f"allreduce_{size // 1024}KiB_us": round(max(r["per_step_us"][size]
                                                            for r in results), 1)
               for size in SIZES}}


def build_env():
    """The package from python/ and the library and tuttid from the build, for every rank."""
    build = os.path.join(ROOT, os.environ.get("TUTTI_BUILD_DIR", "build"))
    return {"PYTHONPATH": os.path.join(ROOT, "python"),
            "TUTTI_LIBRARY": os.path.join(build, "libtutti.so"),
            "TUTTI_TUTTID": os.path.join(build, "tuttid")}


def bench_spark(np_, runs, steps, elastic=False):
    sys.path.insert(0, os.path.join(ROOT, "python"))
    os.environ.update(build_env())  # before the session: the executors inherit the environment
    from pyspark.sql import SparkSession
    session = (SparkSession.builder.master(f"local-cluster[{np_},1,1024]")
               .config("spark.ui.enabled", "false").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    import tutti.spark
    from tutti.spark._driver import require_slots
    require_slots("bench", session.sparkContext, np_, time.monotonic() + 120, 120)
    from pyspark import cloudpickle
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        for _ in range(runs):
            began = time.time()
            launch = tutti.spark.run_elastic if elastic else tutti.spark.run
            results = launch(measure, args=(began, steps), num_proc=np_, verbose=0)
            print(json.dumps(summary("spark-elastic" if elastic else "spark", results,
                                     time.time() - began)), flush=True)
    finally:
        session.stop()


def bench_tuttirun(np_, runs, steps):
    build = os.path.join(ROOT, os.environ.get("TUTTI_BUILD_DIR", "build"))
    env = dict(os.environ, **build_env())
    for _ in range(runs):
        began = time.time()
        out = subprocess.run([os.path.join(build, "tuttirun"), "-np", str(np_), sys.executable,
                              os.path.abspath(__file__), "--rank-of", str(began), "--steps",
                              str(steps)], env=env, capture_output=True, text=True, check=True)
        # tuttirun prefixes each rank's lines with "[RANK] ".
        results = [json.loads(line[line.index("{"):]) for line in out.stdout.splitlines()
                   if "{" in line]
        for r in results:
            r["per_step_us"] = {int(k): v for k, v in r["per_step_us"].items()}
        print(json.dumps(summary("tuttirun", results, time.time() - began)), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--engine", choices=["spark", "spark-elastic", "tuttirun"], default="tuttirun")
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--rank-of", type=float, help=argparse.SUPPRESS)  # under tuttirun
    options = parser.parse_args()
    if options.rank_of is not None:
        print(json.dumps(measure(options.rank_of, options.steps)), flush=True)
    elif options.engine.startswith("spark"):
        bench_spark(options.np, options.runs, options.steps, options.engine == "spark-elastic")
    else:
        bench_tuttirun(options.np, options.runs, options.steps)
