"""A real single-member etcd for the HA tests (Debian's etcd-server): free loopback ports, a data
directory of its own, ready once it answers a read. Stop() kills it (SIGKILL, as a crash would);
start() brings it back on the same ports and data, with its leases. Under CI=true a missing etcd
fails the test instead of skipping it."""
import base64
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request

import pytest

ETCD = "/usr/bin/etcd"


def require_etcd():
    if os.access(ETCD, os.X_OK):
        return
    if os.environ.get("CI") == "true":
        pytest.fail("etcd is not installed (apt-get install etcd-server): CI must run this")
    pytest.skip("etcd is not installed (apt-get install etcd-server)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Etcd:
    def __init__(self):
        require_etcd()
        self.dir = tempfile.mkdtemp(prefix="tutti-etcd-")
        self.process = None
        for _ in range(3):  # a port taken between free_port() and etcd's bind: try others
            self.client, self.peer = free_port(), free_port()
            if self.start():
                return
        raise AssertionError(f"etcd did not start: {self.transcript()}")

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.client}"

    def start(self, timeout=60):
        peer_url = f"http://127.0.0.1:{self.peer}"
        self.log = open(os.path.join(self.dir, "etcd.log"), "a")
        self.process = subprocess.Popen(
            [ETCD, "--name", "tutti-test", "--data-dir", os.path.join(self.dir, "data"),
             "--listen-client-urls", self.endpoint, "--advertise-client-urls", self.endpoint,
             "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
             "--initial-cluster", f"tutti-test={peer_url}", "--log-level", "error"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                self.get("probe")
                return True
            except OSError:
                time.sleep(0.05)  # etcd has no readiness signal to wait on
        return False

    def get(self, key):
        body = json.dumps({"key": base64.b64encode(key.encode()).decode()}).encode()
        request = urllib.request.Request(self.endpoint + "/v3/kv/range", data=body)
        with urllib.request.urlopen(request, timeout=2) as response:
            kvs = json.loads(response.read()).get("kvs", [])
        return base64.b64decode(kvs[0]["value"]).decode() if kvs else None

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def transcript(self):
        path = os.path.join(self.dir, "etcd.log")
        return open(path).read()[-3000:] if os.path.exists(path) else ""

    def remove(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
