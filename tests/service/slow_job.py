"""A 3-rank job of workers/slow_members.py against a tuttid the test started: rank 2 is the world's
straggler, rank 0 the straggler of the set [0, 2]. The job stays alive between `wait_ready` and
`finish`, while a test reads tuttid's pages and metrics. Used as a context manager: every rank
is killed (if still running) and reaped on the way out, whatever happened."""
import os
import select
import subprocess
import sys
import time

from tuttid_process import BUILD, ROOT

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers", "slow_members.py")
SIZE = 3


class SlowJob:
    def __init__(self, endpoint, job, steps=5, slow_seconds=0.1):
        self.job = job
        self.steps = steps
        self.ranks = []
        self.output = [[] for _ in range(SIZE)]
        for rank in range(SIZE):
            env = dict(os.environ,
                       PYTHONPATH=os.path.join(ROOT, "python"),
                       TUTTI_LIBRARY=os.path.join(BUILD, "libtutti.so"),
                       TUTTI_COORDINATOR=endpoint, TUTTI_JOB=job, TUTTI_TOKEN="t",
                       TUTTI_RANK=str(rank), TUTTI_SIZE=str(SIZE), TUTTI_TIMEOUT_MS="120000",
                       SLOW_STEPS=str(steps), SLOW_SECONDS=str(slow_seconds),
                       PYTHONUNBUFFERED="1")
            self.ranks.append(subprocess.Popen(
                [sys.executable, WORKER], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT))
        self._pending = [b""] * SIZE  # read from a rank, not yet split into lines

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()

    def _line(self, rank, prefix, deadline):
        """The first line of `rank` starting with `prefix`; fails at `deadline` or if it exits.
        Reads the pipe itself (os.read after select), since a buffered reader could hold lines
        select does not see."""
        process = self.ranks[rank]
        while True:
            while b"\n" in self._pending[rank]:
                line, self._pending[rank] = self._pending[rank].split(b"\n", 1)
                line = line.decode(errors="replace")
                self.output[rank].append(line)
                if line.startswith(prefix):
                    return line.strip()
            left = deadline - time.monotonic()
            readable, _, _ = select.select([process.stdout], [], [], max(left, 0))
            if not readable:
                raise AssertionError(f"rank {rank} printed no '{prefix}' line in time: "
                                     f"{self.output[rank]}")
            chunk = os.read(process.stdout.fileno(), 65536)
            if not chunk:
                raise AssertionError(f"rank {rank} exited ({process.wait()}) before '{prefix}': "
                                     f"{self.output[rank]}")
            self._pending[rank] += chunk

    def wait_ready(self, timeout=120):
        """Waits until every rank ran its collectives; returns the id of the set [0, 2]."""
        deadline = time.monotonic() + timeout
        ids = {self._line(rank, "ready", deadline).split()[1] for rank in range(SIZE)}
        assert len(ids) == 1, ids
        return int(ids.pop())

    def finish(self, timeout=60):
        """Lets the ranks shut down; every one must print "done" and exit 0."""
        deadline = time.monotonic() + timeout
        for process in self.ranks:
            process.stdin.write(b"go\n")
            process.stdin.flush()
        for rank, process in enumerate(self.ranks):
            self._line(rank, "done", deadline)
            assert process.wait(timeout=max(deadline - time.monotonic(), 1)) == 0, self.output[rank]

    def kill(self):
        for process in self.ranks:
            if process.poll() is None:
                process.kill()
        for process in self.ranks:
            process.wait()
            for stream in (process.stdin, process.stdout):
                stream.close()
