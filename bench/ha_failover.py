#!/usr/bin/env python3
"""The stall an HA failover costs a training loop (docs/operations.md): a real etcd, two tuttids
in one group, a 4-rank loop of three allreduces per step off the members' fast path (so every
step needs the coordinator), and the leader killed (kill -9) or frozen (SIGSTOP) at step 10.
Reports the longest step after the fault, per TTL, over --repeat runs. Uses the service tests'
helpers to start etcd, tuttid and the ranks; run from the repository root after a build."""
import argparse
import os
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "service"))

from etcd_process import Etcd  # noqa: E402
from tuttid_process import Tuttid, wait_for  # noqa: E402
import test_ha_failover as ha  # noqa: E402


def one_run(etcd, ttl, fault, group):
    args = ["--etcd", etcd.endpoint, "--ha-group", group, "--ha-ttl-seconds", str(ttl),
            "--lease-ms", str(ttl * 1000), "--heartbeat-ms", str(ttl * 250)]
    members = []
    ranks = None
    try:
        members = [Tuttid(*args, http=True) for _ in range(2)]
        leader = wait_for(lambda: next((m for m in members if ha.role(m) == "leader"), None),
                          60, "a leader")
        standby = next(m for m in members if m is not leader)
        wait_for(lambda: ha.role(standby) == "standby", 60, "the standby")
        ranks = ha.Ranks([leader.endpoint, standby.endpoint], group, TUTTI_FAST_PATH="0",
                         HA_STEPS="40")
        wait_for(lambda: ranks.all_reached(10), 120, "ten steps")
        at = time.time()
        if fault == "kill":
            leader.process.kill()
        else:
            leader.process.send_signal(signal.SIGSTOP)
        codes = ranks.finish(180)
        if fault == "stop":
            leader.process.send_signal(signal.SIGCONT)
        if codes != [0] * ha.RANKS:
            raise RuntimeError(f"ranks failed: {ranks.transcript()}")
        before = [b - a for r in range(ha.RANKS)
                  for a, b in zip(ranks.steps(r), ranks.steps(r)[1:]) if b <= at]
        return ha.longest_stall(ranks, at), max(before)
    finally:
        if ranks:
            ranks.kill()
        for m in members:
            m.process.send_signal(signal.SIGCONT) if m.process.poll() is None else None
            m.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ttl", type=int, nargs="+", default=[2, 5])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    etcd = Etcd()
    try:
        print("| fault | TTL = lease (s) | longest step after the fault (s), per run | "
              "longest step before it (s) |")
        print("|---|---|---|---|")
        n = 0
        for fault in ("kill", "stop"):
            for ttl in args.ttl:
                stalls, befores = [], []
                for _ in range(args.repeat):
                    n += 1
                    stall, before = one_run(etcd, ttl, fault, f"bench{n}")
                    stalls.append(stall)
                    befores.append(before)
                name = "kill -9" if fault == "kill" else "SIGSTOP"
                print(f"| {name} | {ttl} | {', '.join(f'{s:.2f}' for s in stalls)} | "
                      f"{max(befores):.3f} |", flush=True)
    finally:
        etcd.remove()


if __name__ == "__main__":
    main()
