"""tutti.ray against real Ray from PyPI, on a local Ray cluster this module starts (4 logical
CPUs on a 2-core machine) and stops. The executors' actors are real Ray worker processes; the
functions they run are this module's, pickled by value (the actors cannot import the tests)."""
import concurrent.futures
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import ROOT, engine_missing

try:
    import ray
    import ray.cloudpickle
    from ray.util.queue import Queue
except ImportError as e:  # noqa: F841 (named for the skip's reason)
    ray = None
    _missing = str(e)

if ray is not None:
    import ray_util
    import tutti
    import tutti.ray as tray


@pytest.fixture(scope="module", autouse=True)
def cluster():
    if ray is None:
        engine_missing(f"ray is not installed ({_missing}): pip install tutti[ray]")
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=True)
    yield
    ray.shutdown()


@pytest.fixture
def executor():
    """A 2-rank executor, started; shut down after the test, which must leave nothing."""
    made = tray.RayExecutor(tray.RayExecutor.create_settings(timeout_s=60), num_workers=2)
    made.start()
    yield made
    made.shutdown()
    assert ray_util.alive_actors() == {}
    assert ray_util.children_named("tuttid") == []


def assert_cleaned_up(executor, group, tuttid_pid, pids):
    """Everything one executor made is gone: actors (by Ray and as processes), its placement
    group and its tuttid (reaped: not even a zombie)."""
    assert executor.workers == [] and executor.coordinator is None
    assert ray_util.alive_actors() == {}
    assert ray_util.placement_group_state(group) == "REMOVED"
    assert not ray_util.process_exists(tuttid_pid)
    assert ray_util.children_named("tuttid") == []
    assert ray_util.wait_processes_gone(pids) == []


# ---- functions the ranks run ------------------------------------------------------------------
def identity():
    import tutti
    tutti.init()
    total = tutti.allreduce(np.full(4, tutti.rank() + 1, np.float32))
    return {"rank": tutti.rank(), "size": tutti.size(), "local_rank": tutti.local_rank(),
            "local_size": tutti.local_size(), "sum": total.tolist(),
            "env": {k: v for k, v in os.environ.items()
                    if k.startswith(("TUTTI_", "HOROVOD_", "MY_", "OMP_NUM_THREADS"))},
            "pid": os.getpid(),
            "transport": tutti.peer_stats(1 - tutti.rank())["transport"]}


def allreduce_sum(value):
    import tutti
    tutti.init()
    return tutti.allreduce(np.array([value], np.float64)).item()


def raise_on_rank_1(message):
    import tutti
    tutti.init()
    if tutti.rank() == 1:
        raise ValueError(message)
    tutti.allreduce(np.ones(4, np.float32))  # rank 0 waits here for rank 1, which aborted
    return "unreachable"


def raise_before_init_on_rank_1():
    import tutti
    if int(os.environ["TUTTI_RANK"]) == 1:
        raise KeyError("no such column")
    tutti.init()  # rank 0 waits for rank 1 in the rendezvous until it is stopped
    return "unreachable"


def allreduce_until_a_peer_dies(queue):
    """Every rank allreduces until one dies; rank 1 first tells the driver its pid."""
    import tutti
    tutti.init()
    tutti.allreduce(np.ones(1024, np.float32))
    if tutti.rank() == 1:
        queue.put(os.getpid())
    while True:
        tutti.allreduce(np.ones(1024, np.float32))


class Trainer:
    """An executable_cls: built once per actor by start()."""

    def __init__(self, scale, offset=0):
        self.scale, self.offset = scale, offset
        self.calls = 0

    def step(self):
        import tutti
        tutti.init()
        self.calls += 1
        mine = self.scale * (tutti.rank() + 1) + self.offset
        return tutti.allreduce(np.array([mine], np.float64)).item(), self.calls


