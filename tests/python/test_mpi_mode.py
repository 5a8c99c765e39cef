"""MPI mode (tutti_mpi.h, docs/launchers.md) under Debian's real OpenMPI mpirun, against the
release build: tests/mpi/mpi_mode_worker.c's scenarios, each rank's lines checked. OpenMPI's own
allocations upset LeakSanitizer, so these never run under the sanitizer build."""
import os
import re
import shutil
import subprocess

import pytest

from conftest import (BUILD, engine_missing, job_env, launcher_env, lines_of, own_mpi_session_dirs,
                      run_at_once, run_job)

WORKER = os.path.join(BUILD, "tests", "mpi_mode_worker")
MPIRUN = shutil.which("mpirun")


def need_mpi():
    why = None
    if MPIRUN is None:
        why = "no mpirun (Debian: openmpi-bin)"
    elif not os.path.exists(WORKER):
        why = f"{WORKER} was not built (no MPI found at configure time: libopenmpi-dev)"
    if why is not None:
        engine_missing(f"MPI mode: {why}")


def mpirun(np, scenario, env=None, timeout=180):
    command = [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", str(np), WORKER, scenario]
    return subprocess.run(command, env=launcher_env(env), capture_output=True, text=True,
                          timeout=timeout)


def lines(result, rank):
    prefix = f"rank {rank}: "
    return [l[len(prefix):] for l in result.stdout.splitlines() if l.startswith(prefix)]


def test_world_from_mpi_comm_world_with_its_own_coordinator():
    need_mpi()
    result = mpirun(4, "world")
    assert result.returncode == 0, result.stdout + result.stderr
    for r in range(4):
        assert f"tutti rank {r} size 4, mpi size 4, sum 10 mpi 10" in lines(result, r), result.stdout
        assert "passed" in lines(result, r)


def test_two_jobs_at_once_never_collide(tmp_path):
    need_mpi()
    command = [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", "2", WORKER, "world"]
    env = launcher_env()
    commands = own_mpi_session_dirs([command, command], tmp_path)
    for code, out, err in run_at_once(commands, env, timeout=180):
        assert code == 0, out + err
        assert out.count("passed") == 2, out


def test_static_dynamic_and_communicator_sets_in_one_program():
    need_mpi()
    result = mpirun(4, "modes")
    assert result.returncode == 0, result.stdout + result.stderr
    for r in (0, 1):
        assert "static set 1 sum 1 mpi 1" in lines(result, r), result.stdout
    for r in (2, 3):
        assert "dynamic set 2 sum 50 mpi 50" in lines(result, r), result.stdout
    # Colours 0 = {0, 2} and 1 = {1, 3} become sets 3 and 4 (added by lowest rank) everywhere.
    for r, (colour, sum_) in enumerate([(0, 4), (1, 10), (0, 4), (1, 10)]):
        expected = (f"colour {colour} set {3 + colour} (again {3 + colour}) size 2 sum {sum_} "
                    f"mpi {sum_}, rank in set comm {r // 2}, in colour {r // 2}")
        assert expected in lines(result, r), result.stdout
        assert "passed" in lines(result, r)


def test_communicators_that_disagree_are_refused_on_every_rank():
    need_mpi()
    result = mpirun(4, "disagree")
    assert result.returncode == 0, result.stdout + result.stderr
    for r in range(4):
        assert lines(result, r)[0] == ("status -1: communicators disagree: rank 2's holds ranks "
                                       "[1, 2], rank 1's holds ranks [0, 1]"), result.stdout


def test_init_before_mpi_init_is_refused():
    need_mpi()
    result = subprocess.run([WORKER, "no_init"], env=job_env(), capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ("status -1: MPI is not initialised: call MPI_Init (or "
                                     "MPI_Init_thread) before tutti_mpi_init")


def test_a_tuttid_that_cannot_start_fails_every_rank_naming_rank_0():
    need_mpi()
    result = mpirun(2, "world", env={"TUTTI_TUTTID": "/nonexistent/tuttid"})
    assert result.returncode != 0
    for r in range(2):
        assert lines(result, r)[0] == (
            "tutti_mpi_init(MPI_COMM_WORLD, NULL, &rt) failed: -14 rank 0: tuttid "
            "(/nonexistent/tuttid) exited with status 127 (it cannot be executed) before "
            "listening; its stderr is this rank's"), result.stdout


def test_a_named_coordinator_is_used_and_none_is_started():
    need_mpi()
    tuttid = subprocess.Popen([os.path.join(BUILD, "tuttid"), "--bind", "tcp://127.0.0.1:*",
                               "--log-level", "warn"], stdout=subprocess.PIPE, text=True)
    try:
        endpoint = tuttid.stdout.readline().split()[-1]
        # No tuttid could be started: the job runs only if it uses the one named.
        result = mpirun(2, "world", env={"TUTTI_COORDINATOR": endpoint,
                                         "TUTTI_TUTTID": "/nonexistent/tuttid"})
        assert result.returncode == 0, result.stdout + result.stderr
        for r in range(2):
            assert "passed" in lines(result, r), result.stdout
    finally:
        tuttid.terminate()
        tuttid.wait(timeout=30)


def test_the_readme_example_runs_under_mpirun():
    need_mpi()
    example = os.path.join(BUILD, "example_mpi_sets")
    env = launcher_env()
    result = subprocess.run([MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", "4", example],
                            env=env, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    got = sorted(l for l in result.stdout.splitlines() if l.startswith("rank "))
    assert got == ["rank 0: even set 1 averaged 1, world counted 4 ranks",
                   "rank 1: odd set 2 averaged 2, world counted 4 ranks",
                   "rank 2: even set 1 averaged 1, world counted 4 ranks",
                   "rank 3: odd set 2 averaged 2, world counted 4 ranks"], result.stdout


@pytest.mark.parametrize("mode, expected", [
    # Colours of rank % 2: sets 1 = {0, 2} and 2 = {1, 3}.
    ("init_comm", {0: "set 1 ranks [0, 2] sum 2", 1: "set 2 ranks [1, 3] sum 4",
                   2: "set 1 ranks [0, 2] sum 2", 3: "set 2 ranks [1, 3] sum 4"}),
    ("implicit", {0: "set 1 ranks [0, 2] sum 2", 1: "set 2 ranks [1, 3] sum 4",
                  2: "set 1 ranks [0, 2] sum 2", 3: "set 2 ranks [1, 3] sum 4"}),
    # Halves: sets 1 = {0, 1} and 2 = {2, 3}, added after init.
    ("added", {0: "set 1 ranks [0, 1] sum 1", 1: "set 1 ranks [0, 1] sum 1",
               2: "set 2 ranks [2, 3] sum 5", 3: "set 2 ranks [2, 3] sum 5"}),
])
def test_horovod_process_sets_from_mpi4py_communicators(mode, expected):
    need_mpi()
    try:
        import mpi4py  # noqa: F401
    except ImportError as e:
        engine_missing(f"no mpi4py (Debian: python3-mpi4py): {e}")
    env = launcher_env()
    script = os.path.join(os.path.dirname(__file__), "workers", "mpi_sets.py")
    result = subprocess.run([MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", "4",
                             "/usr/bin/python3", script, mode], env=env, capture_output=True,
                            text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    for r, line in expected.items():
        # mpirun may splice lines of different ranks: look for each rank's text anywhere.
        assert f"rank {r}: {line} comm 2 world 4" in result.stdout, result.stdout
        assert f"rank {r}: ok" in result.stdout, result.stdout


def test_user_errors_are_named_on_every_rank():
    need_mpi()
    result = mpirun(2, "errors")
    assert result.returncode == 0, result.stdout + result.stderr
    for r in range(2):
        assert lines(result, r)[:4] == [
            "named rank: -1 rank 0: options->rank and options->size must be -1 in MPI mode: they "
            "come from the communicator",
            "finalize NULL: -1 runtime was not made by tutti_mpi_init (finalize it with "
            "tutti_finalize)",
            "from_comm NULL: -1 runtime was not made by tutti_mpi_init",
            "set_id NULL: -1 set_id is NULL"], result.stdout
        assert "passed" in lines(result, r)


def test_communicator_calls_outside_mpi_mode_and_a_ranks_list_as_comm_are_refused(tmp_path):
    need_mpi()
    script = tmp_path / "outside.py"
    script.write_text(
        "from mpi4py import MPI\n"
        "import tutti, tutti.torch as hvd\n"
        "try:\n"
        "    hvd.init(comm=[0, 1])\n"
        "except tutti.UnsupportedError as e:\n"
        "    print('list:', e)\n"
        "hvd.init()\n"
        "for call in (lambda: tutti.process_set_from_comm(MPI.COMM_WORLD),\n"
        "             lambda: tutti.process_set_comm(0)):\n"
        "    try:\n"
        "        call()\n"
        "    except tutti.InvalidArgumentError as e:\n"
        "        print('outside:', e)\n"
        "assert not hvd.mpi_enabled()\n"
        "hvd.shutdown()\n")
    result = run_job(2, str(script))
    assert result.returncode == 0, result.stdout + result.stderr
    for r in range(2):
        assert lines_of(result, r) == [
            "list: init(comm=...) takes an mpi4py communicator (MPI mode); a list of ranks as the "
            "world is not supported",
            "outside: process sets from communicators need MPI mode: init(comm=MPI.COMM_WORLD)",
            "outside: communicators of process sets need MPI mode: init(comm=MPI.COMM_WORLD)"], \
            result.stdout


# ---- TUTTI_TRANSPORT=mpi: the data plane over MPI point-to-point (docs/transports.md, "MPI") ----

COLLECTIVES = ["allreduce 1", "allreduce 1000", "allreduce 3000001", "allgather", "broadcast",
               "alltoall", "reducescatter"]


def test_mpi_transport_gives_what_mpi_gives_on_the_world_and_on_split_sets():
    need_mpi()
    result = mpirun(4, "transport", env={"TUTTI_TRANSPORT": "mpi"}, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    for r in range(4):
        got = lines(result, r)
        colour = f"colour {r % 2}"
        for where in ("world", colour):
            for collective in COLLECTIVES:
                assert f"{where} {collective} same" in got, result.stdout
        others = " ".join(f"{p}=mpi" for p in range(4) if p != r)
        assert f"world links {others}" in got, result.stdout
        # Colours of rank % 2: {0, 2} and {1, 3}.
        assert f"{colour} links {(r + 2) % 4}=mpi" in got, result.stdout
        assert f"send to {(r + 1) % 4}, recv from {(r + 3) % 4} same" in got, result.stdout
        assert "passed" in got, result.stdout


def test_mpi_transport_without_thread_multiple_is_refused_on_every_rank():
    need_mpi()
    result = mpirun(4, "serialized", env={"TUTTI_TRANSPORT": "mpi"})
    assert result.returncode == 0, result.stdout + result.stderr
    for r in range(4):
        assert lines(result, r) == [
            "status -1: rank 0: TUTTI_TRANSPORT=mpi needs MPI_THREAD_MULTIPLE: initialise MPI "
            "with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...)", "passed"], result.stdout


def test_mpi_transport_outside_mpi_mode_is_refused_on_every_rank():
    need_mpi()
    # libtutti_mpi is loaded (the worker links it), but tutti_init is not tutti_mpi_init's.
    result = subprocess.run([os.path.join(BUILD, "tuttirun"), "-np", "2", WORKER, "outside"],
                            env=job_env({"TUTTI_TRANSPORT": "mpi"}), capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    for r in range(2):
        assert lines_of(result, r) == [
            "outside: status -1: TUTTI_TRANSPORT=mpi needs MPI mode (tutti_mpi_init)"], result.stdout


def test_mpi_transport_outside_mpi_mode_without_libtutti_mpi_is_refused_on_every_rank(tmp_path):
    need_mpi()
    # Python without mpi4py's communicator: libtutti_mpi is never loaded.
    script = tmp_path / "plain.py"
    script.write_text(
        "import tutti, tutti.torch as hvd\n"
        "try:\n"
        "    hvd.init()\n"
        "except tutti.InvalidArgumentError as e:\n"
        "    print('refused:', e)\n")
    result = run_job(2, str(script), env={"TUTTI_TRANSPORT": "mpi"})
    assert result.returncode == 0, result.stdout + result.stderr
    for r in range(2):
        assert lines_of(result, r) == [
            "refused: TUTTI_TRANSPORT=mpi needs MPI mode (tutti_mpi_init)"], result.stdout


def test_mpi_transport_from_python_with_mpi4py(tmp_path):
    need_mpi()
    try:
        import mpi4py  # noqa: F401
    except ImportError as e:
        engine_missing(f"no mpi4py (Debian: python3-mpi4py): {e}")
    # mpi4py initialises MPI with MPI_THREAD_MULTIPLE by default.
    script = tmp_path / "mpi_transport.py"
    script.write_text(
        "from mpi4py import MPI\n"
        "import torch\n"
        "import tutti, tutti.torch as hvd\n"
        "me = MPI.COMM_WORLD.Get_rank()\n"
        "hvd.init(comm=MPI.COMM_WORLD, transport='mpi')\n"
        "total = hvd.allreduce(torch.arange(300000, dtype=torch.float32), op=hvd.Sum, name='t')\n"
        "ok = torch.equal(total, 2 * torch.arange(300000, dtype=torch.float32))\n"
        "print(f'rank {me}: sum {ok} link {tutti.peer_stats(1 - me)[\"transport\"]}', flush=True)\n"
        "hvd.shutdown()\n")
    result = subprocess.run([MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", "2",
                             "/usr/bin/python3", str(script)], env=launcher_env(),
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    for r in range(2):
        assert f"rank {r}: sum True link mpi" in result.stdout, result.stdout
