"""Zero-setup launch under Debian's torchrun (torch 1.13; `python3 -m torch.distributed.run`):
no tuttid started by hand, no TUTTI_* variables; rank 0 starts the job's coordinator and hands
it over torchrun's own TCPStore (docs/launchers.md). Every job's script also runs
torch.distributed.init_process_group('gloo'), whose rank 0 serves that store under torch 1.x.

Debian's torch 1.13 on Python 3.11 cannot parse torchrun's default `--redirects 0` (its Std flag
enum lost NONE from iteration in 3.11), so the jobs run with `--redirects 1 --tee 1`: each
rank's stdout goes to a log and to the console, prefixed "[defaultN]:"."""
import os
import re
import socket
import subprocess
import sys

from conftest import ROOT, engine_missing, launcher_env, run_at_once

SCRIPT = os.path.join(ROOT, "tests", "python", "workers", "torchrun_job.py")
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--redirects", "1", "--tee", "1"]


def need_torch():
    try:
        import torch.distributed.run  # noqa: F401
    except ImportError as e:
        engine_missing(f"no torch.distributed.run (Debian: python3-torch): {e}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def static(port, *args):
    return TORCHRUN + ["--nnodes", "1", "--node_rank", "0", "--master_addr", "127.0.0.1",
                       "--master_port", str(port), "--nproc_per_node", "2", SCRIPT, *args]


def check_job(out):
    for r in (0, 1):
        assert f"rank {r}: tutti 3 gloo 3 size 2" in out, out
        assert f"rank {r}: ok" in out, out


def test_standalone():
    need_torch()
    result = subprocess.run(TORCHRUN + ["--standalone", "--nproc_per_node", "2", SCRIPT],
                            env=launcher_env(), capture_output=True, text=True, timeout=240,
                            cwd=os.environ.get("TMPDIR", "/tmp"))
    assert result.returncode == 0, result.stdout + result.stderr
    check_job(result.stdout)


def test_static_rendezvous_and_two_jobs_at_once():
    need_torch()
    for code, out, err in run_at_once([static(free_port()), static(free_port())], launcher_env(),
                                      cwd=os.environ.get("TMPDIR", "/tmp")):
        assert code == 0, out + err
        check_job(out)


def rank_line(out, r):
    return next((l.split(":", 1)[1] for l in out.splitlines()
                 if l.startswith(f"[default{r}]:rank {r}: ")), None)


def test_init_before_init_process_group():
    need_torch()
    # Static rendezvous: torchrun's agent serves MASTER_PORT from the start
    # (TORCHELASTIC_USE_AGENT_STORE), so tutti needs no init_process_group first.
    result = subprocess.run(static(free_port(), "early"), env=launcher_env(), capture_output=True,
                            text=True, timeout=240, cwd=os.environ.get("TMPDIR", "/tmp"))
    assert result.returncode == 0, result.stdout + result.stderr
    for r in (0, 1):
        assert rank_line(result.stdout, r) == f"rank {r}: init returned", result.stdout
    # --standalone (c10d rendezvous): the store at MASTER_PORT is rank 0's init_process_group's,
    # which has not run: every rank times out, naming the remedy.
    result = subprocess.run(TORCHRUN + ["--standalone", "--nproc_per_node", "2", SCRIPT, "early"],
                            env=launcher_env(), capture_output=True, text=True, timeout=240,
                            cwd=os.environ.get("TMPDIR", "/tmp"))
    assert result.returncode == 0, result.stdout + result.stderr
    for r in (0, 1):
        line = rank_line(result.stdout, r)
        assert line is not None, result.stdout
        assert re.fullmatch(
            rf"rank {r}: TimeoutError: torchrun: no TCPStore answered at MASTER_ADDR:MASTER_PORT "
            r"\(\S+:\d+\) within 3 s \(.*\); under torch 1\.x call "
            r"torch\.distributed\.init_process_group before tutti's init \(its rank 0 serves "
            r"the store\), or name a coordinator with TUTTI_COORDINATOR", line), line