# ---- start, identity, results -----------------------------------------------------------------
def test_import_without_ray_says_what_to_install():
    """Debian's python3 has no ray: importing tutti.ray names what to install."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    result = subprocess.run(["/usr/bin/python3", "-c", "import tutti.ray"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "ImportError: tutti.ray needs Ray: pip install tutti[ray] (or pip install ray); "
        "importing it failed: No module named 'ray'")


def test_run_gives_results_by_rank_with_each_ranks_identity(executor):
    first = executor.run(identity)
    assert [r["rank"] for r in first] == [0, 1]
    for rank, result in enumerate(first):
        assert result["size"] == 2 and result["sum"] == [3.0] * 4
        # One Ray node is one host: tutti's local ranks, and horovodrun's variables, say so.
        assert (result["local_rank"], result["local_size"]) == (rank, 2)
        env = result["env"]
        assert env["TUTTI_RANK"] == env["HOROVOD_RANK"] == str(rank)
        assert env["TUTTI_SIZE"] == env["HOROVOD_SIZE"] == "2"
        assert (env["HOROVOD_LOCAL_RANK"], env["HOROVOD_LOCAL_SIZE"]) == (str(rank), "2")
        assert (env["HOROVOD_CROSS_RANK"], env["HOROVOD_CROSS_SIZE"]) == ("0", "1")
        assert re.fullmatch(r"tcp://127\.0\.0\.1:\d+", env["TUTTI_COORDINATOR"])
        assert env["TUTTI_JOB"].startswith("ray-") and re.fullmatch(r"[0-9a-f]{32}",
                                                                     env["TUTTI_TOKEN"])
        assert env["TUTTI_TIMEOUT_MS"] == "60000"  # create_settings(timeout_s=60)
        # The test's environment reached the actors (the raylet inherits the driver's).
        assert env["TUTTI_LIBRARY"] == os.environ["TUTTI_LIBRARY"]
        assert result["transport"] == "shm"
    assert first[0]["env"]["TUTTI_TOKEN"] == first[1]["env"]["TUTTI_TOKEN"]
    # One actor per rank, for the executor's life: a second run lands in the same processes.
    second = executor.run(identity)
    assert [r["pid"] for r in second] == [r["pid"] for r in first] == executor.worker_pids()
    assert len(set(executor.worker_pids())) == 2
    # args and kwargs
    assert executor.run(allreduce_sum, args=[2.5]) == [5.0, 5.0]
    assert executor.run(allreduce_sum, kwargs={"value": 1.0}) == [2.0, 2.0]
    # run_remote: one ObjectRef per rank, by rank
    refs = executor.run_remote(allreduce_sum, args=[4.0])
    assert len(refs) == 2 and all(isinstance(r, ray.ObjectRef) for r in refs)
    assert ray.get(refs) == [8.0, 8.0]
    # execute / execute_single: fn(executable), None without executable_cls
    assert executor.execute(lambda executable: executable) == [None, None]
    assert executor.execute_single(lambda executable: os.environ["TUTTI_RANK"]) == "0"


def test_each_start_is_a_new_job_with_a_new_token():
    made = tray.RayExecutor(num_workers=2)
    seen = []
    for _ in range(2):
        made.start()
        env = made.run(identity)[0]["env"]
        seen.append((env["TUTTI_JOB"], env["TUTTI_TOKEN"]))
        made.shutdown()
    assert seen[0][0] != seen[1][0] and seen[0][1] != seen[1][1]
    assert ray_util.alive_actors() == {}


def test_executable_cls_extra_env_vars_and_cpus_per_worker():
    made = tray.RayExecutor(num_workers=2, cpus_per_worker=2)
    made.start(executable_cls=Trainer, executable_args=[10], executable_kwargs={"offset": 1},
               extra_env_vars={"MY_SETTING": "on", "TUTTI_TRANSPORT": "tcp"})
    try:
        # Two workers of 2 CPUs take the whole 4-CPU cluster.
        assert ray.available_resources().get("CPU", 0) == 0
        assert made.placement_group.bundle_specs == [{"CPU": 2}, {"CPU": 2}]
        assert made.execute(lambda trainer: trainer.step()) == [(32.0, 1), (32.0, 1)]
        # Rank 0's executable alone: built with the given args, called once above.
        assert made.execute_single(lambda t: (t.scale, t.offset, t.calls)) == (10, 1, 1)
        results = made.run(identity)
        for result in results:
            assert result["env"]["MY_SETTING"] == "on"
            assert result["env"]["OMP_NUM_THREADS"] == "2"  # Ray's, from num_cpus
            assert result["transport"] == "tcp"  # TUTTI_TRANSPORT reached tutti.init
    finally:
        made.shutdown()
    assert ray_util.wait_cpus_available(4)


def test_a_named_coordinator_is_used_and_not_started(monkeypatch):
    tuttid = subprocess.Popen([os.environ["TUTTI_TUTTID"], "--bind", "tcp://127.0.0.1:*",
                               "--log-level", "warn"], stdout=subprocess.PIPE, text=True)
    try:
        endpoint = tuttid.stdout.readline().strip().rsplit(" ", 1)[1]
        monkeypatch.setenv("TUTTI_COORDINATOR", endpoint)
        made = tray.RayExecutor(num_workers=2)
        made.start()
        try:
            assert made.coordinator.pid is None
            assert ray_util.children_named("tuttid") == [tuttid.pid]
            results = made.run(identity)
            assert [r["env"]["TUTTI_COORDINATOR"] for r in results] == [endpoint] * 2
            assert results[0]["sum"] == [3.0] * 4
        finally:
            made.shutdown()
        assert tuttid.poll() is None  # not the executor's to stop
    finally:
        tuttid.terminate()
        tuttid.wait(timeout=30)


# ---- the caller's mistakes ----------------------------------------------------------------------
def test_argument_errors():
    with pytest.raises(ValueError, match=r"^num_workers is required: the number of ranks "
                                         r"\(Ray actors\)$"):
        tray.RayExecutor()
    with pytest.raises(ValueError, match=r"^num_workers must be a positive integer, not 0$"):
        tray.RayExecutor(num_workers=0)
    with pytest.raises(ValueError, match=r"^cpus_per_worker must be a positive number, "
                                         r"not -1$"):
        tray.RayExecutor(num_workers=1, cpus_per_worker=-1)
    with pytest.raises(ValueError, match=r"^gpus_per_worker=1 needs use_gpu=True$"):
        tray.RayExecutor(num_workers=1, gpus_per_worker=1)
    with pytest.raises(TypeError, match=r"^settings must come from "
                                        r"RayExecutor.create_settings\(\), not dict$"):
        tray.RayExecutor({"timeout_s": 5}, num_workers=1)
    with pytest.raises(ValueError, match=r"^timeout_s must be a positive number of seconds, "
                                         r"not 0$"):
        tray.RayExecutor.create_settings(timeout_s=0)
    made = tray.RayExecutor(num_workers=1)
    for call in (lambda: made.run(identity), lambda: made.execute(identity),
                 lambda: made.execute_single(identity), lambda: made.run_remote(identity)):
        with pytest.raises(RuntimeError, match=r"^this RayExecutor is not started: call "
                                               r"start\(\) first$"):
            call()
    with pytest.raises(ValueError, match=r"^extra_env_vars may not set TUTTI_RANK, TUTTI_TOKEN: "
                                         r"start\(\) sets each rank's identity and the job's "
                                         r"settings itself$"):
        made.start(extra_env_vars={"TUTTI_TOKEN": "guess", "TUTTI_RANK": "3"})
    made.start()
    try:
        with pytest.raises(RuntimeError, match=r"^this RayExecutor is started already: "
                                               r"shutdown\(\) it first$"):
            made.start()
    finally:
        made.shutdown()
    made.shutdown()  # twice is fine


@pytest.mark.parametrize("request_kwargs, bundle", [
    ({"num_workers": 3, "cpus_per_worker": 2}, "{'CPU': 2}"),
    ({"num_workers": 1, "use_gpu": True}, "{'CPU': 1, 'GPU': 1}"),
    ({"num_workers": 2, "use_gpu": True, "gpus_per_worker": 2}, "{'CPU': 1, 'GPU': 2}"),
])
def test_a_group_that_cannot_be_placed_times_out_and_leaves_nothing(request_kwargs, bundle):
    """This machine has no GPU and 4 CPUs: all or nothing, so none of these starts any rank."""
    made = tray.RayExecutor(tray.RayExecutor.create_settings(placement_group_timeout_s=1),
                            **request_kwargs)
    began = time.monotonic()
    with pytest.raises(TimeoutError) as caught:
        made.start()
    assert time.monotonic() - began < 30
    n = request_kwargs["num_workers"]
    assert re.match(rf"^Ray could not place the placement group of {n} workers "
                    rf"\({re.escape(bundle)} each\) within 1 s \(placement_group_timeout_s\); available now: ",
                    str(caught.value)), str(caught.value)
    assert made.workers == [] and made.placement_group is None and made.coordinator is None
    assert ray_util.alive_actors() == {} and ray_util.children_named("tuttid") == []
    assert ray_util.wait_cpus_available(4)


# ---- failures -----------------------------------------------------------------------------------
def test_a_rank_that_raises_fails_run_naming_it_and_the_executor_goes_on(executor):
    with pytest.raises(tray.WorkerError) as caught:
        executor.run(raise_on_rank_1, args=["learning rate out of range"])
    error = caught.value
    assert str(error) == ("rank 1 failed: ValueError: learning rate out of range; then ranks [0] "
                          "failed too")
    assert error.rank == 1 and type(error.cause) is ValueError
    assert str(error.cause) == "learning rate out of range"
    # Rank 0 failed because rank 1 aborted its job, not of its own accord.
    assert isinstance(error.failures[0], tutti.AbortedError)
    assert error.stragglers == []
    assert isinstance(error.__cause__, ray.exceptions.RayTaskError)  # the remote traceback
    assert "raise ValueError(message)" in str(error.__cause__)
    # Both ranks left the job: the next run inits again (the job's next generation).
    assert executor.run(allreduce_sum, args=[1.5]) == [3.0, 3.0]


def test_a_rank_that_raises_before_init_fails_run_and_stops_the_stragglers():
    made = tray.RayExecutor(num_workers=2)
    made.start()
    try:
        began = time.monotonic()
        with pytest.raises(tray.WorkerError) as caught:
            made.run(raise_before_init_on_rank_1)
        took = time.monotonic() - began
        assert str(caught.value) == (
            "rank 1 failed: KeyError: 'no such column'; ranks [0] were still running 5 s later "
            "and were stopped")
        assert caught.value.stragglers == [0] and took < 20
        with pytest.raises(RuntimeError, match=r"^this RayExecutor's workers were lost \(rank 1 "
                                               r"failed: KeyError.*call shutdown\(\) and "
                                               r"start\(\) again$"):
            made.run(identity)
    finally:
        made.shutdown()
    assert ray_util.alive_actors() == {}


@pytest.mark.parametrize("how", ["ray.kill", "SIGKILL"])
def test_a_worker_killed_mid_run_fails_run_within_seconds_and_shutdown_cleans_up(how):
    made = tray.RayExecutor(num_workers=2)
    made.start()
    group, tuttid_pid, pids = made.placement_group, made.coordinator.pid, made.worker_pids()
    queue = Queue()
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            running = pool.submit(made.run, allreduce_until_a_peer_dies, [queue])
            pid = queue.get(timeout=60)  # rank 1 is inside its allreduce loop
            assert pid == pids[1]
            began = time.monotonic()
            if how == "ray.kill":
                ray.kill(made.workers[1], no_restart=True)
            else:
                os.kill(pid, signal.SIGKILL)
            with pytest.raises(tray.WorkerError) as caught:
                running.result(timeout=60)
            took = time.monotonic() - began
        assert took < 10, took
        error = caught.value
        assert error.rank == 1 and isinstance(error.cause, ray.exceptions.RayActorError)
        assert str(error).startswith("rank 1: its worker actor died (")
        assert str(error).endswith("; then ranks [0] failed too"), str(error)
        # tutti told rank 0 its peer was lost.
        assert isinstance(error.failures[0], tutti.PeerLostError)
        assert "rank 1" in str(error.failures[0])
        with pytest.raises(RuntimeError, match=r"^this RayExecutor's workers were lost \(rank 1: "
                                               r"its worker actor died"):
            made.run(identity)
    finally:
        made.shutdown()
        ray.kill(queue.actor)
    assert_cleaned_up(made, group, tuttid_pid, pids)


# ---- process sets -------------------------------------------------------------------------------
def train_two_models_side_by_side(epochs):
    """Model A on the static set [0, 1], model B on the dynamic set [1, 2]: rank 1 trains both,
    each with its own DistributedOptimizer averaging over its own set only."""
    import hashlib

    import torch
    import torch.nn.functional as F

    import tutti.torch as hvd
    set_a = hvd.ProcessSet([0, 1])
    hvd.init(process_sets=[set_a])
    set_b = hvd.add_process_set([1, 2])  # collective over every rank, as in Horovod
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(256, 8, generator=g)
    y = (x @ torch.randn(8, 3, generator=g)).argmax(dim=1)
    digests, losses = {}, {}
    trainers = []
    for name, members, lr in (("a", set_a, 0.01), ("b", set_b, 0.2)):
        if not members.included():
            continue
        torch.manual_seed(10 + hvd.rank())  # different per rank until the broadcast
        model = torch.nn.Linear(8, 3)
        hvd.broadcast_parameters(model.state_dict(), root_rank=members.ranks[0],
                                 process_set=members)
        optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=lr),
                                             named_parameters=model.named_parameters(),
                                             process_set=members)
        trainers.append((name, members, model, optimizer))
    for _ in range(epochs):
        for name, members, model, optimizer in trainers:  # interleaved: side by side
            shard = slice(members.rank(), None, members.size())
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x[shard]), y[shard])
            loss.backward()
            optimizer.step()
            losses[name] = hvd.allreduce(loss.detach(), process_set=members).item()
    for name, _, model, _ in trainers:
        flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        digests[name] = hashlib.sha256(flat.numpy().tobytes()).hexdigest()
    ranks = {"a": set_a.ranks, "b": set_b.ranks}
    hvd.shutdown()  # the next run may bring other static sets
    return ranks, digests, losses


def test_two_models_trained_side_by_side_in_two_process_sets():
    made = tray.RayExecutor(num_workers=3)
    made.start()
    try:
        results = made.run(train_two_models_side_by_side, args=[20])
    finally:
        made.shutdown()
    assert [r[0] for r in results] == [{"a": [0, 1], "b": [1, 2]}] * 3
    assert [sorted(r[1]) for r in results] == [["a"], ["a", "b"], ["b"]]
    # A set's members hold the same model, the two sets different ones.
    assert results[0][1]["a"] == results[1][1]["a"]
    assert results[1][1]["b"] == results[2][1]["b"]
    assert results[1][1]["a"] != results[1][1]["b"]
    assert results[0][2]["a"] == results[1][2]["a"] and results[1][2]["b"] == results[2][2]["b"]


def test_the_hparam_search_example_runs_as_documented():
    """examples/python/ray_hparam_search.py: its own local Ray cluster, one set per learning
    rate, two ranks each (docs/ray.md)."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "python", "ray_hparam_search.py"),
         "--epochs", "3"], env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert re.fullmatch(r"lr 0\.002: ranks \[0, 1\] final loss [\d.]+ \(first [\d.]+\)", lines[0])
    assert re.fullmatch(r"lr 0\.05: ranks \[2, 3\] final loss [\d.]+ \(first [\d.]+\)", lines[1])
    assert lines[2].startswith("best: lr ") and lines[3] == "configurations independent"


