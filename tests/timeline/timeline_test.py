#!/usr/bin/env python3
"""End to end: a real tuttid writing its negotiation timeline, two ranks writing theirs, the merge
tool joining them. Checks that every file and the merged trace are well formed, that each rank's
file has its set track and every tensor's phases, and that tuttid saw every rank arrive."""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile

parser = argparse.ArgumentParser()
parser.add_argument("--tuttid", required=True)
parser.add_argument("--worker", required=True)
parser.add_argument("--merge", required=True)
args = parser.parse_args()
sys.path.insert(0, os.path.dirname(args.merge))
import tutti_timeline_merge as merge_tool  # noqa: E402

failures = []


def expect(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


with tempfile.TemporaryDirectory() as tmp:
    coordinator_file = os.path.join(tmp, "tuttid.json")
    tuttid = subprocess.Popen([args.tuttid, "--bind", "tcp://127.0.0.1:*", "--log-level", "warn",
                               "--timeline", coordinator_file],
                              stdout=subprocess.PIPE, text=True)
    ranks = []
    try:
        endpoint = tuttid.stdout.readline().strip().split(" ")[-1]
        expect(endpoint.startswith("tcp://"), f"tuttid printed no endpoint: {endpoint!r}")
        for rank in range(2):
            env = dict(os.environ, TUTTI_COORDINATOR=endpoint, TUTTI_JOB="timeline",
                       TUTTI_RANK=str(rank), TUTTI_SIZE="2",
                       TUTTI_TIMELINE=os.path.join(tmp, "t.json"))
            ranks.append(subprocess.Popen([args.worker, "training_steps", "2", "20"], env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          text=True))
        for p in ranks:
            out, _ = p.communicate(timeout=120)
            expect(p.returncode == 0, f"rank exited {p.returncode}: {out}")
    finally:
        for p in ranks:
            if p.poll() is None:
                p.kill()
                p.wait()
        tuttid.send_signal(signal.SIGTERM)
        try:
            tuttid.wait(timeout=30)
        except subprocess.TimeoutExpired:
            tuttid.kill()
            tuttid.wait()

    files = [os.path.join(tmp, f"t.rank{r}.json") for r in range(2)] + [coordinator_file]
    for path in files:
        expect(os.path.exists(path), f"{path} was not written")
    agreed_by_members = {}
    if not failures:
        for path in files:
            with open(path) as f:
                trace = json.load(f)  # each file on its own is complete JSON
            problems = merge_tool.check(trace)
            expect(not problems, f"{path}: {problems[:5]}")
        for rank in range(2):
            with open(files[rank]) as f:
                events = json.load(f)["traceEvents"]
            tracks = [e["args"]["name"] for e in events if e["name"] == "thread_name"]
            expect("process set 0" in tracks, f"rank {rank}: no track for set 0: {tracks}")
            for phase in ("grad.0", "NEGOTIATE", "QUEUE", "EXECUTE"):
                begins = [e for e in events if e["ph"] == "b" and e["name"] == phase]
                expect(len(begins) >= 1, f"rank {rank}: no {phase} phase")
            spans = {e["name"] for e in events if e["ph"] == "X"}
            # A tensor run alone and a fused collective's transport step are both ALLREDUCE.
            expect("ALLREDUCE" in spans, f"rank {rank}: lane spans {spans}")
            ends = [e for e in events if e["ph"] == "e" and e["name"] == "NEGOTIATE"]
            expect(len(ends) == 40, f"rank {rank} ended {len(ends)} negotiations, not 40")
            agreed_by_members[rank] = sum(1 for e in ends if e.get("args", {}).get("fast_path"))
        with open(coordinator_file) as f:
            events = json.load(f)["traceEvents"]
        arrivals = {e["args"]["rank"] for e in events if e["name"] == "ANNOUNCED"}
        expect(arrivals == {0, 1}, f"tuttid saw arrivals from {arrivals}")
        negotiations = [e for e in events if e["ph"] == "e" and e["name"] == "NEGOTIATE"]
        # Step 1 always goes through tuttid. Step 2's tensors are all cached, so tuttid may hand
        # the set to its members' fast path (docs/steady-state.md) at any point of it: each
        # tensor is then agreed by the members, not by tuttid, and on every member alike.
        expect(agreed_by_members[0] == agreed_by_members[1],
               f"the members agreed on different tensors: {agreed_by_members}")
        expect(len(negotiations) + agreed_by_members[0] == 40,
               f"tuttid ended {len(negotiations)} negotiations and the members agreed on "
               f"{agreed_by_members[0]} tensors, not 40 in all")
        expect(len(negotiations) >= 20, f"tuttid ended {len(negotiations)} negotiations, not 20+")

        merged = os.path.join(tmp, "merged.json")
        result = subprocess.run([sys.executable, args.merge, "-o", merged, "--check"] + files,
                                capture_output=True, text=True)
        expect(result.returncode == 0, f"merge failed: {result.stderr}")
        with open(merged) as f:
            pids = {e["pid"] for e in json.load(f)["traceEvents"]}
        expect(pids == {0, 1, 1 << 20}, f"merged processes {pids}")

if failures:
    sys.exit(1)
print("timeline test ok")
