"""Helpers for test_ray.py: what Ray itself says about actors and placement groups, and
whether processes are gone. The local cluster runs without a dashboard, so Ray's state API
(ray.util.state, served by it) is not there; the GCS tables behind ray._private.state are."""
import os
import time

import ray


def actors(class_name="TuttiWorker"):
    """{actor id: (state, pid)} of the cluster's actors of that class, dead ones included."""
    table = ray._private.state.actors()
    return {actor_id: (a["State"], a.get("Pid")) for actor_id, a in table.items()
            if a["ActorClassName"] == class_name}


def alive_actors(class_name="TuttiWorker"):
    return {i: a for i, a in actors(class_name).items() if a[0] != "DEAD"}


def placement_group_state(group):
    return ray.util.placement_group_table(group)["state"]


def process_exists(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_processes_gone(pids, timeout_s=30):
    """Ray's raylet reaps an actor's worker process after the GCS marks the actor dead; this
    waits (polling the condition, with a deadline) for that and returns the pids still there."""
    deadline = time.monotonic() + timeout_s
    left = [p for p in pids if process_exists(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for p in left if process_exists(p)]
    return left


def children_named(name):
    """Pids of this process's children whose command name is `name` (tuttid, say)."""
    found = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as f:
            for pid in f.read().split():
                try:
                    with open(f"/proc/{pid}/comm") as comm:
                        if comm.read().strip() == name:
                            found.append(int(pid))
                except FileNotFoundError:
                    pass  # ended between the two reads
    return found


def wait_cpus_available(cpus, timeout_s=30):
    """Ray frees a removed placement group's resources asynchronously: whether `cpus` CPUs are
    available again within the deadline (polling the condition)."""
    deadline = time.monotonic() + timeout_s
    while ray.available_resources().get("CPU", 0) < cpus:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