# ---- elastic ------------------------------------------------------------------------------------
def elastic_training(steps, dying_rank, die_at):
    """hvd.elastic.run over an ObjectState; `dying_rank` kills its own actor process with
    SIGKILL at step `die_at`, after the others committed it; they go on without it."""
    import torch

    import tutti.torch as hvd
    hvd.init()
    state = hvd.elastic.ObjectState(step=0, total=0.0)
    restores = []
    state.register_reset_callbacks([lambda: restores.append(state.step)])

    @hvd.elastic.run
    def train(state):
        while state.step < steps:
            if hvd.rank() == dying_rank and state.step == die_at:
                os.kill(os.getpid(), signal.SIGKILL)
            state.total += hvd.allreduce(torch.ones(1), op=hvd.Sum).item()
            state.step += 1
            state.commit()
        return state.total

    total = train(state)
    return {"total": total, "size": hvd.size(), "epoch": tutti.membership_epoch(),
            "restores": restores}


def training_until_whole_again(steps, dying_rank, die_at):
    """As elastic_training, but on (paced) after `steps` until the job has 3 ranks again, and
    recording the job's size at every step in the state (every rank sees the same history)."""
    import torch

    import tutti.torch as hvd
    hvd.init()
    state = hvd.elastic.ObjectState(step=0, sizes=[3])  # [the size before step 0]
    dying = hvd.rank() == dying_rank  # a replacement joins past die_at: it never dies
    deadline = time.monotonic() + 120  # the test fails on the sizes rather than hang

    @hvd.elastic.run
    def train(state):
        # Decisions come from the state, which the members agree on (see test_spark's twin).
        while ((state.step < steps or state.sizes[-1] < 3) and
               time.monotonic() < deadline):
            if dying and state.step == die_at:
                os.kill(os.getpid(), signal.SIGKILL)
            rank = hvd.rank()
            size = int(hvd.allreduce(torch.ones(1), op=hvd.Sum).item())
            state.sizes = state.sizes + [size]
            state.step += 1
            state.commit()
            if size < 3:
                time.sleep(0.01)  # pace the survivors while the replacement starts
        return rank

    rank = train(state)
    return {"rank": rank, "size": state.sizes[-1], "sizes": state.sizes[1:], "pid": os.getpid()}


