#!/usr/bin/env python3
"""Merges tutti timelines into one Chrome-trace / Perfetto JSON file.

Each rank writes its own file (TUTTI_TIMELINE=t.json gives t.rank0.json, t.rank1.json, ...; the
process is the rank), and tuttid writes its negotiations with --timeline (process "tuttid"). This
tool concatenates their events, keeps every file's processes apart (a process id already taken by
an earlier file is renumbered), and can check that the result is well formed:

    tools/tutti_timeline_merge.py -o merged.json t.rank*.json tuttid.json --check

A file cut short (its process was killed) is read up to its last complete event.
"""
import argparse
import json
import sys


def load(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        # Written incrementally: a killed process leaves no closing brackets, maybe half an event.
        cut = text.rstrip().rstrip(",")
        while cut:
            try:
                return json.loads(cut + "\n]}")
            except json.JSONDecodeError:
                last = cut.rfind("\n")
                if last < 0:
                    break
                cut = cut[:last].rstrip().rstrip(",")
        raise SystemExit(f"{path}: not a timeline (no traceEvents could be read)")


def merge(paths):
    events, taken = [], set()
    for path in paths:
        trace = load(path)
        file_events = trace["traceEvents"] if isinstance(trace, dict) else trace
        remap = {}
        for pid in sorted({e.get("pid") for e in file_events if "pid" in e}):
            new = pid
            while new in taken:
                new += 1 << 21
            taken.add(new)
            remap[pid] = new
        for event in file_events:
            if "pid" in event:
                event = dict(event, pid=remap[event["pid"]])
            events.append(event)
    return {"displayTimeUnit": "ms", "traceEvents": events}


def check(trace):
    """Problems a trace viewer would trip on: missing fields, unbalanced or misnested events."""
    problems, open_async, open_sync = [], {}, {}
    for event in trace["traceEvents"]:
        ph = event.get("ph")
        if ph is None or "pid" not in event or "name" not in event:
            problems.append(f"event without ph, pid or name: {event}")
            continue
        if ph == "M":
            continue
        if "ts" not in event:
            problems.append(f"event without ts: {event}")
        if ph == "X" and event.get("dur", -1) < 0:
            problems.append(f"complete event without a duration: {event}")
        elif ph in ("b", "e"):
            stack = open_async.setdefault((event["pid"], event.get("cat"), event.get("id")), [])
            if ph == "b":
                stack.append(event["name"])
            elif not stack or stack[-1] != event["name"]:
                problems.append(f"async end without a matching begin: {event}")
            else:
                stack.pop()
        elif ph in ("B", "E"):
            stack = open_sync.setdefault((event["pid"], event.get("tid")), [])
            if ph == "B":
                stack.append(event["name"])
            elif not stack:
                problems.append(f"end without a begin: {event}")
            else:
                stack.pop()
    for key, stack in list(open_async.items()) + list(open_sync.items()):
        if stack:
            problems.append(f"{key}: {stack} never ended")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="+", help="rank and tuttid timeline files")
    parser.add_argument("-o", "--output", required=True, help="merged trace to write")
    parser.add_argument("--check", action="store_true",
                        help="fail (exit 1) if the merged trace is malformed")
    args = parser.parse_args()
    trace = merge(args.inputs)
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(trace, f)
    if args.check:
        problems = check(trace)
        for p in problems[:20]:
            print(p, file=sys.stderr)
        if problems:
            return 1
    print(f"{args.output}: {len(trace['traceEvents'])} events from {len(args.inputs)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
