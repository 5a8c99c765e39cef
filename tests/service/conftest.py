"""tuttid as operators run it: its notify protocol, config file, unit file, status page and
metrics. Every tuttid a test starts is stopped (SIGTERM, then SIGKILL) when it ends."""
import pytest

from tuttid_process import Tuttid


@pytest.fixture
def tuttid_factory():
    started = []

    def start(*args, env=None, http=False):
        t = Tuttid(*args, env=env, http=http)
        started.append(t)
        return t

    yield start
    for t in started:
        t.stop()