def test_elastic_executor_replaces_a_killed_worker_which_joins_the_running_job():
    made = tray.ElasticRayExecutor(min_workers=2, max_workers=3)
    made.start()
    group, tuttid_pid, pids = made.placement_group, made.coordinator.pid, made.worker_pids()
    try:
        results = made.run(training_until_whole_again, args=[12, 2, 4])
        assert made.replaced == [2] and made.lost_ranks == [] and made.live_ranks() == [0, 1, 2]
        assert [r["rank"] for r in results] == [0, 1, 2] and {r["size"] for r in results} == {3}
        sizes = results[0]["sizes"]
        twos = sizes.count(2)
        assert all(r["sizes"] == sizes for r in results) and twos >= 1
        assert sizes == [3] * 4 + [2] * twos + [3] * (len(sizes) - 4 - twos)
        new_pids = made.worker_pids()
        assert new_pids[:2] == pids[:2] and new_pids[2] == results[2]["pid"] != pids[2]
        # The replacement is a rank like the others for later calls.
        assert made.run(allreduce_sum, args=[1.0]) == [3.0, 3.0, 3.0]
    finally:
        made.shutdown()
    assert_cleaned_up(made, group, tuttid_pid, pids + [new_pids[2]])


def test_elastic_executor_drops_a_killed_worker_past_its_reset_limit():
    made = tray.ElasticRayExecutor(min_workers=2, max_workers=3, reset_limit=0)
    assert made.num_workers == 3
    made.start()
    group, tuttid_pid, pids = made.placement_group, made.coordinator.pid, made.worker_pids()
    try:
        env = made.execute_single(lambda _: {k: os.environ.get(k) for k in (
            "TUTTI_ELASTIC", "TUTTI_MIN_SIZE", "TUTTI_MAX_SIZE", "TUTTI_ELASTIC_TIMEOUT")})
        assert env == {"TUTTI_ELASTIC": "1", "TUTTI_MIN_SIZE": "2", "TUTTI_MAX_SIZE": "3",
                       "TUTTI_ELASTIC_TIMEOUT": "600"}
        results = made.run(elastic_training, args=[10, 2, 4])
        assert made.lost_ranks == [2] and made.live_ranks() == [0, 1] and made.replaced == []
        assert len(results) == 2
        for result in results:
            # 4 steps of 3 ranks, then 6 of 2; the re-formed job is epoch 2 of size 2.
            assert result["total"] == 4 * 3 + 6 * 2
            assert result["size"] == 2 and result["epoch"] == 2
            assert result["restores"] == [4]
        # Later calls go to the survivors alone.
        assert made.run(allreduce_sum, args=[1.0]) == [2.0, 2.0]
    finally:
        made.shutdown()
    assert_cleaned_up(made, group, tuttid_pid, pids)


