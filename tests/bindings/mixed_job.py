#!/usr/bin/python3
"""One tutti job whose ranks are written in four languages: Python (ranks 0 and 4), C (1),
Rust (2) and Go (3), started by hand against a tuttid of their own as README's "Running tuttid
on its own" does. Ranks 0-3 form one process set and allreduce and allgather in it; rank 4 is
outside it and gets NOT_A_MEMBER; all five allreduce on the world. Each rank checks its results
and exits non-zero on a difference; this driver fails unless all five print "mixed ok".

    /usr/bin/python3 tests/bindings/mixed_job.py --build build --c-rank PATH --rust-rank PATH \
        --go-rank PATH

The port comes from the OS, every wait is bounded, and tuttid and every rank are reaped, even
when one fails (the others are killed first).
"""
import argparse
import os
import queue
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEADLINE_S = 180


def start_tuttid(build):
    """tuttid on 127.0.0.1, a port the OS picks; returns (process, endpoint). A thread drains
    its stdout so that a full pipe never blocks it."""
    process = subprocess.Popen([os.path.join(build, "tuttid"), "--bind", "tcp://127.0.0.1:*"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines = queue.Queue()

    def drain():
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=drain, daemon=True).start()
    try:
        line = lines.get(timeout=30)
    except queue.Empty:
        line = None
    prefix = "tuttid listening on "
    if not line or not line.startswith(prefix):
        stop(process)
        raise SystemExit(f"mixed job: tuttid printed {line!r}")
    return process, line[len(prefix):].strip()


def stop(process):
    if process.poll() is None:
        process.send_signal(signal.SIGKILL)
    process.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", required=True, help="build directory (tuttid, libtutti.so)")
    parser.add_argument("--c-rank", required=True)
    parser.add_argument("--rust-rank", required=True)
    parser.add_argument("--go-rank", required=True)
    parser.add_argument("--python", default="/usr/bin/python3")
    args = parser.parse_args()
    # A SIGTERM (CI's timeout) unwinds like Ctrl-C, through the finally that reaps every child.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    build = os.path.abspath(args.build)
    python_rank = [args.python, os.path.join(HERE, "mixed_rank.py")]
    ranks = [("python", python_rank), ("c", [args.c_rank]), ("rust", [args.rust_rank]),
             ("go", [args.go_rank]), ("python", python_rank)]

    tuttid, endpoint = start_tuttid(build)
    print(f"mixed job: tuttid listening on {endpoint}", flush=True)
    base = dict(os.environ,
                TUTTI_COORDINATOR=endpoint,
                TUTTI_JOB=f"mixed-{os.getpid()}",
                TUTTI_TOKEN=secrets.token_hex(16),
                TUTTI_SIZE=str(len(ranks)),
                TUTTI_TIMEOUT_MS="60000",
                TUTTI_LIBRARY=os.path.join(build, "libtutti.so"),
                PYTHONPATH=os.path.join(ROOT, "python"))
    processes, logs = [], []
    failed = []
    try:
        for rank, (language, command) in enumerate(ranks):
            log = tempfile.TemporaryFile(mode="w+")
            logs.append(log)
            processes.append(subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                              env=dict(base, TUTTI_RANK=str(rank))))
        deadline = time.monotonic() + DEADLINE_S
        running = set(range(len(processes)))
        while running:
            for rank in sorted(running):
                code = processes[rank].poll()
                if code is not None:
                    running.discard(rank)
                    if code != 0:
                        failed.append(f"rank {rank} ({ranks[rank][0]}) exited with {code}")
            if failed:
                break
            if time.monotonic() > deadline:
                failed.append(f"ranks {sorted(running)} still running after {DEADLINE_S} s")
                break
            if running:
                try:  # wakes as soon as that rank ends; the loop then looks at every rank
                    processes[min(running)].wait(timeout=0.2)
                except subprocess.TimeoutExpired:
                    pass
    finally:
        for process in processes:
            stop(process)
        stop(tuttid)

    for rank, log in enumerate(logs):
        log.seek(0)
        output = log.read()
        for line in output.splitlines():
            print(f"[{rank} {ranks[rank][0]}] {line}")
        if f"rank {rank} ({ranks[rank][0]}): mixed ok" not in output and not failed:
            failed.append(f"rank {rank} ({ranks[rank][0]}) did not report 'mixed ok'")
    if failed:
        print("mixed job FAILED: " + "; ".join(failed), file=sys.stderr)
        return 1
    print(f"mixed job: {len(ranks)} ranks (python, c, rust, go, python) in one job, "
          "set allreduce and allgather across languages: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
