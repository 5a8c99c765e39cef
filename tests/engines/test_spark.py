"""tutti.spark against real PySpark in local-cluster mode: separate executor JVMs and Python
workers (spark_util.MASTER), one session for the module. Covers identity and results, output,
environment, process sets (the two seed scenarios), data, start timeout, and failures: a raising
rank, a killed Python worker, a killed executor JVM (last: it costs an executor)."""
import importlib.util
import io
import os
import re
import signal
import subprocess
import sys
import time

import pytest

import spark_util
from conftest import ROOT, engine_missing

tutti_spark = None  # imported once the fixture knows pyspark is there


@pytest.fixture(scope="module")
def spark():
    session = spark_util.start_session(engine_missing)
    global tutti_spark
    import tutti.spark as tutti_spark
    from pyspark import cloudpickle
    # fn and its helpers are shipped by value: the executors cannot import the test modules.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cloudpickle.register_pickle_by_value(spark_util)
    yield session
    spark_util.stop_session(session)


def assert_nothing_left(session, lock_paths=()):
    assert spark_util.child_tuttids() == []
    assert spark_util.active_stages(session) == []
    for path in lock_paths:
        assert spark_util.wait_until_released(path, 20), f"fn still runs: {path}"


# ---- fns: run on the executors -------------------------------------------------------------------
def identity():
    import numpy as np
    import tutti
    tutti.init()
    total = tutti.allreduce(np.array([tutti.rank() + 1], np.int64))
    return {"rank": tutti.rank(), "size": tutti.size(), "total": int(total[0]),
            "job": os.environ["TUTTI_JOB"], "token": os.environ["TUTTI_TOKEN"],
            "python": sys.executable, "custom": os.environ.get("SPARK_TEST_SETTING")}


def leftovers():
    return os.environ.get("SPARK_TEST_SETTING"), sys.stdout.__class__.__name__


def chatty(word):
    print(f"{word} out")
    print(f"{word} err", file=sys.stderr)
    sys.stdout.write("no newline")
    return word


def raise_on_rank_one(lock_dir):
    import numpy as np
    import tutti
    tutti.init()
    held = spark_util.hold_while_running(os.path.join(lock_dir, f"rank{tutti.rank()}"))
    if tutti.rank() == 1:
        raise ValueError("bad batch 7")
    while held:
        tutti.allreduce(np.ones(1024, np.float32))


def kill_on_rank_one(lock_dir, what):
    import numpy as np
    import tutti
    tutti.init()
    held = spark_util.hold_while_running(os.path.join(lock_dir, f"rank{tutti.rank()}"))
    tutti.barrier()
    if tutti.rank() == 1:
        if what == "worker":
            os.kill(os.getpid(), signal.SIGKILL)
        pid = os.getpid()  # up to the executor JVM: worker -> pyspark daemon -> executor
        while pid > 1:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"CoarseGrainedExecutorBackend" in f.read():
                    os.kill(pid, signal.SIGKILL)
                    while True:
                        signal.pause()  # until the executor's end ends this worker too
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        raise AssertionError("no executor JVM above this Python worker")
    while held:
        tutti.allreduce(np.ones(1024, np.float32))


def hparam_search(lrs, steps):
    """One dynamic process set per learning rate; rank r tries lrs[r % len(lrs)]."""
    import torch
    import tutti.torch as hvd
    hvd.init()
    torch.set_num_threads(1)
    sets = [hvd.add_process_set([r for r in range(hvd.size()) if r % len(lrs) == i])
            for i in range(len(lrs))]
    choice = hvd.rank() % len(lrs)
    mine = sets[choice]
    torch.manual_seed(hvd.rank())
    x = torch.randn(64, 3)
    y = x @ torch.tensor([[1.0], [2.0], [-1.0]])
    model = torch.nn.Linear(3, 1)
    hvd.broadcast_parameters(model.state_dict(), root_rank=mine.ranks[0], process_set=mine)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=lrs[choice]),
                                         named_parameters=model.named_parameters(),
                                         process_set=mine)
    for _ in range(steps):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    return {"lr": lrs[choice], "members": mine.ranks, "weight": model.weight.flatten().tolist()}


