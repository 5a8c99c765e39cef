"""A tuttid started as this process's child: a job's own coordinator where no standalone one is
named. Rank 0 under torchrun (_zero_setup.py), and the drivers of tutti.spark and tutti.ray,
start one; C programs get the same from libtutti (bootstrap/tuttid_child.cc).

The child runs `tuttid --exit-with-parent`: it ends with the thread that started it even if
stop() is never reached (PR_SET_PDEATHSIG), so start it from a thread that lives as long as the
job. Its stderr is this process's."""
import os
import selectors
import shutil
import signal
import subprocess

from . import _capi
from .errors import InvalidArgumentError, TimeoutError

_LISTENING = "tuttid listening on "


def find_tuttid():
    """TUTTI_TUTTID, else tuttid beside the loaded libtutti or in ../bin from it, else PATH."""
    named = os.environ.get("TUTTI_TUTTID")
    if named:
        return named
    here = os.path.dirname(_capi.library_path)
    for candidate in (os.path.join(here, "tuttid"), os.path.join(here, "..", "bin", "tuttid")):
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("tuttid")


class TuttidChild:
    """`endpoint`: where the job's ranks reach it; `pid`; `stop()`.

    `bind_host`: 127.0.0.1 for a job on this host, else 0.0.0.0, on an OS-chosen port.
    `advertised_host`: the address the ranks reach this host at when that is not `bind_host`.
    `whose`: whose stderr tuttid's is, for the message when it cannot start ("this rank's")."""

    def __init__(self, bind_host, advertised_host=None, timeout_s=60, whose="this process's"):
        binary = find_tuttid()
        if binary is None:
            raise InvalidArgumentError("no coordinator named (TUTTI_COORDINATOR) and no tuttid to "
                                       "start: set TUTTI_TUTTID, or put tuttid beside "
                                       "libtutti.so or on PATH")
        try:
            self._child = subprocess.Popen(
                [binary, "--bind", f"tcp://{bind_host}:*", "--log-level", "warn",
                 "--exit-with-parent"], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        except OSError as e:
            raise InvalidArgumentError(f"cannot start tuttid ({binary}): {e}") from None
        try:
            line = self._first_line(timeout_s)
        finally:
            self._child.stdout.close()
        if not line.startswith(_LISTENING):
            if self._child.poll() is None:
                self.stop()
                raise TimeoutError(f"tuttid ({binary}) did not say where it listens within "
                                   f"{timeout_s:g} s", -8)
            raise InvalidArgumentError(f"tuttid ({binary}) exited with status "
                                       f"{self._child.returncode} before listening; its stderr "
                                       f"is {whose}")
        port = line[len(_LISTENING):].rsplit(":", 1)[1]
        self.endpoint = f"tcp://{advertised_host or bind_host}:{port}"

    def _first_line(self, timeout_s):
        """tuttid's "tuttid listening on tcp://ADDRESS:PORT", or "" if it said nothing in time
        (or exited: then it has been reaped)."""
        with selectors.DefaultSelector() as selector:
            selector.register(self._child.stdout, selectors.EVENT_READ)
            if not selector.select(timeout_s):
                return ""
        line = self._child.stdout.readline().strip()
        if not line:
            self._child.wait()
        return line

    @property
    def pid(self):
        return self._child.pid

    def stop(self):
        """SIGTERM (tuttid tells any rank still connected that it is stopping), then reap;
        SIGKILL after 10 s."""
        if self._child.poll() is None:
            self._child.send_signal(signal.SIGTERM)
            try:
                self._child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._child.kill()
                self._child.wait()
