"""The status page and the Prometheus endpoint, watched during a real job: ranks are Python
processes using the tutti package; the page is rendered by a real headless browser (chromium)."""
import json
import os
import re
import socket
import subprocess
import sys
import urllib.request


from headless_browser import browser, render
from tuttid_process import BUILD, ROOT, wait_for

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers", "stalled_job.py")
JOB = "status-page-job"


def get(url):
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read().decode()


def metric(text, name):
    """The value of one series (name with labels, as exposed), or None."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return None


def start_ranks(endpoint):
    ranks = []
    for rank in range(3):
        env = dict(os.environ,
                   PYTHONPATH=os.path.join(ROOT, "python"),
                   TUTTI_LIBRARY=os.path.join(BUILD, "libtutti.so"),
                   TUTTI_COORDINATOR=endpoint, TUTTI_JOB=JOB, TUTTI_TOKEN="t",
                   TUTTI_RANK=str(rank), TUTTI_SIZE="3", TUTTI_TIMEOUT_MS="120000",
                   PYTHONUNBUFFERED="1")
        ranks.append(subprocess.Popen([sys.executable, WORKER], env=env, stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    return ranks


def test_status_page_and_metrics_during_a_job(tmp_path, tuttid_factory):
    browser()
    t = tuttid_factory(http=True)
    ranks = start_ranks(t.endpoint)
    try:
        for rank in ranks:
            assert rank.stdout.readline().strip() == "warm"

        def stuck():
            snapshot = json.loads(get(t.url + "/status.json"))
            for job in snapshot["jobs"]:
                for s in job["process_sets"]:
                    for p in s["pending"]:
                        if p["name"] == "grad/stuck" and p["submitted"] == [0, 1]:
                            return snapshot
            return None

        snapshot = wait_for(stuck, 60, "grad/stuck pending on ranks 0 and 1")
        job = snapshot["jobs"][0]
        assert job["id"] == JOB and job["state"] == "running" and job["size"] == 3
        assert [r["state"] for r in job["ranks"]] == ["alive"] * 3
        assert {r["host"] for r in job["ranks"]} == {socket.gethostname()}
        pending = job["process_sets"][0]["pending"][0]
        assert pending["missing"] == [2]

        dom = render(t.url + "/status", tmp_path)
        assert f'data-job="{JOB}"' in dom
        assert '<span class="state-running">running</span>, 3 of 3 ranks registered' in dom
        assert len(re.findall(r'<td class="state-alive">alive</td>', dom)) == 3
        assert f"<td>{socket.gethostname()}</td><td>[0, 1, 2]</td>" in dom  # the hosts table
        assert re.search(r'<td class="tensor">grad/stuck</td><td>[0-9.]+ s</td><td>\[0, 1\]</td>'
                         r'<td class="missing">\[2\]</td>', dom), dom

        text = get(t.url + "/metrics")
        assert metric(text, "tutti_jobs") == 1
        assert metric(text, "tutti_ranks") == 3
        assert metric(text, "tutti_pending_tensors") == 1
        assert metric(text, 'tutti_negotiations_total{kind="allreduce"}') >= 1
        assert metric(text, "tutti_negotiation_seconds_count") >= 1
        assert metric(text, "tutti_jobs_started_total") == 1
        # Per set: the warm-up on the world, whose last member came after the others.
        world = f'{{job="{JOB}",set="0"}}'
        assert metric(text, f"tutti_set_negotiations_total{world}") >= 1
        assert metric(text, f"tutti_set_negotiated_bytes_total{world}") >= 16
        assert metric(text, f"tutti_set_negotiation_seconds_count{world}") >= 1
        assert metric(text, f"tutti_set_straggler_seconds_count{world}") >= 1

        # Rank 2 submits with another shape: every rank fails, and the page lists the error.
        ranks[2].stdin.write("go\n")
        ranks[2].stdin.flush()
        for rank in ranks:
            line = rank.stdout.readline().strip()
            assert line.startswith("mismatch "), line
        for rank in ranks:
            assert rank.wait(timeout=60) == 0

        def errors():
            snapshot = json.loads(get(t.url + "/status.json"))
            return [e for e in snapshot["recent_errors"] if e["status"] == "mismatch"]

        listed = wait_for(errors, 60, "the mismatch among the recent errors")
        assert listed[0]["job"] == JOB and "grad/stuck" in listed[0]["message"]
        dom = render(t.url + "/status", tmp_path)
        assert re.search(rf"<td>{JOB}</td><td></td><td>mismatch</td><td>[^<]*grad/stuck", dom), dom
        text = get(t.url + "/metrics")
        assert metric(text, 'tutti_errors_total{status="mismatch"}') >= 1
    finally:
        for rank in ranks:
            if rank.poll() is None:
                rank.kill()
            rank.wait()


def test_per_set_series_beyond_the_cap_share_one_label_and_go_with_their_job(tuttid_factory):
    t = tuttid_factory("--metrics-max-sets", "0", http=True)
    ranks = start_ranks(t.endpoint)
    try:
        for rank in ranks:
            assert rank.stdout.readline().strip() == "warm"
        text = get(t.url + "/metrics")
        assert metric(text, 'tutti_set_negotiations_total{job="_other",set="_other"}') >= 1
        assert f'job="{JOB}"' not in text
    finally:
        for rank in ranks:
            rank.kill()
            rank.wait()

    t2 = tuttid_factory(http=True)
    ranks = start_ranks(t2.endpoint)
    try:
        for rank in ranks:
            assert rank.stdout.readline().strip() == "warm"
        assert metric(get(t2.url + "/metrics"),
                      f'tutti_set_negotiations_total{{job="{JOB}",set="0"}}') >= 1
    finally:
        for rank in ranks:
            rank.kill()
            rank.wait()
    # The job ends (its ranks are lost): its series go.
    wait_for(lambda: f'job="{JOB}"' not in get(t2.url + "/metrics"), 60,
             "the ended job's per-set series removed")
