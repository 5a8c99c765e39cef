"""An HA group of two tuttids on a real etcd, serving a real 4-rank training loop (Python ranks
over the tutti package) while the test kills, freezes or cuts off the leader: every step must
complete with exact results, and the failover's stall is printed (docs/operations.md quotes it).
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from etcd_process import Etcd
from tuttid_process import BUILD, ROOT, wait_for

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers", "ha_training.py")
RANKS = 4
# A dead leader is replaced once its 2 s lease expired; ranks declare a silent one lost after 2 s.
HA_ARGS = ["--ha-ttl-seconds", "2", "--lease-ms", "2000", "--heartbeat-ms", "500"]


@pytest.fixture
def etcd():
    e = Etcd()
    yield e
    e.remove()


def status(tuttid):
    try:
        with urllib.request.urlopen(tuttid.url + "/status.json", timeout=5) as response:
            return json.loads(response.read())
    except OSError:
        return None


def role(tuttid):
    s = status(tuttid)
    return s["ha"]["role"] if s and "ha" in s else None


def start_group(tuttid_factory, etcd, group):
    members = [tuttid_factory("--etcd", etcd.endpoint, "--ha-group", group, *HA_ARGS, http=True)
               for _ in range(2)]
    leader = wait_for(lambda: next((m for m in members if role(m) == "leader"), None), 30,
                      "a leader")
    standby = next(m for m in members if m is not leader)
    wait_for(lambda: role(standby) == "standby", 30, "the standby")
    return leader, standby


class Ranks:
    """The job's ranks, their stdout lines as they come (with arrival times), reaped at the end."""

    def __init__(self, endpoints, job, first=RANKS, **env):
        """Starts ranks 0 .. first-1 now; start(r) starts the others."""
        self.lines = [[] for _ in range(RANKS)]
        self.processes = [None] * RANKS
        self.expected_steps = int(env.get("HA_STEPS", "60"))
        self.env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"),
                        TUTTI_LIBRARY=os.path.join(BUILD, "libtutti.so"),
                        TUTTI_COORDINATOR=",".join(endpoints), TUTTI_JOB=job,
                        TUTTI_TOKEN="secret", TUTTI_SIZE=str(RANKS), TUTTI_TIMEOUT_MS="120000",
                        PYTHONUNBUFFERED="1", **env)
        for rank in range(first):
            self.start(rank)

    def start(self, rank):
        p = subprocess.Popen([sys.executable, WORKER], env=dict(self.env, TUTTI_RANK=str(rank)),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.processes[rank] = p
        threading.Thread(target=self._read, args=(p, self.lines[rank]), daemon=True).start()

    @staticmethod
    def _read(process, lines):
        for line in process.stdout:
            lines.append(line.rstrip("\n"))

    def steps(self, rank):
        return [float(l.split()[2]) for l in self.lines[rank] if l.startswith("step ")]

    def all_reached(self, step):
        return all(len(self.steps(r)) > step for r in range(RANKS))

    def finish(self, timeout=120):
        deadline = time.monotonic() + timeout
        codes = []
        for p in self.processes:
            try:
                codes.append(p.wait(timeout=max(1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                codes.append(None)
        return codes

    def kill(self):
        for p in self.processes:
            if p is None:
                continue
            if p.poll() is None:
                p.kill()
            p.wait()

    def transcript(self):
        return "\n".join(f"rank {r}: " + " | ".join(l[-3:]) for r, l in enumerate(self.lines)
                         for l in [self.lines[r]])


def longest_stall(ranks, after):
    """The longest gap between two steps of any rank that ended after `after` (a unix time)."""
    gaps = []
    for r in range(RANKS):
        times = ranks.steps(r)
        gaps += [b - a for a, b in zip(times, times[1:]) if b > after]
    return max(gaps)


def run_and_check(ranks):
    codes = ranks.finish()
    assert codes == [0] * RANKS, ranks.transcript()
    for r in range(RANKS):
        assert ranks.lines[r][-1] == "done", ranks.transcript()
        assert len(ranks.steps(r)) == ranks.expected_steps


def after_steps(ranks, steps, fault):
    """Runs fault() once every rank ran `steps` steps; returns when (unix time)."""
    wait_for(lambda: ranks.all_reached(steps), 120, f"{steps} steps on every rank")
    at = time.time()
    fault()
    return at


def kill_after(ranks, leader, steps):
    """Kills the leader (kill -9) once every rank ran `steps` steps; returns when."""
    return after_steps(ranks, steps, lambda: (leader.process.kill(), leader.process.wait()))


def test_killing_the_leader_fails_no_job(tuttid_factory, etcd):
    leader, standby = start_group(tuttid_factory, etcd, "kill")
    # Off the members' fast path: every step needs the coordinator, so the failover is on the
    # path of every collective.
    ranks = Ranks([leader.endpoint, standby.endpoint], "ha-kill", TUTTI_FAST_PATH="0")
    try:
        killed_at = kill_after(ranks, leader, 10)
        run_and_check(ranks)
        assert role(standby) == "leader"
        stall = longest_stall(ranks, killed_at)
        print(f"\nfailover after kill -9 of the leader: longest step {stall:.3f} s")
        assert "resumed under term" in standby.stderr()
    finally:
        ranks.kill()


def test_sets_on_the_fast_path_keep_running_through_the_failover(tuttid_factory, etcd):
    leader, standby = start_group(tuttid_factory, etcd, "fast")
    ranks = Ranks([leader.endpoint, standby.endpoint], "ha-fast", HA_STEPS="400")
    try:
        killed_at = kill_after(ranks, leader, 20)
        wait_for(lambda: role(standby) == "leader", 60, "the standby to lead")
        took_over = time.time()
        # Steps completed while no coordinator led: the members agreed on them among themselves.
        between = [t for r in range(RANKS) for t in ranks.steps(r) if killed_at < t < took_over]
        assert between, f"no step between the kill and the takeover: {ranks.transcript()}"
        codes = ranks.finish()
        assert codes == [0] * RANKS, ranks.transcript()
        print(f"\nfast path: {len(between)} rank-steps ran during the {took_over - killed_at:.2f} s "
              f"without a leader")
    finally:
        ranks.kill()


def test_a_leader_killed_between_two_sends_of_an_execute_leaves_members_that_converge(
        tuttid_factory, etcd):
    # Only the first member, which leads, has the hook; the second starts once it leads.
    leader = tuttid_factory("--etcd", etcd.endpoint, "--ha-group", "mid", *HA_ARGS, http=True,
                            env=dict(os.environ, TUTTID_TEST_DIE_MID_EXECUTE="40"))
    wait_for(lambda: role(leader) == "leader", 30, "the first member to lead")
    standby = tuttid_factory("--etcd", etcd.endpoint, "--ha-group", "mid", *HA_ARGS, http=True)
    wait_for(lambda: role(standby) == "standby", 30, "the standby")
    ranks = Ranks([leader.endpoint, standby.endpoint], "ha-mid", TUTTI_FAST_PATH="0")
    try:
        wait_for(lambda: leader.process.poll() is not None, 120, "the leader to die mid-Execute")
        assert "then dying" in leader.stderr()
        run_and_check(ranks)
        log = standby.stderr()
        assert "resumed under term" in log
        replayed = int(log.split("Executes replayed")[0].split(",")[-1].split()[-1])
        assert replayed >= 1, log  # the members that lag got exactly the leader's Execute
    finally:
        ranks.kill()


def test_a_leader_killed_during_the_rendezvous_leaves_ranks_that_register_with_the_next(
        tuttid_factory, etcd):
    leader, standby = start_group(tuttid_factory, etcd, "rendezvous")
    ranks = Ranks([leader.endpoint, standby.endpoint], "ha-rendezvous", first=RANKS - 1,
                  TUTTI_FAST_PATH="0")
    try:
        wait_for(lambda: "waiting for 4 ranks" in leader.stderr(), 60, "the rendezvous to start")
        leader.process.kill()
        leader.process.wait()
        ranks.start(RANKS - 1)
        run_and_check(ranks)
        assert "all 4 ranks joined" in standby.stderr()
    finally:
        ranks.kill()


def test_a_frozen_leader_is_replaced_and_steps_down_when_it_wakes(tuttid_factory, etcd):
    leader, standby = start_group(tuttid_factory, etcd, "frozen")
    ranks = Ranks([leader.endpoint, standby.endpoint], "ha-frozen", TUTTI_FAST_PATH="0")
    try:
        frozen_at = after_steps(ranks, 10, lambda: leader.process.send_signal(signal.SIGSTOP))
        try:
            wait_for(lambda: role(standby) == "leader", 60, "the standby to lead")
            wait_for(lambda: ranks.all_reached(20), 120, "ten more steps under the new leader")
        finally:
            leader.process.send_signal(signal.SIGCONT)
        run_and_check(ranks)
        wait_for(lambda: role(leader) == "standby", 30, "the woken leader to step down")
        print(f"\nfailover after SIGSTOP of the leader: longest step "
              f"{longest_stall(ranks, frozen_at):.3f} s")
    finally:
        ranks.kill()


def test_losing_etcd_keeps_the_leaders_jobs_and_elects_no_one(tuttid_factory, etcd):
    leader, standby = start_group(tuttid_factory, etcd, "noetcd")
    # Enough steps that the job is still running when the fence closes (up to TTL - 0.5 s after
    # the last renewal).
    ranks = Ranks([leader.endpoint, standby.endpoint], "ha-noetcd", TUTTI_FAST_PATH="0",
                  HA_STEPS="1000")
    try:
        after_steps(ranks, 10, etcd.stop)
        # The leader cannot renew: it stops releasing before its lease could expire (fenced), and
        # says so; the standby cannot win without etcd. No rank fails meanwhile.
        wait_for(lambda: role(leader) == "leader (fenced)", 30, "the leader to fence itself")
        s = status(leader)
        assert "etcd_error" in s["ha"], s["ha"]
        assert role(standby) == "standby"
        assert all(p.poll() is None for p in ranks.processes), ranks.transcript()
        fenced_steps = [len(ranks.steps(r)) for r in range(RANKS)]
        # etcd comes back with its data: the lease is renewed and the job goes on.
        assert etcd.start(), etcd.transcript()
        run_and_check(ranks)
        assert role(leader) == "leader"
        assert all(n < ranks.expected_steps for n in fenced_steps)
    finally:
        ranks.kill()
