"""Per-set autotuning (docs/autotune.md) in a real job: tuttid with short trials, three Python
ranks with TUTTI_AUTOTUNE=1 allreducing three tensors a step. Every member ran the same
collectives with the same algorithms (the tuned values take effect at one sequence number on all
of them, client-side cut-offs included), the sums are right throughout, tuttid logged every trial,
the status page shows the tuner converged, and the set went on its members' fast path once it
had. A pinned setting is never varied."""
import csv
import json
import os
import re
import subprocess
import sys
import urllib.request

from tuttid_process import BUILD, ROOT

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers", "autotune_job.py")
TRIALS = ["--autotune-trial-tensors", "6", "--autotune-trial-ms", "0",
          "--autotune-warmup-tensors", "6"]


def run_job(endpoint, job, tmp_path, inspect, extra_env=None, steps=120, ask_at=None):
    """Runs the job (TUTTI_AUTOTUNE=1 unless `ask_at`: then rank 0 asks for set [0, 1] to be
    tuned at that step); calls inspect() once every rank printed "done" (the job still
    registered), then lets them leave. Returns each rank's output lines."""
    ranks = []
    for rank in range(3):
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"),
                   TUTTI_LIBRARY=os.path.join(BUILD, "libtutti.so"), TUTTI_COORDINATOR=endpoint,
                   TUTTI_JOB=job, TUTTI_TOKEN="t", TUTTI_RANK=str(rank), TUTTI_SIZE="3",
                   TUTTI_TIMEOUT_MS="120000", **(extra_env or {}))
        if ask_at is None:
            env["TUTTI_AUTOTUNE"] = "1"
        ask = [] if ask_at is None else [str(ask_at)]
        ranks.append(subprocess.Popen(
            [sys.executable, WORKER, str(steps), str(tmp_path / f"{job}.{rank}.json")] + ask,
            env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = []
    try:
        for process in ranks:
            lines = []
            for line in process.stdout:  # the ranks' own timeouts bound this
                lines.append(line.rstrip("\n"))
                if line.strip() in ("done", ) or line.startswith("fail"):
                    break
            outputs.append(lines)
        inspect()
        for process, lines in zip(ranks, outputs):
            out, _ = process.communicate("\n", timeout=300)
            lines.extend(out.splitlines())
            assert process.returncode == 0, lines
    finally:
        for process in ranks:
            if process.poll() is None:
                process.kill()
                process.wait()
    return outputs


def assert_trials_logged(log, set_id, trials, best):
    """The CSV at `log` holds exactly `trials` (as /status.json shows them) of set `set_id`,
    in order, then a row of the `best` values."""
    with open(log, newline="") as f:
        rows = list(csv.DictReader(f))
    names = ("fusion_threshold", "small_allreduce_bytes", "pipeline_bytes")
    expected = [{"set": str(set_id), "trial": str(n), **{k: str(t["values"][k]) for k in names},
                 "bytes_per_second": f"{t['bytes_per_second']:.0f}",
                 "scored_by": "execution" if t["scored_by"] == "execution time" else "wall_clock",
                 "round": "confirmation" if t["confirmation"] else "pass"}
                for n, t in enumerate(trials, 1)]
    expected.append({"set": str(set_id), "trial": "chosen", **{k: str(best[k]) for k in names},
                     "bytes_per_second": "", "scored_by": "", "round": ""})
    assert rows == expected, (rows, expected)


def set_status(url, job, set_id=0):
    with urllib.request.urlopen(f"{url}/status.json?job={job}", timeout=30) as response:
        entry = json.loads(response.read())
    return next(s for s in entry["process_sets"] if s["id"] == set_id)


def test_every_member_runs_the_tuned_values_and_the_tuner_converges(tmp_path, tuttid_factory):
    t = tuttid_factory(*TRIALS, http=True)
    seen, page = {}, []

    def inspect():
        seen.update(set_status(t.url, "tuned"))
        with urllib.request.urlopen(f"{t.url}/job/tuned/set/0", timeout=30) as response:
            page.append(response.read().decode())
    log = tmp_path / "trials.csv"  # every rank is given it; rank 0, the set's first, writes
    outputs = run_job(t.endpoint, "tuned", tmp_path, inspect, {"TUTTI_AUTOTUNE_LOG": str(log)})
    ran = [[line for line in lines if line.startswith("ran ")] for lines in outputs]
    assert all(lines[-1] == "autotune job ok" for lines in outputs), outputs
    # The same collectives, fused alike and run with the same algorithm, on every member.
    assert ran[0] == ran[1] == ran[2]
    algorithms = {line.split()[-1] for line in ran[0]}
    assert algorithms >= {"direct", "ring"}, algorithms  # the cut-off trials changed the choice
    fused = {line.split()[2] for line in ran[0]}
    assert "small" in fused and any("+" in f for f in fused), fused  # so did the fusion trials
    tune = seen["autotune"]
    assert tune["state"] == "converged"
    # One trial of the starting values, then each grid but the value already measured, then the
    # three finalists again (the starting values among them).
    trials = tune["trials"]
    assert len(trials) == 1 + 5 + 4 + 3 + 3
    assert [trial["confirmation"] for trial in trials] == [False] * 13 + [True] * 3
    assert trials[0]["values"] in [trial["values"] for trial in trials[13:]]
    assert tune["current"] == tune["best"] and tune["pinned"] == []
    # Every member reported its own execution time under every trial's values.
    assert {trial["scored_by"] for trial in trials} == {"execution time"}, trials
    # The chosen values were a finalist, scored by the mean of their two measurements.
    chosen = [trial["bytes_per_second"] for trial in trials if trial["values"] == tune["best"]]
    assert len(chosen) == 2
    assert abs(sum(chosen) / 2 - tune["best_bytes_per_second"]) <= 1e-6 * tune["best_bytes_per_second"]
    logged = re.findall(r"job 'tuned' set 0: autotune trial fusion_threshold=\d+ "
                        r"small_allreduce_bytes=\d+ pipeline_bytes=\d+: [\d.]+ MB/s "
                        r"\(execution time(, confirmation)?\)(; converged)?", t.stderr())
    assert len(logged) == 16 and logged[-1] == (", confirmation", "; converged"), \
        t.stderr()[-3000:]
    # Converged: tuttid no longer needs to watch, and grants the members' fast path.
    assert seen["fast_path"]["grants"] >= 1
    # TUTTI_AUTOTUNE_LOG: tuttid's trials as the members heard them, then the chosen values.
    assert_trials_logged(log, 0, trials, tune["best"])
    # The set's page says so too.
    assert re.search(r'<span class="autotune-converged">converged</span> after 16 trials: fusion '
                     r'threshold [^;]+, small allreduces up to [^;]+, pipeline pieces of [^;]+; '
                     r'best [\d.]+ [KMG]?i?B/s', page[0]), page[0]


def test_a_pinned_setting_is_never_tuned_and_the_cut_off_trials_reach_every_member(
        tmp_path, tuttid_factory):
    # Fusion pinned off: every tensor runs alone, so which algorithm it ran with tells which
    # small-allreduce cut-off was in effect. With the built-in 16 KiB the 8 KiB tensor would
    # always take the direct exchange and the 64 KiB one the ring.
    t = tuttid_factory(*TRIALS, http=True)
    seen = {}
    outputs = run_job(t.endpoint, "pinned", tmp_path,
                      lambda: seen.update(set_status(t.url, "pinned")),
                      {"TUTTI_FUSION_THRESHOLD": "0"}, steps=80)
    tune = seen["autotune"]
    assert tune["pinned"] == ["fusion_threshold"] and tune["state"] == "converged"
    assert len(tune["trials"]) == 1 + 4 + 3 + 3  # and three finalists
    assert {trial["values"]["fusion_threshold"] for trial in tune["trials"]} == {0}
    ran = [[line for line in lines if line.startswith("ran ")] for lines in outputs]
    assert ran[0] == ran[1] == ran[2]
    by_tensor = {}
    for line in ran[0]:
        _, _, tensor, algorithm = line.split()
        by_tensor.setdefault(tensor, set()).add(algorithm)
    assert by_tensor["small"] == {"direct", "ring"}, by_tensor  # cut-offs 0 and 4 KiB tried
    assert by_tensor["mid"] == {"direct", "ring"}, by_tensor    # 64 and 256 KiB tried
    assert by_tensor["big"] == {"ring"}, by_tensor


def test_one_member_asks_to_tune_one_set_and_only_that_set_is_tuned(tmp_path, tuttid_factory):
    # No TUTTI_AUTOTUNE: rank 0 asks through the API (tutti_process_set_autotune) once tuttid
    # has put the set on its members' fast path. The world is left alone. Fusion is pinned off,
    # so that which algorithm a tensor ran with tells which small-allreduce cut-off was in effect
    # (as in the test above).
    t = tuttid_factory(*TRIALS, http=True)
    seen = {}

    def inspect():
        seen["world"] = set_status(t.url, "asked", 0)
        seen["pair"] = set_status(t.url, "asked", 1)
    log = tmp_path / "trials.csv"
    outputs = run_job(t.endpoint, "asked", tmp_path, inspect,
                      {"TUTTI_FUSION_THRESHOLD": "0", "TUTTI_AUTOTUNE_LOG": str(log)},
                      steps=260, ask_at=40)
    assert all(lines[-1] == "autotune job ok" for lines in outputs), outputs
    # The ask left the fast path it was on; the tuner ran its 16 trials and converged.
    grants = [line for line in outputs[0] if line.startswith("grants before the ask")]
    assert len(grants) == 1 and int(grants[0].split()[-1]) >= 1, outputs[0]
    tune = seen["pair"]["autotune"]
    assert tune["state"] == "converged" and len(tune["trials"]) == 1 + 4 + 3 + 3, tune
    assert tune["pinned"] == ["fusion_threshold"], tune
    assert {trial["scored_by"] for trial in tune["trials"]} == {"execution time"}, tune
    assert "autotune" not in seen["world"], seen["world"]
    assert_trials_logged(log, 1, tune["trials"], tune["best"])  # the pair's only
    logged = re.findall(r"job 'asked' set (\d+): autotune trial", t.stderr())
    assert logged == ["1"] * 11, t.stderr()[-3000:]
    assert "job 'asked' set 1: autotuning asked by rank 0" in t.stderr()
    # The members ran the pair's collectives alike, with the algorithms the cut-off trials chose:
    # the 8 KiB tensor took the ring too (cut-offs "never" and 4 KiB) and the 64 KiB one the
    # direct exchange too (64 and 256 KiB), which the built-in 16 KiB never does. The world,
    # untuned, ran the built-in cut-off throughout, alike on all three ranks.
    ran = [[line.split()[1:] for line in lines if line.startswith("ran ")] for lines in outputs]
    pair = [[r for r in ran[rank] if r[0] == "1"] for rank in range(2)]
    assert pair[0] == pair[1] and len(pair[0]) == 3 * 260, len(pair[0])
    by_tensor = {}
    for _, tensor, algorithm in pair[0]:
        by_tensor.setdefault(tensor, set()).add(algorithm)
    assert by_tensor == {"small": {"direct", "ring"}, "mid": {"direct", "ring"},
                         "big": {"ring"}}, by_tensor
    world = [[r for r in ran[rank] if r[0] == "0"] for rank in range(3)]
    assert world[0] == world[1] == world[2] and len(world[0]) == 3 * 260
    for _, tensor, algorithm in world[0]:
        assert algorithm == ("direct" if tensor == "small" else "ring"), world[0]
    # The errors a caller can make, with their exact class and message.
    assert "refused NotAMemberError: rank 2 is not a member of process set 1" in outputs[2]
    assert ("unknown UnknownSetError: process set 77 is unknown to rank 0 (add it on this rank "
            "first)") in outputs[0], outputs[0]
