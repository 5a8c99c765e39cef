"""bench/hop_profile.py on the timelines of a real 2-rank allreduce loop: every hop of every
rank is found and the hops add up to the collective (it never asserts on speed)."""
import os
import re
import subprocess
import sys

from conftest import BUILD, ROOT, job_env


def test_hop_profile_cuts_a_fast_path_loop_into_its_hops(tmp_path):
    timeline = tmp_path / "t.json"
    bench = [os.path.join(BUILD, "tuttirun"), "--no-prefix", "-np", "2",
             os.path.join(BUILD, "bench", "allreduce_bench"), "--sizes", "4096", "--no-step"]
    run = subprocess.run(bench, env=job_env({"TUTTI_TIMELINE": str(timeline)}),
                         capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr
    files = sorted(str(p) for p in tmp_path.glob("t.rank*.json"))
    assert len(files) == 2, files
    profile = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "hop_profile.py"), *files],
                             capture_output=True, text=True, timeout=120)
    assert profile.returncode == 0, profile.stderr
    rows = {}
    for line in profile.stdout.splitlines():
        m = re.match(r"\| (\d) \| (.+?) \| (\d+) \| ([\d.]+) \| (\d+) \|$", line)
        if m:
            rows[(int(m.group(1)), m.group(2))] = float(m.group(4))
    hops = ["submit", "to lane", "round", "to execute", "execute", "complete", "to app"]
    for rank in (0, 1):
        for hop in hops + ["**one collective**", "timeline event"]:
            assert (rank, hop) in rows, profile.stdout
        # Means are additive: the hops tile each collective exactly.
        assert abs(sum(rows[(rank, h)] for h in hops) - rows[(rank, "**one collective**")]) < 1.0, \
            profile.stdout


def test_hop_profile_names_a_timeline_without_the_tensor(tmp_path):
    empty = tmp_path / "t.rank0.json"
    empty.write_text('{"traceEvents": []}')
    profile = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "hop_profile.py"),
                              str(empty)], capture_output=True, text=True, timeout=60)
    assert profile.returncode == 1
    assert profile.stderr.strip() == f"{empty}: no fast-path collective of 'sweep' found"
