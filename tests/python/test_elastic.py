"""Elastic jobs under tuttirun --min-np (docs/elastic.md), in the style of Horovod's elastic
tests: ranks killed with SIGKILL or failing with an exception mid-training, the survivors
resuming from the last commit with equal models; a frozen rank evicted; two sets training two
models where one set's loss never reaches the other; fast fan-out; all ranks failing, the
minimum size, the reset limit. Workers: tests/python/workers/elastic.py."""
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import BUILD, WORKERS, job_env, lines_of

WORKER = os.path.join(WORKERS, "elastic.py")


def tuttirun(np, *worker_args, flags=("--min-np", "2"), timeout=180):
    command = [os.path.join(BUILD, "tuttirun"), "-np", str(np), *flags, sys.executable, WORKER,
               *[str(a) for a in worker_args]]
    return subprocess.run(command, env=job_env(), capture_output=True, text=True, timeout=timeout)


def fields(result, rank, key):
    """The whitespace-split fields after `key` on rank `rank`'s lines starting with it."""
    return [line.split()[1:] for line in lines_of(result, rank) if line.split()[:1] == [key]]


def replay(steps, fail_at, sizes):
    """The weights train_world should end with: each step averages w - targets over the ranks of
    that step's world, then w -= 0.5 * that."""
    w = [0.0] * 4
    for step in range(steps):
        n = sizes[0] if step < fail_at else sizes[1]
        grad = [sum(w[i] - (step * 10 + r + i) for r in range(n)) / n for i in range(4)]
        w = [w[i] - 0.5 * grad[i] for i in range(4)]
    return w


@pytest.mark.parametrize("how", ["kill", "raise"])
def test_rank_lost_mid_training_survivors_resume_from_the_last_commit(how):
    result = tuttirun(4, how)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    survivors = [0, 1, 3]  # tuttirun's rank numbers; rank 3 is rank 2 in the new epoch
    finals = {}
    for r in survivors:
        attempts = fields(result, r, "attempt")
        assert attempts[0] == ["1", "0", "4", str(r)], attempts
        # The second attempt: epoch 2, from the commit after step 4, world of 3, renumbered.
        assert attempts[1] == ["2", "5", "3", str(survivors.index(r))], attempts
        final = fields(result, r, "final")
        assert len(final) == 1, result.stdout[-3000:]
        finals[r] = [float(x) for x in final[0][1:]]
    assert finals[0] == finals[1] == finals[3]
    expected = replay(12, 5, (4, 3))
    assert finals[0] == pytest.approx(expected, abs=1e-6)
    assert "rank 2 " in result.stderr and "the elastic job goes on without it" in result.stderr


