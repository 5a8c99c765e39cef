"""tuttirun across hosts over real ssh (docs/launcher.md, "Across hosts"): two "hosts" that are
network namespaces with an sshd each, tuttirun in a third (tests/python/ssh_hosts.py). Every job
carries a unique marker in its ranks' command lines; after each job, no process carrying it may
be left on any host. Needs root, iproute2 and openssh: a skip without them, a failure on CI."""
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from conftest import BUILD, WORKERS, engine_missing, job_env
import ssh_hosts

WORKER = os.path.join(WORKERS, "ssh_job.py")
TIMEOUT = 240  # a whole job on a loaded 2-core machine; none should come near it


@pytest.fixture(scope="module")
def hosts():
    why = ssh_hosts.missing_parts()
    if why:
        engine_missing(why)
    with ssh_hosts.SshHosts(hosts=2, unreachable=1) as made:
        yield made


_markers = iter(range(1 << 30))


def marker():
    return f"tutti-ssh-test-{os.getpid()}-{next(_markers)}"


def left_behind(mark):
    """Pids of processes (on any host: the namespaces share this machine's pids) carrying
    `mark`."""
    out = subprocess.run(["pgrep", "-f", mark], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def tuttirun(hosts, *args):
    return hosts.launch([os.path.join(BUILD, "tuttirun"), *hosts.ssh_args(), *args])


def run(hosts, *args, env=None, cwd=None):
    """Runs tuttirun to its end in a session of its own, killed with its group on a timeout."""
    job = subprocess.Popen(tuttirun(hosts, *args), env=job_env(env), cwd=cwd, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = job.communicate(timeout=TIMEOUT)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.communicate()
    return job.returncode, out, err


def lines(out, rank, word):
    prefix = f"[{rank}] {word} "
    return [line[len(prefix):] for line in out.splitlines() if line.startswith(prefix)]


@pytest.mark.parametrize("first_host", ["remote", "localhost"])
def test_process_sets_share_memory_within_a_host_and_use_tcp_between_hosts(hosts, first_host):
    """Two remote hosts; or this machine (tuttirun's namespace) and a remote host, whose ranks
    reach the local ones at the address tuttirun advertises."""
    a, b = hosts.addresses
    if first_host == "localhost":
        a = "localhost"
    mark = marker()
    code, out, err = run(hosts, "-H", f"{a}:2,{b}:2", sys.executable, WORKER, "collectives", mark)
    assert code == 0, out + err
    host_of = {0: a, 1: a, 2: b, 3: b}
    netns = {}
    for rank in range(4):
        assert lines(out, rank, "set") == (["host ok", "across ok"] if rank in (1, 2)
                                           else ["host ok"]), out
        (where,) = lines(out, rank, "where")
        _, host_id, netns[rank] = where.split()
        assert host_id == host_of[rank]
        links = {int(peer): (transport, connected) for peer, transport, connected in
                 (line.split() for line in lines(out, rank, "link"))}
        assert links == {peer: ("shm" if host_of[peer] == host_of[rank] else "tcp", "True")
                         for peer in range(4) if peer != rank}, out
    # The two hosts really are two network namespaces.
    assert netns[0] == netns[1] != netns[2] == netns[3]
    assert left_behind(mark) == []


def test_a_failing_remote_rank_stops_the_job_on_both_hosts(hosts):
    a, b = hosts.addresses
    mark = marker()
    code, out, err = run(hosts, "-H", f"{a}:2,{b}:2", sys.executable, WORKER, "fail", mark, "3")
    assert code == 3, out + err
    assert "tuttirun: rank 3 exited with status 3; stopping the other ranks" in err.splitlines()
    assert left_behind(mark) == []


def test_sigterm_to_tuttirun_stops_the_remote_ranks(hosts):
    a, b = hosts.addresses
    mark = marker()
    job = subprocess.Popen(tuttirun(hosts, "-H", f"{a}:2,{b}:2", sys.executable, WORKER, "wait",
                                    mark),
                           env=job_env(), text=True, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, start_new_session=True)
    try:
        # Lines as they come, so that SIGTERM goes once every rank is known to run.
        seen = queue.Queue()
        threading.Thread(target=lambda: [seen.put(line) for line in job.stdout] + [seen.put(None)],
                         daemon=True).start()
        ready = set()
        while len(ready) < 4:
            line = seen.get(timeout=TIMEOUT)
            assert line is not None, "tuttirun ended before every rank was ready"
            if line.rstrip().endswith("] ready"):
                ready.add(line.split("]")[0])
        assert left_behind(mark) != []  # the ranks are there to be stopped
        job.send_signal(signal.SIGTERM)  # `ip netns exec` became tuttirun: same pid
        code = job.wait(timeout=TIMEOUT)
        err = job.stderr.read()
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    assert code == 128 + signal.SIGTERM, err
    assert "tuttirun: received signal 15; stopping the ranks" in err.splitlines()
    assert left_behind(mark) == []


def test_remote_ranks_end_when_tuttirun_is_killed(hosts):
    """SIGKILL leaves tuttirun no say: its pipes to the ssh clients close, each remote wrapper
    reads end of file and stops its rank (TERM, KILL 5 s later), and ssh ends with it."""
    a, b = hosts.addresses
    mark = marker()
    job = subprocess.Popen(tuttirun(hosts, "-H", f"{a}:1,{b}:1", sys.executable, WORKER, "wait",
                                    mark),
                           env=job_env(), text=True, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL)
    try:
        ready = 0
        for line in job.stdout:
            ready += line.rstrip().endswith("] ready")
            if ready == 2:
                break
        assert ready == 2, "tuttirun ended before every rank was ready"
        job.kill()  # tuttirun alone: its ssh clients live on, and their stdin reaches its end
        job.wait()
        # Nothing tuttirun could do: the end comes asynchronously, bounded by the wrapper's TERM
        # (the ranks die at once) and at worst its KILL 5 s later.
        deadline = time.monotonic() + 60
        while left_behind(mark) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert left_behind(mark) == []
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()


def test_an_unreachable_host_fails_before_any_rank_starts(hosts):
    a = hosts.addresses[0]
    (c,) = hosts.unreachable_addresses
    mark = marker()
    code, out, err = run(hosts, "-H", f"{a}:2,{c}:2", sys.executable, WORKER, "wait", mark)
    assert code == 1
    assert err == (f"tuttirun: cannot reach host '{c}' over ssh: ssh: connect to host {c} port 22: "
                   "Connection refused\n")
    assert out == ""
    assert left_behind(mark) == []


def test_forwards_the_environment_it_should_and_places_ranks_as_horovodrun(hosts):
    a, b = hosts.addresses
    tricky = "it's \"quoted\" $HOME `date` \\ ;\nsecond line"
    names = ["TUTTI_SSH_TEST", "HOROVOD_SSH_TEST", "NCCL_SSH_TEST", "OMP_NUM_THREADS",
             "SSH_TEST_PRIVATE", "SSH_TEST_EXPLICIT", "SSH_TEST_SET", "TUTTI_HOST_ID",
             "HOROVOD_HOSTNAME", "HOROVOD_RANK", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE",
             "HOROVOD_CROSS_RANK", "HOROVOD_CROSS_SIZE"]
    env = {"TUTTI_SSH_TEST": tricky, "HOROVOD_SSH_TEST": "h", "NCCL_SSH_TEST": "n",
           "OMP_NUM_THREADS": "3", "SSH_TEST_PRIVATE": "not forwarded",
           "SSH_TEST_EXPLICIT": "asked for"}
    with tempfile.TemporaryDirectory() as cwd:
        hostfile = os.path.join(cwd, "hosts")
        with open(hostfile, "w") as f:
            f.write(f"# two hosts, one slot each\n{a} slots=1\n{b} slots=1\n")
        code, out, err = run(hosts, "--verbose", "--hostfile", hostfile,
                             "-x", "SSH_TEST_EXPLICIT", "-x", "SSH_TEST_SET=set by -x",
                             sys.executable, WORKER, "env", marker(), *names, env=env, cwd=cwd)
    assert code == 0, out + err
    # --verbose: where the coordinator listens (every interface, advertised on the hosts' subnet)
    # and each remote rank's ssh command.
    said = err.splitlines()
    assert any(line.startswith("tuttirun: coordinator listening on tcp://0.0.0.0:") and
               f", given to the ranks as tcp://{ssh_hosts.SUBNET}.1:" in line for line in said), err
    for rank, host in enumerate((a, b)):
        assert any(line.startswith(f"tuttirun: rank {rank} on host '{host}': 'ssh' ") and
                   f"'--' '{host}' 'exec env " in line for line in said), err
    for rank, host in enumerate((a, b)):
        assert lines(out, rank, "env") == [
            f"TUTTI_SSH_TEST={tricky!r}", "HOROVOD_SSH_TEST='h'", "NCCL_SSH_TEST='n'",
            "OMP_NUM_THREADS='3'", "SSH_TEST_PRIVATE unset", "SSH_TEST_EXPLICIT='asked for'",
            "SSH_TEST_SET='set by -x'", f"TUTTI_HOST_ID='{host}'", f"HOROVOD_HOSTNAME='{host}'",
            f"HOROVOD_RANK='{rank}'", "HOROVOD_LOCAL_RANK='0'", "HOROVOD_LOCAL_SIZE='1'",
            f"HOROVOD_CROSS_RANK='{rank}'", "HOROVOD_CROSS_SIZE='2'"], out
        assert lines(out, rank, "cwd") == [cwd], out