def count_rows():
    import numpy as np
    import tutti
    import tutti.spark
    tutti.init()
    ids = [row.id for row in tutti.spark.partition()]
    total = tutti.allreduce(np.array([len(ids)], np.int64))
    return sorted(ids), int(total[0])


def elastic_training(steps, lock_dir):
    """hvd.elastic.run over an ObjectState that records the job's size at every step. The first
    attempt of rank 2 kills its own Python worker at step 4; the survivors go on, and Spark's
    retry of the task joins as an added rank. Training runs `steps` steps, and on (paced) until
    the job has its three ranks again."""
    import torch
    import tutti
    import tutti.torch as hvd
    from pyspark import TaskContext
    attempt = TaskContext.get().attemptNumber()
    held = spark_util.hold_while_running(os.path.join(lock_dir, f"rank{os.environ['TUTTI_RANK']}"
                                                                f"-{attempt}"))
    hvd.init()
    state = hvd.elastic.ObjectState(step=0, total=0.0, sizes=[3])  # [the size before step 0]
    deadline = time.monotonic() + 120  # the test fails on the sizes rather than hang

    @hvd.elastic.run
    def train(state):
        # Every decision comes from the state, which the members agree on: hvd.size() read
        # after the last step could already count a rank that returned first and left.
        while ((state.step < steps or state.sizes[-1] < 3) and
               time.monotonic() < deadline):
            if os.environ["TUTTI_RANK"] == "2" and attempt == 0 and state.step == 4:
                os.kill(os.getpid(), signal.SIGKILL)
            # Nobody leaves before this step's allreduce, which needs this rank: stable.
            seen = hvd.rank(), tutti.membership_epoch()
            size = int(hvd.allreduce(torch.ones(1), op=hvd.Sum).item())
            state.total += size
            state.sizes = state.sizes + [size]
            state.step += 1
            state.commit()
            if size < 3:
                time.sleep(0.01)  # pace the two survivors while Spark starts the third again
        return seen

    rank, epoch = train(state)
    del held
    return {"attempt": attempt, "rank": rank, "size": state.sizes[-1], "total": state.total,
            "sizes": state.sizes[1:], "epoch": epoch}


def raise_on_rank_one_every_attempt(lock_dir):
    """Rank 1 raises on every attempt; the others train (elastic) until the run is cancelled."""
    import torch
    import tutti.torch as hvd
    from pyspark import TaskContext
    attempt = TaskContext.get().attemptNumber()
    rank = os.environ["TUTTI_RANK"]
    held = spark_util.hold_while_running(os.path.join(lock_dir, f"rank{rank}-{attempt}"))
    hvd.init()
    if rank == "1":
        raise ValueError(f"bad batch (attempt {attempt})")
    state = hvd.elastic.ObjectState(step=0)
    deadline = time.monotonic() + 120  # the run is cancelled long before

    @hvd.elastic.run
    def train(state):
        while held and time.monotonic() < deadline:
            hvd.allreduce(torch.ones(1))
            state.step += 1
            state.commit()
            time.sleep(0.01)

    train(state)