def test_elastic_argument_errors():
    with pytest.raises(ValueError, match=r"^max_workers \(1\) is below min_workers \(2\)$"):
        tray.ElasticRayExecutor(min_workers=2, max_workers=1)
    with pytest.raises(ValueError, match=r"^num_workers \(4\) must lie within min_workers \(1\) "
                                         r"and max_workers \(3\)$"):
        tray.ElasticRayExecutor(min_workers=1, max_workers=3, num_workers=4)
    assert tray.ElasticRayExecutor(min_workers=2).num_workers == 2
    with pytest.raises(ValueError, match=r"^reset_limit must be an int >= 0, not -1$"):
        tray.ElasticRayExecutor(min_workers=2, reset_limit=-1)
    with pytest.raises(ValueError, match=r"^extra_env_vars may not set TUTTI_MIN_SIZE: "):
        tray.ElasticRayExecutor(min_workers=2).start(extra_env_vars={"TUTTI_MIN_SIZE": 1})


def test_across_nodes_the_coordinator_binds_every_interface_at_the_drivers_node_ip(monkeypatch):
    """A cluster of several machines cannot be had here: pretend a node is elsewhere, so that
    tuttid binds every interface and the actors reach it at the driver's node IP."""
    import tutti.ray.coordinator
    monkeypatch.setattr(tutti.ray.coordinator, "_all_nodes_local", lambda driver_ip: False)
    made = tray.RayExecutor(num_workers=2)
    made.start()
    try:
        results = made.run(identity)
    finally:
        made.shutdown()
    ip = re.escape(ray.util.get_node_ip_address())
    for result in results:
        assert re.fullmatch(rf"tcp://{ip}:\d+", result["env"]["TUTTI_COORDINATOR"])
        assert result["sum"] == [3.0] * 4
