"""The job's coordinator and identity, on the driver: one per RayExecutor.start().

Unless TUTTI_COORDINATOR names a running tuttid, the driver process starts `tuttid` as its child
(found as under torchrun: TUTTI_TUTTID, beside libtutti, or PATH) with --exit-with-parent, so it
ends with the thread that called start() even if shutdown() is never reached. It binds 127.0.0.1
when every alive Ray node is this machine, else every interface, advertised at the driver's node
IP (the address Ray itself reaches this node on). Each start() also makes a fresh job id and a
random token: two executors, or two starts of one, are never one job, and only actors told the
token can join it."""
import os
import secrets
import signal
import subprocess

import ray

from .._zero_setup import find_tuttid


def _all_nodes_local(driver_ip):
    """Whether every alive Ray node runs on the driver's machine (same node IP)."""
    return all(node["NodeManagerAddress"] == driver_ip for node in ray.nodes() if node["Alive"])


class Coordinator:
    """`endpoint`, `job` and `token` of one job; `stop()` ends the tuttid this started."""

    def __init__(self, timeout_s):
        self.job = f"ray-{secrets.token_hex(8)}"
        self.token = secrets.token_hex(16)
        self._child = None
        named = os.environ.get("TUTTI_COORDINATOR", "")
        if named not in ("", "auto"):
            self.endpoint = named
            return
        driver_ip = ray.util.get_node_ip_address()
        local = _all_nodes_local(driver_ip)
        self.endpoint = self._start_tuttid("tcp://127.0.0.1:*" if local else "tcp://0.0.0.0:*",
                                           None if local else driver_ip, timeout_s)

    @property
    def pid(self):
        """The child tuttid's process id, None when the coordinator is not this driver's."""
        return None if self._child is None else self._child.pid

    def _start_tuttid(self, bind, advertised_host, timeout_s):
        binary = find_tuttid()
        if binary is None:
            raise FileNotFoundError("no coordinator named (TUTTI_COORDINATOR) and no tuttid to "
                                    "start: set TUTTI_TUTTID, or put tuttid beside libtutti.so "
                                    "or on PATH")
        self._child = subprocess.Popen(
            [binary, "--bind", bind, "--log-level", "warn", "--exit-with-parent"],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        line = self._child.stdout.readline().strip()  # "tuttid listening on tcp://ADDRESS:PORT"
        self._child.stdout.close()
        prefix = "tuttid listening on "
        if not line.startswith(prefix):
            code = self._child.wait(timeout=timeout_s)
            self._child = None
            raise RuntimeError(f"tuttid ({binary}) exited with status {code} before listening; "
                               f"its stderr is the driver's")
        endpoint = line[len(prefix):]
        if advertised_host is not None:
            endpoint = f"tcp://{advertised_host}:{endpoint.rsplit(':', 1)[1]}"
        return endpoint

    def stop(self):
        """SIGTERM (tuttid tells any rank still connected that it is stopping), then reap."""
        if self._child is not None:
            child, self._child = self._child, None
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
