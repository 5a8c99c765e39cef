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

import ray

from .._tuttid_child import TuttidChild


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
        self._child = TuttidChild("127.0.0.1" if local else "0.0.0.0",
                                  None if local else driver_ip, timeout_s, whose="the driver's")
        self.endpoint = self._child.endpoint

    @property
    def pid(self):
        """The child tuttid's process id, None when the coordinator is not this driver's."""
        return None if self._child is None else self._child.pid

    def stop(self):
        """SIGTERM (tuttid tells any rank still connected that it is stopping), then reap."""
        if self._child is not None:
            child, self._child = self._child, None
            child.stop()
