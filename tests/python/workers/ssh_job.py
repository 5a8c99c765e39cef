"""A rank of tests/python/test_ssh_hosts.py, started by tuttirun on two "hosts" over ssh.
argv: MODE MARKER [ARGS]; MARKER is a unique word that only this job's processes carry in their
command lines, so that the test can look for any of them left behind (pgrep -f).

  collectives: world allreduce and alltoall, a set per host and one across hosts; prints
               "where <rank> <host id> <netns>" and "link <peer> <transport> <connected>" per peer
  env NAME...: prints "env NAME=repr(VALUE)" (or "env NAME unset") for each NAME, and "cwd <dir>"
  fail RANK:   every rank joins a barrier; then RANK exits 3 and the others wait to be stopped
  wait:        every rank joins a barrier, prints "ready" and waits to be stopped
"""
import os
import sys
import time

mode = sys.argv[1]

if mode == "env":
    for name in sys.argv[3:]:
        value = os.environ.get(name)
        print(f"env {name}={value!r}" if value is not None else f"env {name} unset", flush=True)
    print("cwd", os.getcwd(), flush=True)
    sys.exit(0)

import numpy as np  # noqa: E402  (the env mode needs neither numpy nor tutti)

import tutti  # noqa: E402

tutti.init()
rank, size = tutti.rank(), tutti.size()

if mode == "collectives":
    assert size == 4, size
    total = tutti.allreduce(np.full(1 << 16, rank + 1, dtype=np.float32))
    np.testing.assert_array_equal(total, np.full(1 << 16, 10, dtype=np.float32))
    # alltoall touches every pair, so that every link below has carried data.
    received, _ = tutti.alltoall(np.full(size * 1024, rank, dtype=np.int32))
    np.testing.assert_array_equal(received, np.repeat(np.arange(size, dtype=np.int32), 1024))
    # Ranks fill hosts in order: 0 and 1 on the first host, 2 and 3 on the second.
    host_set = [0, 1] if rank < 2 else [2, 3]
    sets = {"host": (host_set, tutti.add_process_set(host_set))}
    if rank in (1, 2):
        sets["across"] = ([1, 2], tutti.add_process_set([1, 2]))
    for name, (members, set_id) in sets.items():
        got = tutti.allreduce(np.full(4096, rank, dtype=np.float64), process_set=set_id)
        np.testing.assert_array_equal(got, np.full(4096, sum(members), dtype=np.float64))
        print("set", name, "ok", flush=True)
    print("where", rank, os.environ["TUTTI_HOST_ID"], os.readlink("/proc/self/ns/net"), flush=True)
    for peer in range(size):
        if peer != rank:
            stats = tutti.peer_stats(peer)
            assert stats["bytes_sent"] > 0 and stats["bytes_received"] > 0, (peer, stats)
            print("link", peer, stats["transport"], stats["connected"], flush=True)
    tutti.shutdown()
elif mode == "fail":
    tutti.barrier()
    if rank == int(sys.argv[3]):
        sys.exit(3)
    print("waiting", flush=True)
    time.sleep(600)
elif mode == "wait":
    tutti.barrier()
    print("ready", flush=True)
    time.sleep(600)
else:
    sys.exit(f"unknown mode {mode}")
