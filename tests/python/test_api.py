"""The NumPy and PyTorch APIs on real jobs of 2 to 4 ranks, and the mapping of C statuses to
exceptions."""
import os

import pytest

from conftest import BUILD, lines_of, run_job


def assert_ok(result, marker, ranks):
    assert result.returncode == 0, result.stdout + result.stderr
    for r in range(ranks):
        assert marker in lines_of(result, r), (r, result.stdout + result.stderr)


@pytest.mark.parametrize("ranks", [2, 3])
def test_numpy_api(ranks):
    assert_ok(run_job(ranks, "numpy_api.py"), "numpy api ok", ranks)


def test_errors_map_to_exceptions_with_the_library_message():
    result = run_job(2, "errors.py")
    assert_ok(result, "errors ok", 2)
    for r in range(2):
        errors = {line.split(" ")[1]: line.split(" ", 3)[2:] for line in lines_of(result, r)
                  if line.startswith("error ")}
        assert errors["mismatch"] == [
            "MismatchError", "mismatched 'shape' on process set 0: rank 0 sent allreduce "
            "float32[4] op=sum, rank 1 sent allreduce float32[3] op=sum"]
        assert errors["unknown-set"] == [
            "UnknownSetError", f"process set 99 is unknown to rank {r} (add it on this rank first)"]
        assert errors["dtype"] == ["InvalidArgumentError", "array has dtype complex64, which tutti "
                                   "does not reduce; use one of float16, float32, float64, int8, "
                                   "uint8, int32, int64, int16, bool"]
        assert errors["root"] == ["InvalidArgumentError", "broadcast: root rank 7 is not a member "
                                  "of process set 0"]
        assert errors["not-initialized"] == ["InvalidArgumentError", "tutti is not initialized: "
                                             "call tutti.init() first"]
    assert "error not-a-member NotAMemberError rank 1 is not a member of process set 1" in \
        lines_of(result, 1)
    timeout = [line for line in lines_of(result, 0) if line.startswith("error wait-timeout")]
    assert timeout and timeout[0].split(" ")[2] == "TimeoutError"


@pytest.mark.parametrize("ranks", [2, 4])
def test_torch_api(ranks):
    assert_ok(run_job(ranks, "torch_api.py"), "torch api ok", ranks)


def test_distributed_optimizer_matches_single_process_training():
    assert_ok(run_job(2, "torch_optimizer.py"), "optimizer ok", 2)


def test_exit_without_shutdown_still_leaves_in_order():
    result = run_job(2, "no_shutdown.py", timeout=120)
    assert_ok(result, "exiting", 2)
    lost = [line for line in lines_of(result, 0) if line.startswith("peer lost after ")]
    assert lost, result.stdout
    seconds, message = lost[0][len("peer lost after "):].split(" s: ", 1)
    assert message.startswith("peer lost: rank 1 finalized"), message
    assert float(seconds) < 3.0, lost  # the lease would have taken 5 s


@pytest.mark.parametrize("setting,expected", [("auto", "shm"), ("shm", "shm"), ("tcp", "tcp")])
def test_transport_setting_and_peer_stats(setting, expected):
    result = run_job(2, "transports.py", setting)
    assert_ok(result, "transports ok", 2)
    for r in range(2):
        assert f"link {1 - r} {expected} True" in lines_of(result, r), result.stdout
        assert f"self rank {r} is not another member of process set 0" in lines_of(result, r)


def test_ibverbs_without_an_rdma_device_is_refused_on_every_rank():
    """TUTTI_TRANSPORT=ibverbs through the real device discovery (rdma-core's device list), as a
    machine with a device takes it; here there is none (the kernel lists none either)."""
    listed = os.listdir("/sys/class/infiniband") if os.path.isdir("/sys/class/infiniband") else []
    if listed:
        pytest.skip(f"an RDMA device exists ({listed[0]}): tests/rdma runs instead")
    with open(os.path.join(BUILD, "libtutti.so"), "rb") as library:
        built_with_ibverbs = b"libibverbs.so.1" in library.read()
    reason = ("no RDMA device" if built_with_ibverbs else
              "this libtutti was built without libibverbs (TUTTI_IBVERBS=OFF, or libibverbs-dev "
              "was missing at build time)")
    result = run_job(2, "transport_refused.py", "ibverbs")
    for r in range(2):
        assert lines_of(result, r) == [
            f"refused InvalidArgumentError TUTTI_TRANSPORT=ibverbs, but {reason}"], result.stdout


def test_set_counters_give_each_rank_its_own_work_per_set():
    result = run_job(3, "set_counters.py")
    assert_ok(result, "set counters ok", 3)
    for r in range(3):
        lines = lines_of(result, r)
        world = dict(zip(*[iter([line for line in lines if line.startswith("world ")][0]
                                .split()[1:])] * 2))
        assert {k: int(v) for k, v in world.items() if k not in ("wait_ns", "execute_ns")} == {
            "collectives": 4, "tensors": 4, "tensors_fused": 0, "bytes": 4 * 4096,
            "tensors_compressed": 0, "adaptive_revisits": 0, "adaptive_compress_choices": 0}, lines
        assert int(world["wait_ns"]) > 0 and int(world["execute_ns"]) > 0, lines
        if r < 2:
            mine = dict(zip(*[iter([line for line in lines if line.startswith("set ")][0]
                                   .split()[1:])] * 2))
            assert (int(mine["collectives"]), int(mine["tensors"]), int(mine["bytes"])) == \
                (3, 3, 3 * 1024), lines
        else:
            assert "error not-a-member NotAMemberError rank 2 is not a member of process set 1" \
                in lines, lines
        assert "error unknown UnknownSetError process set 99 is unknown to rank " \
            f"{r} (add it on this rank first)" in lines, lines