def test_a_set_that_loses_a_member_never_stops_the_other_set(tmp_path):
    result = tuttirun(4, "scoped", tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for r in (0, 1):
        # Set A ran all its steps and never needed a restore.
        assert fields(result, r, "a-steps") == [["400", "errors", "0"]], result.stdout[-3000:]
    # Set B's survivor recovered while set A completed 20 steps or more, and went on alone.
    recovered = fields(result, 2, "b-recovered")
    assert recovered and int(recovered[0][0]) >= 20, result.stdout[-3000:]
    assert fields(result, 2, "b-done") == [["40", "2", "3", "[2]"]]


def test_process_sets_survive_a_reset_renumbered_with_the_world():
    result = tuttirun(4, "sets")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for r, new_rank in ((0, 0), (2, 1), (3, 2)):
        lines = lines_of(result, r)
        assert "error ReformedError" in lines
        assert "world 2 3 %d" % new_rank in lines
        # Ids kept; old rank 2 is rank 1, old rank 3 is rank 2.
        assert "set s12 1 [1]" in lines
        assert "set s2 2 [1]" in lines
        assert "set s03 3 [0, 2]" in lines
        assert "set s013 5 [0, 2]" in lines
        # The set of rank 1 alone lost its only member: removed.
        assert "s1 UnknownSetError process set 4 was removed" in lines
        # Sets 1 and 2 both hold [1] now: adding it finds the older.
        assert "add [1] -> 1 older 1" in lines
    for r in (0, 3):
        assert "s03 sum 4.0" in lines_of(result, r)


def test_a_killed_rank_is_known_to_every_member_within_the_fan_out_deadline(tmp_path):
    result = tuttirun(4, "fanout", tmp_path / "killed")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for r in (0, 1, 2):
        failed = fields(result, r, "failed")
        assert failed, result.stdout[-3000:]
        # The promise is 100 ms; asserted with a margin for a loaded 2-core machine.
        assert float(failed[0][0]) < 1.0, failed
        assert failed[0][1] == "ReformedError"
        assert " ".join(failed[0][2:]).startswith(
            "re-formed: peer lost: rank 3: its control connection to tuttid closed; job ")


@pytest.mark.parametrize("asleep_s", [1, 3, 8])
def test_a_frozen_rank_woken_after_its_eviction_is_told_it_was_evicted(tmp_path, asleep_s):
    go = tmp_path / "go"
    command = [os.path.join(BUILD, "tuttirun"), "-np", "2", "--min-np", "1", sys.executable,
               WORKER, "frozen", str(go)]
    job = subprocess.Popen(command, env=job_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        pid = None
        for line in job.stdout:
            if line.startswith("[1] pid "):
                pid = int(line.split()[2])
                break
        assert pid, "rank 1 never started"
        os.kill(pid, signal.SIGSTOP)
        alone = None
        for line in job.stdout:
            if line.startswith("[0] alone "):
                alone = line.split()[2]
                break
        assert alone == "1"
        time.sleep(asleep_s)  # how long after its eviction the frozen rank wakes: the scenario
        os.kill(pid, signal.SIGCONT)
        go.write_text("go")
        out, err = job.communicate(timeout=120)
    finally:
        if job.poll() is None:
            job.kill()
            job.communicate()
    woken = [line for line in out.splitlines() if line.startswith("[1] woken ")]
    assert woken, out[-3000:] + err[-3000:]
    assert woken[0].startswith("[1] woken EvictedError evicted: rank 1 of job 'tuttirun-"), woken
    assert "was declared lost (no heartbeat for 5000 ms); it can no longer take part in the " \
           "job" in woken[0] or "was declared lost (its control connection to tuttid closed)" \
           in woken[0], woken
    assert job.returncode == 0, out[-3000:] + err[-3000:]


def test_a_rank_leaving_while_the_others_still_initialize_never_crashes_them():
    # The re-formation can reach a rank between tuttid's Welcome and the end of its init; before
    # 0.10 its I/O thread acted on it at once, on routes not built yet (a crash in most runs).
    # Then the survivors' first sync: a rank whose mark came before it read its epoch, or whose
    # stale announcement's refusal came after it announced again, waited for an epoch that never
    # came (a hang in 1 run of 5 under load).
    for attempt in range(4):
        result = tuttirun(3, "early_leave")
        assert result.returncode == 0, (attempt, result.stdout[-3000:] + result.stderr[-3000:])
        assert "exited with status" not in result.stderr and "signal" not in result.stderr, \
            (attempt, result.stderr[-3000:])
        for r in (0, 2):
            assert fields(result, r, "trained") == [["2,2,2", "6.0"]], (attempt, result.stdout)


def test_all_ranks_failing_ends_the_job_with_the_last_failure():
    result = tuttirun(2, "fail_all", flags=("--min-np", "1"))
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    # Rank 1 fails first, but the two may be reaped in one pass, in either order.
    said = {f"rank {r} exited with status 1; the elastic job goes on without it (failure {n})"
            for r in (0, 1) for n in (1, 2)}
    assert sum(line in result.stderr for line in said) == 2, result.stderr[-3000:]
    assert "tuttirun: every rank of the elastic job failed\n" in result.stderr


def test_fewer_ranks_than_the_minimum_for_the_elastic_timeout_end_the_job():
    result = tuttirun(3, "below_minimum", flags=("--min-np", "3", "--elastic-timeout", "2"))
    assert result.returncode == 3, result.stdout[-3000:] + result.stderr[-3000:]
    for r in (0, 1):
        ended = [line for line in lines_of(result, r) if line.startswith("ended ")]
        assert ended, result.stdout[-3000:]
        assert ended[0].startswith("ended TimeoutError timeout: elastic job 'tuttirun-"), ended
        assert ended[0].endswith("' ended: 2 ranks left, fewer than its minimum of 3, for 2000 "
                                 "ms (TUTTI_ELASTIC_TIMEOUT)"), ended


def test_the_reset_limit_ends_the_job_at_the_failure_past_it():
    result = tuttirun(3, "serial_failures", flags=("--min-np", "1", "--reset-limit", "1"))
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    # Ranks 2 and 1 fail one after the other; tuttirun may reap them in either order.
    assert "exited with status 1; the elastic job goes on without it (failure 1 of at most 1)" \
        in result.stderr
    assert "exited with status 1; the reset limit of 1 is reached" in result.stderr


def test_without_a_limit_the_job_survives_serial_failures():
    result = tuttirun(3, "serial_failures", flags=("--min-np", "1"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert fields(result, 0, "survived") == [["1"]]


@pytest.mark.parametrize("args,expected", [
    (["-np", "2", "--reset-limit", "4"],
     "--elastic-timeout and --reset-limit are for elastic jobs: give --min-np"),
    (["-np", "2", "--max-np", "4"],
     "--max-np, --host-discovery-script, --slots-per-host and --blacklist-cooldown-range are for "
     "elastic jobs: give --min-np"),
    (["-np", "2", "--min-np", "3"], "--min-np 3 is more than -np 2"),
    (["-np", "3", "--min-np", "2", "--max-np", "2"], "--max-np 2 is less than -np 3"),
    (["--min-np", "2"],
     "-np is required (or -H, --hostfile or --host-discovery-script, which can size the job)"),
    (["--min-np", "1", "--host-discovery-script", "true", "--blacklist-cooldown-range", "5", "1"],
     "--blacklist-cooldown-range: MIN must not be more than MAX"),
])
def test_elastic_options_a_user_gets_wrong_are_named(args, expected):
    result = subprocess.run([os.path.join(BUILD, "tuttirun"), *args, "true"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert f"tuttirun: {expected}\n" in result.stderr


@pytest.mark.parametrize("script,expected", [
    ("echo 127.0.0.1:1", "the host discovery script lists 1 usable slots, fewer than --min-np 2, "
                         "after 1 s (--elastic-timeout)"),
    ("echo 127.0.0.1:x", "the host discovery script printed '127.0.0.1:x': expected HOST or "
                         "HOST:SLOTS"),
    ("exit 3", "the host discovery script failed (status 3)"),
])
def test_a_discovery_script_that_finds_too_little_is_named(script, expected):
    result = subprocess.run([os.path.join(BUILD, "tuttirun"), "--min-np", "2", "--elastic-timeout",
                             "1", "--host-discovery-script", script, "true"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    assert f"tuttirun: {expected}\n" in result.stderr


@pytest.mark.parametrize("env,expected", [
    ({"TUTTI_ELASTIC": "1", "TUTTI_MIN_SIZE": "3"},
     "init InvalidArgumentError TUTTI_MIN_SIZE=3 must be in [1, 2], the world size"),
    ({"TUTTI_ELASTIC": "1", "TUTTI_ELASTIC_TIMEOUT": "0"},
     "init InvalidArgumentError TUTTI_ELASTIC_TIMEOUT must be in (0, 86400] seconds"),
    ({"TUTTI_ELASTIC": "yes"}, "init InvalidArgumentError TUTTI_ELASTIC='yes' is not an integer"),
    ({}, "await TimeoutError timeout: the job did not re-form past membership epoch 1 within 300 "
         "ms (is it elastic? TUTTI_ELASTIC=1, tuttirun --min-np)"),
])
def test_elastic_settings_a_user_gets_wrong_are_named_on_every_rank(env, expected):
    command = [os.path.join(BUILD, "tuttirun"), "-np", "2", sys.executable, WORKER, "user_errors"]
    result = subprocess.run(command, env=job_env(env), capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for r in (0, 1):
        assert lines_of(result, r) == [expected], result.stdout


def test_a_rank_that_initializes_again_joins_the_running_job_as_an_added_rank():
    result = tuttirun(2, "rejoin", flags=("--min-np", "1"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert fields(result, 0, "alone") == [["1"]]
    assert fields(result, 0, "waiting") == [["1"]]
    # Epoch 2: rank 1 left; epoch 3: it came back, numbered after rank 0, and both reduce.
    assert fields(result, 0, "grown") == [["0", "2", "3", "3"]]
    assert fields(result, 1, "grown") == [["1", "2", "3", "3"]]


@pytest.mark.parametrize("case,flags,expected", [
    ("max", ("--max-np", "2"),
     "refused LimitExceededError limit exceeded: elastic job '{job}' has 2 ranks and 0 waiting "
     "to join, its maximum is 2 (TUTTI_MAX_SIZE, tuttirun --max-np)"),
    ("static", (),
     "refused UnsupportedError unsupported: rank 2 joins the running elastic job '{job}' with "
     "static process sets; an added rank starts in the world set only (add sets with "
     "tutti_process_set_add, e.g. in a reset callback)"),
    ("timeout", (),
     "refused TimeoutError timeout: could not join the running elastic job '{job}' within 1500 "
     "ms: ranks [0, 1] never reached a boundary (a commit of their elastic state)"),
])
def test_a_rank_that_cannot_join_is_told_why_and_the_ranks_stop_waiting(case, flags, expected):
    result = tuttirun(2, "join_errors", case, flags=("--min-np", "1", "--job", "joinerrors") + flags)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert lines_of(result, 0) == [expected.format(job="joinerrors"), "waiting 0"]


def replay_runs(runs):
    """The weights the `hosts` scenario should end with, from rank 0's "runs" line: each step
    averages w - targets over the ranks of its world, then w -= 0.5 * that."""
    w = [0.0] * 4
    step = 0
    for run in runs:
        n, count = (int(x) for x in run.split("x"))
        for _ in range(count):
            grad = [sum(w[i] - (step * 10 + r + i) for r in range(n)) / n for i in range(4)]
            w = [w[i] - 0.5 * grad[i] for i in range(4)]
            step += 1
    return w


def discovery_run(tmp_path, hosts, action, at_step, target, hold_s=0, flags=()):
    hosts_file = tmp_path / "hosts"
    hosts_file.write_text("".join(line + "\n" for line in hosts))
    command = [os.path.join(BUILD, "tuttirun"), "--min-np", "2",
               "--host-discovery-script", f"cat {hosts_file}", *flags, sys.executable, WORKER,
               "hosts", str(hosts_file), action, str(at_step), str(target), str(hold_s)]
    result = subprocess.run(command, env=job_env(), capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    runs = fields(result, 0, "runs")
    assert len(runs) == 1, result.stdout[-3000:]
    return result, runs[0]


def finals(result, ranks):
    out = {}
    for r in ranks:
        final = fields(result, r, "final")
        assert len(final) == 1, result.stdout[-3000:]
        out[r] = [float(x) for x in final[0][1:]]
    return out


def test_scale_up_a_host_the_discovery_script_adds_joins_at_a_commit(tmp_path):
    # Two slots on this host, at most three ranks: of the new host's two slots one is used.
    result, runs = discovery_run(tmp_path, ["127.0.0.1:2"], "add:127.0.0.2:2", 2, 3,
                                 flags=("--max-np", "3"))
    # Trained with 2 ranks until the new one was admitted at a commit, then with 3: nothing was
    # rolled back (the commit that admitted it is where everyone resumed).
    assert [r.split("x")[0] for r in runs] == ["2", "3"], runs
    grown_at = runs[0].split("x")[1]
    for r in (0, 1):
        assert fields(result, r, "attempt") == [["1", "0", "2", str(r)], ["2", grown_at, "3", str(r)]]
    assert fields(result, 2, "attempt") == [["2", grown_at, "3", "2"]]
    assert not lines_of(result, 3), "--max-np 3 was passed"
    weights = finals(result, (0, 1, 2))
    assert weights[0] == weights[1] == weights[2]
    assert weights[0] == pytest.approx(replay_runs(runs), rel=1e-9)


def test_scale_down_ranks_of_a_host_the_script_drops_are_stopped_and_the_rest_go_on(tmp_path):
    result, runs = discovery_run(tmp_path, ["127.0.0.1:2", "127.0.0.2:1"], "remove:127.0.0.2", 2, 2)
    assert "host '127.0.0.2' is no longer listed by the discovery script; stopping rank 2" in result.stderr
    assert "rank 2 stopped (its host went away)" in result.stderr
    assert [r.split("x")[0] for r in runs] == ["3", "2"], runs
    weights = finals(result, (0, 1))
    assert weights[0] == weights[1]
    assert weights[0] == pytest.approx(replay_runs(runs), rel=1e-9)


def test_a_host_whose_rank_failed_is_blacklisted_for_the_rest_of_the_job(tmp_path):
    # Rank 0 holds the job for 3 s at 2 ranks: long enough for tuttirun to have refilled the
    # failed host's slot (it runs the script every second) were it not blacklisted.
    result, runs = discovery_run(tmp_path, ["127.0.0.1:2", "127.0.0.2:1"], "fail:127.0.0.2", 2, 2,
                                 hold_s=3)
    assert ("host '127.0.0.2' is blacklisted for the rest of the job (--blacklist-cooldown-range "
            "gives it a cool-down)") in result.stderr
    assert not lines_of(result, 3), result.stdout[-3000:]
    assert [r.split("x")[0] for r in runs] == ["3", "2"], runs
    weights = finals(result, (0, 1))
    assert weights[0] == weights[1] == pytest.approx(replay_runs(runs), rel=1e-9)


def test_a_blacklisted_host_gets_ranks_again_after_its_cool_down(tmp_path):
    result, runs = discovery_run(tmp_path, ["127.0.0.1:2", "127.0.0.2:1"], "fail:127.0.0.2", 2, 3,
                                 flags=("--blacklist-cooldown-range", "1", "1"))
    assert "host '127.0.0.2' is blacklisted for 1 s" in result.stderr
    assert [r.split("x")[0] for r in runs] == ["3", "2", "3"], runs
    weights = finals(result, (0, 1, 3))  # rank 3: started for the host once it was usable again
    assert weights[0] == weights[1] == weights[3] == pytest.approx(replay_runs(runs), rel=1e-9)


def test_below_the_minimum_a_rank_started_for_another_host_brings_the_job_back(tmp_path):
    # --min-np 2 of 2: the kill leaves rank 0 alone, below the minimum, its sets broken. tuttirun
    # blacklists the killed rank's host and starts a rank for the third host; tuttid admits it
    # while rank 0 waits, and both resume from the last commit.
    result, runs = discovery_run(tmp_path, ["127.0.0.1:1", "127.0.0.2:1", "127.0.0.3:1"],
                                 "kill:127.0.0.2", 2, 2, flags=("--max-np", "2"))
    assert "tuttirun: rank 1 was killed by signal 9" in result.stderr
    assert "host '127.0.0.2' is blacklisted" in result.stderr
    assert fields(result, 0, "attempt") == [["1", "0", "2", "0"], ["2", "2", "2", "0"]]
    assert fields(result, 2, "attempt") == [["2", "2", "2", "1"]]
    weights = finals(result, (0, 2))
    assert weights[0] == weights[2] == pytest.approx(replay_runs(runs), rel=1e-9)


@pytest.mark.parametrize("commits", ["all", "rank0"])
def test_ranks_whose_states_commit_in_different_sets_still_admit_a_rank(commits):
    # Each rank's state is bound to its own set, and a world allreduce runs every step. With
    # "rank0", rank 1 never commits: rank 0 waits at its boundary while rank 1 announces the
    # next world allreduce, so tuttid admits at once and rank 1 restores (once).
    result = tuttirun(2, "split", commits, flags=("--min-np", "1"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # Rank 0's lines include its child's, the added rank's.
    assert fields(result, 0, "split") == [["3", "3.0"], ["3", "3.0"]], result.stdout[-3000:]
    assert fields(result, 1, "split") == [["3", "3.0"]], result.stdout[-3000:]
    if commits == "rank0":
        assert fields(result, 1, "restored") == [["1"]]


def test_once_a_rank_finished_no_rank_is_started_for_its_slot(tmp_path):
    # Rank 0 exits 0 at once, rank 1 after 2.5 s: tuttirun runs the discovery script meanwhile
    # and sees a free slot, but the job is finishing, so nothing is started there.
    script = ("import os, time; r = os.environ['TUTTI_RANK']; "
              "time.sleep(0 if r == '0' else 2.5); print('done', r)")
    result = subprocess.run([os.path.join(BUILD, "tuttirun"), "--min-np", "1",
                             "--host-discovery-script", "echo 127.0.0.1:2", sys.executable, "-c",
                             script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert lines_of(result, 0) == ["done 0"] and lines_of(result, 1) == ["done 1"]
    assert not lines_of(result, 2), result.stdout
