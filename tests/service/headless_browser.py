"""The headless browser the status-page tests render pages with (Debian's chromium). Without
one they skip, and fail under CI=true, whose machine installs it (scripts/setup.sh)."""
import os
import shutil
import signal
import subprocess

import pytest


def browser():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    if os.environ.get("CI") == "true":
        pytest.fail("no headless browser on CI (scripts/setup.sh installs Debian's chromium)")
    pytest.skip("no headless browser (Debian's chromium)")


def render(url, tmp_path):
    """The page's DOM after a real browser loaded it. Chromium runs in a process group of its
    own, killed whole if it overruns, so that none of its helpers outlives the test."""
    process = subprocess.Popen(
        [browser(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run", "--timeout=30000", f"--user-data-dir={tmp_path / 'chromium'}",
         "--dump-dom", url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise AssertionError(f"chromium did not render {url} in 120 s")
    finally:
        # Helpers left in its group (its zygote, say) go too.
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert process.returncode == 0, err[-2000:]
    return out