# ---- tests --------------------------------------------------------------------------------------
def test_import_without_pyspark_says_what_to_install():
    python = "/usr/bin/python3"
    if not os.access(python, os.X_OK) or subprocess.run(
            [python, "-c", "import pyspark"], capture_output=True).returncode == 0:
        pytest.skip(f"needs a Python without pyspark at {python}")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    result = subprocess.run([python, "-c", "import tutti.spark"], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == (
        "ImportError: tutti.spark needs PySpark, which is not installed in this Python: "
        "pip install 'tutti[spark]' (or pip install pyspark)")


def test_ranks_get_their_identity_and_results_come_back_by_rank(spark):
    results = tutti_spark.run(identity, num_proc=3, verbose=0,
                              env={"SPARK_TEST_SETTING": "on"})
    assert [r["rank"] for r in results] == [0, 1, 2]
    assert {(r["size"], r["total"], r["custom"]) for r in results} == {(3, 6, "on")}
    jobs = {r["job"] for r in results}
    assert len(jobs) == 1
    app = re.escape(spark.sparkContext.applicationId)
    assert re.fullmatch(rf"spark-{app}-[0-9a-f]{{8}}-stage\d+-task\d+", jobs.pop())
    assert len({r["token"] for r in results}) == 1 and len(results[0]["token"]) == 64
    assert {r["python"] for r in results} == {sys.executable}  # PYSPARK_PYTHON was unset
    assert_nothing_left(spark)
    # The Python workers are reused: nothing of the last run's env= stays in them.
    assert tutti_spark.run(leftovers, num_proc=3, verbose=0) == [(None, "ForwardedStream")] * 3
    # Another run is another job, with another token, in a fresh runtime.
    again = tutti_spark.run(identity, num_proc=2, verbose=0)
    assert again[0]["job"] != results[0]["job"] and again[0]["token"] != results[0]["token"]
    assert [r["size"] for r in again] == [2, 2]


def test_output_reaches_the_given_streams_rank_by_rank(spark):
    out, err = io.StringIO(), io.StringIO()
    assert tutti_spark.run(chatty, args=("hi",), num_proc=2, stdout=out, stderr=err,
                           verbose=0) == ["hi", "hi"]
    assert sorted(out.getvalue().splitlines()) == [
        "[0]<stdout>:hi out", "[0]<stdout>:no newline", "[1]<stdout>:hi out",
        "[1]<stdout>:no newline"]
    assert sorted(err.getvalue().splitlines()) == ["[0]<stderr>:hi err", "[1]<stderr>:hi err"]


def test_verbose_says_what_the_driver_does(spark):
    said = {}
    for verbose in (1, 2):
        err = io.StringIO()
        tutti_spark.run(chatty, args=("v",), num_proc=2, stdout=io.StringIO(), stderr=err,
                        verbose=verbose)
        said[verbose] = [line for line in err.getvalue().splitlines()
                         if line.startswith("tutti.spark: ")]
    for lines in said.values():
        assert lines[0].startswith("tutti.spark: running 2 ranks as a barrier stage; "
                                   "coordinator tcp://127.0.0.1:")
        assert lines[0].endswith(" (started here), job spark-"
                                 f"{spark.sparkContext.applicationId}-"
                                 f"{lines[0].rsplit('-', 2)[-2]}-...")
        assert re.fullmatch(r"tutti\.spark: 2 ranks finished in \d+\.\d s", lines[-1])
    assert len(said[1]) == 2
    started = sorted(line.split(":")[1] for line in said[2][1:-1])
    assert started == [" rank 0 started", " rank 1 started"]


def test_a_raising_rank_fails_the_run_with_its_traceback(spark, tmp_path):
    began = time.monotonic()
    with pytest.raises(tutti_spark.RankFailedError) as caught:
        tutti_spark.run(raise_on_rank_one, args=(str(tmp_path),), num_proc=2, verbose=0)
    elapsed = time.monotonic() - began
    error = caught.value
    assert (error.rank, error.exception_type, error.exception_message) == (
        1, "ValueError", "bad batch 7")
    assert isinstance(error.exception, ValueError)
    assert str(error).startswith("rank 1 failed: ValueError: bad batch 7")
    assert 'raise ValueError("bad batch 7")' in error.remote_traceback
    assert "in raise_on_rank_one" in error.remote_traceback
    assert elapsed < 30, elapsed
    assert_nothing_left(spark, [tmp_path / "rank0", tmp_path / "rank1"])


def test_too_few_slots_fail_after_start_timeout(spark):
    with pytest.raises(tutti_spark.StartTimeoutError) as caught:
        tutti_spark.run(identity, num_proc=5, start_timeout=1, verbose=0)
    assert str(caught.value) == (
        "tutti.spark.run: num_proc=5 needs 5 task slots at once (one barrier stage), but the "
        "Spark cluster had 4 within start_timeout=1 s; add executors or cores, lower num_proc, "
        "or raise start_timeout (TUTTI_SPARK_START_TIMEOUT)")
    assert_nothing_left(spark)


def test_wrong_arguments_are_refused(spark):
    with pytest.raises(ValueError, match=r"^tutti.spark.run: num_proc must be a positive int, "
                                         r"not 0$"):
        tutti_spark.run(identity, num_proc=0)
    with pytest.raises(RuntimeError, match=r"^tutti.spark.partition\(\) is for fn while "
                                           r"tutti.spark.run runs it on an executor$"):
        tutti_spark.partition()


def test_each_rank_reads_its_partition_of_the_data(spark):
    frame = spark.range(100)  # one column, id
    results = tutti_spark.run(count_rows, num_proc=2, data=frame, verbose=0)
    assert [total for _, total in results] == [100, 100]
    first, second = results[0][0], results[1][0]
    assert first and second and not set(first) & set(second)
    assert sorted(first + second) == list(range(100))


def test_hyperparameter_search_one_dynamic_set_per_configuration(spark):
    results = tutti_spark.run(hparam_search, args=([0.05, 0.2], 20), num_proc=3, verbose=0)
    assert [r["members"] for r in results] == [[0, 2], [1], [0, 2]]
    assert [r["lr"] for r in results] == [0.05, 0.2, 0.05]
    assert results[0]["weight"] == results[2]["weight"]  # one set trains one model
    assert results[0]["weight"] != results[1]["weight"]


def test_the_two_models_example_trains_two_sets_on_a_data_frame(spark, capsys):
    path = os.path.join(ROOT, "examples", "python", "spark_two_models.py")
    spec = importlib.util.spec_from_file_location("spark_two_models", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)  # not in sys.modules: cloudpickle ships train by value
    results = example.main(spark, num_proc=3, epochs=4, lrs=(0.01, 0.1))
    assert [r["set"] for r in results] == ["even", "odd", "even"]
    assert results[0]["weight"] == results[2]["weight"]
    assert results[1]["loss"] < 0.05  # lr 0.1 fits y = x . w in 4 epochs
    printed = capsys.readouterr().out
    assert "[1]<stdout>:odd set, lr 0.1: epoch 4 loss" in printed
    assert "rank 2: even set, lr 0.01, final loss" in printed


# ---- elastic ------------------------------------------------------------------------------------
def test_run_elastic_replaces_a_killed_rank_with_sparks_retry_and_the_job_goes_on(spark,
                                                                                  tmp_path):
    err = io.StringIO()
    results = tutti_spark.run_elastic(elastic_training, args=(12, str(tmp_path)), num_proc=3,
                                      min_num_proc=2, stdout=io.StringIO(), stderr=err,
                                      verbose=2)
    print(err.getvalue())  # shown if the test fails
    assert [r["attempt"] for r in results] == [0, 0, 1]
    # The replacement numbers after the survivors, and every rank saw the same history: 4 steps
    # of 3 ranks, some of 2, then 3 again to the end.
    assert [r["rank"] for r in results] == [0, 1, 2]
    sizes = results[0]["sizes"]
    assert all(r["sizes"] == sizes and r["total"] == sum(sizes) for r in results)
    twos = sizes.count(2)
    assert twos >= 1 and len(sizes) >= 12
    assert sizes == [3] * 4 + [2] * twos + [3] * (len(sizes) - 4 - twos)
    assert {r["size"] for r in results} == {3}
    assert {r["epoch"] for r in results} == {3}  # lost (2), then added (3)
    said = [line for line in err.getvalue().splitlines() if line.startswith("tutti.spark: ")]
    assert said[0].startswith("tutti.spark: running 3 ranks (elastic, 2 to 3) as a stage of 3 "
                              "tasks; coordinator tcp://127.0.0.1:")
    assert any(line.startswith("tutti.spark: rank 2 (attempt 1) joins as added rank: pid ")
               for line in said)
    assert re.fullmatch(r"tutti\.spark: 3 ranks finished in \d+\.\d s after 1 rank failures",
                        said[-1])
    assert_nothing_left(spark, sorted(tmp_path.iterdir()))


def test_run_elastic_fails_once_failures_pass_the_reset_limit(spark, tmp_path):
    began = time.monotonic()
    with pytest.raises(tutti_spark.RankFailedError) as caught:
        tutti_spark.run_elastic(raise_on_rank_one_every_attempt, args=(str(tmp_path),),
                                num_proc=3, min_num_proc=2, reset_limit=1, verbose=0)
    error = caught.value
    assert (error.rank, error.exception_type, error.exception_message) == (
        1, "ValueError", "bad batch (attempt 1)")
    assert error.note == "2 rank failures, more than reset_limit=1"
    assert str(error).startswith("rank 1 failed: ValueError: bad batch (attempt 1); 2 rank "
                                 "failures, more than reset_limit=1\n\nRemote traceback (rank 1):")
    assert 'raise ValueError(f"bad batch (attempt {attempt})")' in error.remote_traceback
    assert error.others == {}
    assert time.monotonic() - began < 60
    assert_nothing_left(spark, sorted(tmp_path.iterdir()))


def test_run_elastic_refuses_wrong_arguments(spark):
    run_elastic = tutti_spark.run_elastic
    with pytest.raises(ValueError, match=r"^tutti.spark.run_elastic: num_proc \(3\) must lie "
                                         r"within min_num_proc \(4\) and max_num_proc \(3\)$"):
        run_elastic(identity, num_proc=3, min_num_proc=4)
    with pytest.raises(ValueError, match=r"^tutti.spark.run_elastic: min_num_proc=1 and min_np=2 "
                                         r"disagree; give min_num_proc only$"):
        run_elastic(identity, num_proc=3, min_num_proc=1, min_np=2)
    with pytest.raises(ValueError, match=r"^tutti.spark.run_elastic: max_num_proc must be a "
                                         r"positive int, not 0$"):
        run_elastic(identity, num_proc=3, max_np=0)
    with pytest.raises(ValueError, match=r"^tutti.spark.run_elastic: reset_limit must be an int "
                                         r">= 0, not -1$"):
        run_elastic(identity, num_proc=3, reset_limit=-1)
    with pytest.raises(ValueError, match=r"^tutti.spark.run_elastic: env may not set "
                                         r"TUTTI_MIN_SIZE: run_elastic sets the job's elastic "
                                         r"settings from its arguments$"):
        run_elastic(identity, num_proc=3, env={"TUTTI_MIN_SIZE": 1})
    with pytest.raises(tutti_spark.StartTimeoutError, match=(
            r"^tutti.spark.run_elastic: num_proc=5 needs 5 task slots at once, but the Spark "
            r"cluster had 4 within start_timeout=1 s; ")):
        run_elastic(identity, num_proc=5, start_timeout=1, verbose=0)
    assert_nothing_left(spark)


@pytest.mark.parametrize("what", ["worker", "executor"])
def test_a_killed_rank_fails_the_run_and_leaves_nothing(spark, tmp_path, what):
    # Killing an executor costs the cluster its slots until Spark relaunches it.
    assert spark_util.wait_for_slots(spark, spark_util.SLOTS, 120)
    began = time.monotonic()
    with pytest.raises(tutti_spark.RankLostError) as caught:
        tutti_spark.run(kill_on_rank_one, args=(str(tmp_path), what), num_proc=2, verbose=0)
    elapsed = time.monotonic() - began
    error = caught.value
    if what == "worker":
        assert error.rank == 1
    assert str(error).startswith(f"rank {error.rank} was lost: its Spark task's Python process "
                                 f"ended without a result or an exception")
    assert elapsed < 30, elapsed
    assert_nothing_left(spark, [tmp_path / "rank0", tmp_path / "rank1"])
