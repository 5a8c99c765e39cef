"""tuttid as a system service: configuration, systemd's notify protocol and unit file."""
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

from tuttid_process import ROOT, TUTTID


def run_tuttid(*args, env=None, timeout=30):
    return subprocess.run([TUTTID, *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def test_version_and_help():
    result = run_tuttid("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == "tuttid 0.13.0 (protocol 7)"
    result = run_tuttid("--help")
    assert result.returncode == 0
    for flag in ("--config", "--http", "--curve-secret-key-file", "--curve-clients",
                 "--max-pending-tensors", "--max-registrations-per-second"):
        assert flag in result.stdout


def test_config_file_settings_and_precedence(tmp_path, tuttid_factory):
    config = tmp_path / "tuttid.toml"
    config.write_text('# operators\' settings\nhttp = "127.0.0.1:0"\nlease-ms = 7000\n'
                      'log-level = "warn"\n')
    # The file turns the status page on...
    t = tuttid_factory("--config", str(config), http=False)
    line = t.process.stdout.readline()
    assert line.startswith("tuttid status page on http://127.0.0.1:"), line
    # ...a flag overrides it (empty: off), and the file overrides the environment.
    env = dict(os.environ, TUTTID_HTTP="not-an-address")
    t = tuttid_factory("--config", str(config), "--http", "", env=env)
    assert t.stop() == 0
    assert t.process.stdout.read() == ""
    t = tuttid_factory("--config", str(config), env=env)
    line = t.process.stdout.readline()
    assert line.startswith("tuttid status page on http://127.0.0.1:"), line


@pytest.mark.parametrize("content,message", [
    ('lease-ms = 3000\nbogus-key = 1\n', "unknown key 'bogus-key'"),
    ('lease-ms = "abc"\n', "--lease-ms: must be a positive number, got 'abc'"),
    ('log-level = "loud"\n', "--log-level: loud not in {trace,debug,info,warn,error,off}"),
])
def test_invalid_config_is_refused_naming_the_key(tmp_path, content, message):
    config = tmp_path / "bad.toml"
    config.write_text(content)
    result = run_tuttid("--config", str(config))
    assert result.returncode == 2
    assert result.stderr.strip() == f"tuttid: config file {config}: {message}"


def test_exit_when_idle_ends_once_the_job_it_served_has_ended(tuttid_factory):
    # A job's own coordinator (zero-setup, docs/launchers.md) ends by itself after its job.
    t = tuttid_factory("--exit-when-idle")
    tuttirun = os.path.join(os.path.dirname(TUTTID), "tuttirun")
    job = subprocess.run([tuttirun, "--coordinator", t.endpoint, "-np", "2",
                          os.path.join(os.path.dirname(TUTTID), "example_process_sets")],
                         capture_output=True, text=True, timeout=120)
    assert job.returncode == 0, job.stdout + job.stderr
    assert t.process.wait(timeout=60) == 0, t.stderr()


def test_missing_config_file_is_refused(tmp_path):
    result = run_tuttid("--config", str(tmp_path / "absent.toml"))
    assert result.returncode == 2
    path = tmp_path / "absent.toml"
    assert result.stderr.strip() == f"tuttid: config file {path}: {path} was not readable (missing?)"


def test_notify_protocol_ready_watchdog_stopping(tmp_path):
    """tuttid under Type=notify and WatchdogSec, with a socket this test owns as NOTIFY_SOCKET."""
    path = str(tmp_path / "notify")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(path)
    listener.settimeout(30)
    env = dict(os.environ, NOTIFY_SOCKET=path, WATCHDOG_USEC="400000")
    process = subprocess.Popen([TUTTID, "--bind", "tcp://127.0.0.1:*"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        messages = []

        def receive():
            message = listener.recv(4096).decode()
            messages.append(message)
            return message

        ready = receive()
        assert ready.startswith("READY=1\nSTATUS=listening on tcp://127.0.0.1:"), ready
        # Ready means bound: the endpoint in the status line accepts a connection right away.
        endpoint = ready.split("listening on tcp://")[1].split(",")[0].strip()
        host, port = endpoint.rsplit(":", 1)
        socket.create_connection((host, int(port)), timeout=10).close()
        assert process.stdout.readline().strip() == f"tuttid listening on tcp://{endpoint}"
        # Pings at half the 400 ms watchdog period: several within a few seconds.
        start = time.monotonic()
        pings = 0
        while pings < 5:
            assert receive() == "WATCHDOG=1"
            pings += 1
        assert time.monotonic() - start < 10, messages
        process.send_signal(signal.SIGTERM)
        while True:
            message = receive()
            if message != "WATCHDOG=1":
                break
        assert message.startswith("STOPPING=1\nSTATUS="), message
        assert process.wait(timeout=15) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        listener.close()


def test_no_notify_socket_no_messages():
    """Without NOTIFY_SOCKET (not under systemd) tuttid starts and stops the same way."""
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC")}
    process = subprocess.Popen([TUTTID, "--bind", "tcp://127.0.0.1:*"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        assert process.stdout.readline().startswith("tuttid listening on tcp://")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=15) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def unit_file(tmp_path):
    """The packaged unit with the build tree's tuttid in place of the installed path."""
    text = open(os.path.join(ROOT, "packaging", "systemd", "tuttid.service")).read()
    config = tmp_path / "tuttid.toml"
    config.write_text('bind = "tcp://127.0.0.1:*"\n')
    text = text.replace("@TUTTI_BINDIR@", os.path.dirname(TUTTID))
    text = text.replace("@TUTTI_CONFIG_PATH@", str(config))
    unit = tmp_path / "tuttid.service"
    unit.write_text(text)
    return unit


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_unit_file_verifies(tmp_path):
    result = subprocess.run(["systemd-analyze", "verify", str(unit_file(tmp_path))],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "", result.stderr


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_unit_file_hardening_score(tmp_path):
    result = subprocess.run(["systemd-analyze", "security", "--offline=yes",
                             str(unit_file(tmp_path))],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    last = [line for line in result.stdout.splitlines() if "Overall exposure level" in line]
    assert last, result.stdout
    score = float(last[0].split(":")[1].split()[0])
    assert score <= 2.0, last[0]
