"""A real tuttid from the build tree, as the service tests start it. TUTTI_BUILD_DIR picks the
build (default: build/)."""
import os
import re
import signal
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, os.environ.get("TUTTI_BUILD_DIR", "build"))
TUTTID = os.path.join(BUILD, "tuttid")


class Tuttid:
    """A started tuttid; reads the lines it prints on stdout (endpoint, status page URL)."""

    def __init__(self, *args, env=None, http=False):
        http_args = ["--http", "127.0.0.1:0"] if http else []
        # Logs to a file: a pipe nobody reads would block tuttid once full.
        self.log = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen([TUTTID, "--bind", "tcp://127.0.0.1:*", *http_args, *args],
                                        stdout=subprocess.PIPE, stderr=self.log,
                                        text=True, env=env)
        self.endpoint = self._read("tuttid listening on (\\S+)")
        self.url = self._read("tuttid status page on (\\S+)/status") if http else None

    def _read(self, pattern):
        line = self.process.stdout.readline()
        match = re.match(pattern, line)
        if not match:
            self.stop()
            raise AssertionError(f"tuttid printed {line!r}, stderr: {self.stderr()}")
        return match.group(1)

    def stderr(self):
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def wait_for(predicate, timeout, what):
    """Polls `predicate` until it returns a true value; fails naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)
