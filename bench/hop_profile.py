#!/usr/bin/env python3
"""Where the time of one steady-state collective goes, from the ranks' timelines.

    TUTTI_TIMELINE=/tmp/tl/t.json tuttirun -np 2 build/bench/allreduce_bench --sizes 4096 --no-step
    bench/hop_profile.py /tmp/tl/t.rank*.json

Each collective of a back-to-back loop on the fast path (docs/steady-state.md) is cut into the
hops it crosses, all measured on the rank that ran it:

  submit     the tensor's begin to NEGOTIATE's begin: the application thread's checks and queueing
  to lane    NEGOTIATE's begin to the start of the fast-path round that agreed on it: waking the
             lane (an eventfd), its linger, and waiting for a peer still in its previous collective
  round      the agreement round itself: one ring allgather of the bitmaps (a peer's wake-up)
  to execute the round's end to the collective's start (the book's hand-over, timeline events)
  execute    the data: the collective's span (a peer's wake-up, the copies, the reduction)
  complete   the collective's end to the tensor's end: completing the request
  to app     the tensor's end to the next tensor's begin: waking the waiting application thread,
             freeing the request and submitting the next

The timeline itself costs a few microseconds per event (about ten per collective): `QUEUE`, which
nothing happens inside on the fast path, measures one event's cost, printed as `timeline event`.
Standard library only.
"""
import argparse
import json
import statistics
import sys

STAGES = ["submit", "to lane", "round", "to execute", "execute", "complete", "to app"]


def load(path):
    with open(path) as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


def collectives(events, name):
    """Per collective of tensor `name`: the timestamps of its hops, in the order they happen."""
    events = sorted((e for e in events if "ts" in e), key=lambda e: e["ts"])
    rounds = [e for e in events if e.get("name") == "FAST_PATH_ROUND" and e["args"].get("tensors")]
    spans = [e for e in events if e.get("ph") == "X" and e.get("args", {}).get("tensor") == name]
    out, current = [], None
    for e in events:
        if e.get("cat") != "tensor" or e.get("id", "").split("/", 1)[-1] != name:
            continue
        key = (e["name"] if e["name"] != name else "tensor", e["ph"])
        if key == ("tensor", "b"):
            current = {"begin": e["ts"]}
        elif current is None:
            continue
        elif key == ("NEGOTIATE", "b"):
            current["negotiate"] = e["ts"]
        elif key == ("NEGOTIATE", "e"):
            current["fast"] = bool(e.get("args", {}).get("fast_path"))
        elif key == ("QUEUE", "b"):
            current["queue_b"] = e["ts"]
        elif key == ("QUEUE", "e"):
            current["queue_e"] = e["ts"]
        elif key == ("tensor", "e"):
            current["end"] = e["ts"]
            out.append(current)
            current = None
    # The round that agreed on each collective is the last one to start before its QUEUE, and its
    # execution the first span of the tensor to start after it.
    ri = si = 0
    for c in out:
        if not c.get("fast") or "queue_b" not in c:
            continue
        while ri + 1 < len(rounds) and rounds[ri + 1]["ts"] <= c["queue_b"]:
            ri += 1
        while si < len(spans) and spans[si]["ts"] < c["queue_b"]:
            si += 1
        if ri < len(rounds) and si < len(spans) and rounds[ri]["ts"] >= c["negotiate"]:
            c["round_b"] = rounds[ri]["ts"]
            c["round_e"] = rounds[ri]["ts"] + rounds[ri]["dur"]
            c["exec_b"] = spans[si]["ts"]
            c["exec_e"] = spans[si]["ts"] + spans[si]["dur"]
    return [c for c in out if "exec_b" in c]


def hops(seq):
    rows = []
    for c, following in zip(seq, seq[1:]):
        rows.append({
            "submit": c["negotiate"] - c["begin"],
            "to lane": c["round_b"] - c["negotiate"],
            "round": c["round_e"] - c["round_b"],
            "to execute": c["exec_b"] - c["round_e"],
            "execute": c["exec_e"] - c["exec_b"],
            "complete": c["end"] - c["exec_e"],
            "to app": following["begin"] - c["end"],
            "total": following["begin"] - c["begin"],
            "event": c["queue_e"] - c["queue_b"],
        })
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("timelines", nargs="+")
    parser.add_argument("--tensor", default="sweep", help="the tensor the loop runs (allreduce_bench: sweep)")
    parser.add_argument("--last", type=int, default=400, help="profile the last N collectives of each rank")
    args = parser.parse_args()
    print("| rank | hop | median µs | mean µs | p90 µs |")
    print("|---|---|---|---|---|")
    for path in args.timelines:
        rows = hops(collectives(load(path), args.tensor))[-args.last:]
        if not rows:
            sys.exit(f"{path}: no fast-path collective of '{args.tensor}' found")
        rank = path.rsplit(".rank", 1)[-1].split(".")[0]
        for stage in STAGES + ["total", "event"]:
            values = sorted(r[stage] for r in rows)
            label = {"event": "timeline event", "total": "**one collective**"}.get(stage, stage)
            print(f"| {rank} | {label} | {statistics.median(values):.0f} | "
                  f"{statistics.fmean(values):.1f} | {values[int(0.9 * (len(values) - 1))]:.0f} |")


if __name__ == "__main__":
    main()
