"""tutti.mxnet: the NDArray conversions in this process, the binding on real jobs of 2 and 4 ranks
(values against single-process references, misuse), gluon training against one process on all
the data, and examples/python/mxnet_two_models.py. Run with the MXNet environment's Python:

    .venv-mxnet/bin/python -m pytest -q tests/frameworks/test_mxnet.py

Elsewhere (no mxnet) every test skips, or fails under CI=true (conftest.engine_missing)."""
import ctypes
import os
import subprocess

import numpy as np
import pytest

from conftest import ROOT, assert_ok, engine_missing, errors_of, job_env, lines_of, run_job

try:
    import mxnet as mx
except ImportError:
    mx = None

# One engine thread and one OpenMP thread per rank: several ranks share this machine's cores.
THREADS = {"OMP_NUM_THREADS": "1", "MXNET_CPU_WORKER_NTHREADS": "1"}


@pytest.fixture(autouse=True)
def needs_mxnet():
    if mx is None:
        engine_missing("mxnet is not installed in this Python (python/constraints-mxnet.txt)")


def _address(ndarray):
    pointer = ctypes.c_void_p()
    mx.base.check_call(mx.base._LIB.MXNDArrayGetData(ndarray.handle, ctypes.byref(pointer)))
    return pointer.value


# ---- conversions, in this process --------------------------------------------------------------
def test_ndarrays_go_in_and_out_without_copies():
    from tutti.mxnet import ops
    pending = mx.nd.dot(mx.nd.ones((50, 50)), mx.nd.ones((50, 50)))  # still in MXNet's engine
    view = ops.array_view(pending)
    assert view.ctypes.data == _address(pending) and view[0, 0] == 50.0
    result = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = ops.as_ndarray(result, pending)
    assert _address(out) == result.ctypes.data and out.context == mx.cpu(0)
    assert ops.as_ndarray(result, mx.nd.ones(1, ctx=mx.cpu(1))).context == mx.cpu(1)  # a copy
    flags = ops.array_view(mx.nd.array([1, 0], dtype="bool"))  # NumPy 1.23 has no bool DLPack
    assert flags.dtype == np.bool_ and flags.tolist() == [True, False]
    assert ops.as_ndarray(flags, mx.nd.ones(1)).dtype == np.bool_


def test_gpu_contexts_take_the_device_path_and_other_values_are_refused():
    import tutti
    from tutti.mxnet import ops
    from tutti.mxnet._device import NDArrayView

    class OnGpu(mx.nd.NDArray):  # no GPU here: an NDArray that says it is on one
        __slots__ = ()
        context = property(lambda self: mx.gpu(1))
    on_gpu = mx.nd.ones(2)
    on_gpu.__class__ = OnGpu
    view = ops.array_view(on_gpu)
    assert isinstance(view, NDArrayView) and view.__dlpack_device__() == (2, 1)
    with pytest.raises(tutti.InvalidArgumentError) as error:
        ops.array_view([1.0])
    assert str(error.value) == "tensor must be an mxnet NDArray, not list"


def test_device_hooks_make_copy_and_import_ndarrays():
    """tutti.mxnet's device hooks (GPU NDArrays through DLPack) with their MXNet calls on the
    CPU, the only device here: new NDArrays and their addresses, a copy (never the input's
    memory), and a request-owned result imported and copied. On a GPU: never run (no MXNet GPU
    wheel for the Pythons tested)."""
    from tutti import _capi
    from tutti.mxnet import ops
    from tutti.mxnet._device import MXNetHooks, NDArrayView

    hooks = MXNetHooks(mx.cpu)
    assert hooks.host_waits and hooks.stream(0) == 0 and hooks.export_stream(0) is None
    empty, address = hooks.empty(_capi.DTYPE_INT32, (2, 3), 0)
    assert empty.ndarray.dtype == np.int32 and empty.ndarray.shape == (2, 3)
    assert address == _address(empty.ndarray)
    source = mx.nd.array([1, 2, 3])
    copy, address = hooks.copy(NDArrayView(source), 0)
    assert copy.ndarray.asnumpy().tolist() == [1, 2, 3] and address != _address(source)
    owned = np.array([1.5, 2.5, 3.5, 4.5], np.float32)
    result = hooks.copy_result(_capi.DTYPE_FLOAT32, (2, 2), owned.ctypes.data, 0)
    owned[:] = 0  # the request's memory goes; the result is MXNet's own
    out = ops.as_ndarray(result, source)
    assert out.dtype == np.float32 and out.asnumpy().tolist() == [[1.5, 2.5], [3.5, 4.5]]
    assert hooks.copy_result(_capi.DTYPE_INT64, (0, 3), 0, 0).ndarray.shape == (0, 3)


def test_import_without_mxnet_says_what_to_install():
    if not os.path.exists("/usr/bin/python3"):
        pytest.skip("no /usr/bin/python3")
    if subprocess.run(["/usr/bin/python3", "-c", "import mxnet"], capture_output=True,
                      env=job_env({"PYTHONPATH": ""})).returncode == 0:
        pytest.skip("/usr/bin/python3 has mxnet")
    result = subprocess.run(["/usr/bin/python3", "-c", "import tutti.mxnet"], env=job_env(),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "ImportError: tutti.mxnet needs MXNet: pip install tutti[mxnet] (or pip install "
        "mxnet==1.9.1 'numpy<1.24')")


# ---- the binding on real jobs ------------------------------------------------------------------
@pytest.mark.parametrize("ranks", [2, 4])
def test_collectives_and_misuse(ranks):
    result = run_job(ranks, "mxnet_api.py", env=THREADS)
    assert_ok(result, "mxnet api ok", ranks)
    for r in range(ranks):
        errors = errors_of(result, r)
        assert errors["shape"] == (
            "MismatchError mismatched 'shape[0]' on process set 0: rank 0 sent allreduce "
            "float32[3] op=average in group 'shape' (1 of 1), rank 1 sent allreduce float32[4] "
            "op=average in group 'shape' (1 of 1)")
        assert errors["unregistered"] == (
            "InvalidArgumentError process set [0] is not registered: pass it to "
            "init(process_sets=...) or add_process_set()")
        assert errors["op"] == ("InvalidArgumentError unknown reduction op 7: use "
                                "tutti.mxnet.Sum, Average, Min, Max or Product")
        assert errors["average-and-op"] == ("ValueError The op parameter supersedes average. "
                                            "Please provide only one of them.")
        assert errors["list"] == ("InvalidArgumentError allreduce takes one NDArray; use "
                                  "grouped_allreduce for a list")
        assert errors["not-list"] == ("InvalidArgumentError tensors must be a list of NDArrays, "
                                      "not NDArray")
        assert errors["numpy"] == "InvalidArgumentError tensor must be an mxnet NDArray, not ndarray"
        assert errors["sparse"] == (
            "UnsupportedError tensors[0] is a row_sparse NDArray: tutti.mxnet reduces dense "
            "arrays only; convert it with .tostype('default')")
        assert errors["reducescatter-op"] == ("InvalidArgumentError reducescatter takes op "
                                              "tutti.mxnet.Average or Sum, not Max")
        assert errors["grouped-scatter-op"] == ("InvalidArgumentError grouped_reducescatter "
                                                "takes op tutti.mxnet.Average or Sum, not Max")
        assert errors["grouped-gather-not-list"] == (
            "InvalidArgumentError tensors must be a list of NDArrays, not NDArray")
        assert errors["grouped-gather-numpy"] == ("InvalidArgumentError tensors[1] must be an "
                                                  "mxnet NDArray, not ndarray")
        member = r < ranks // 2
        assert ("non-member" in errors) == (not member)
        if not member:
            assert errors["non-member"] == (f"NotAMemberError rank {r} is not a member of "
                                            f"process set 1")


@pytest.mark.parametrize("ranks", [2, 4])
def test_gluon_training_matches_one_process_with_identical_replicas(ranks):
    result = run_job(ranks, "mxnet_train.py", env=THREADS)
    assert_ok(result, "train ok", ranks)
    runs = [[line.split() for line in lines_of(result, r) if line.startswith("run ")]
            for r in range(ranks)]
    assert [line[1] for line in runs[0]] == ["trainer", "predivide", "optimizer"]
    for r in range(1, ranks):
        assert [line[-1] for line in runs[r]] == [line[-1] for line in runs[0]]  # bit for bit
    for line in runs[0]:
        assert float(line[4]) < 0.001 * float(line[3]), line  # it converged
    for r in range(ranks):
        errors = errors_of(result, r)
        assert errors["mismatch"] == (
            "MismatchError mismatched 'mismatch.gradients[0]' on process set 0: rank 0 sent "
            "allreduce float32[1] op=average in group 'mismatch.gradients' (1 of 2), rank 1 sent "
            "allreduce float32[2] op=average in group 'mismatch.gradients' (1 of 2)")
        assert errors["contexts"] == (
            "UnsupportedError parameter replicated_bias is on 2 contexts: DistributedTrainer "
            "reduces one replica per process; initialize it on one context")
        assert errors["broadcast-prefix"] == (
            "MismatchError mismatched 'init.parameters.0' on process set 0: rank 0 sent "
            "broadcast float32[2] root=0, rank 1 sent broadcast float32[3] root=0")
        assert errors["optimizer"] == ("InvalidArgumentError DistributedOptimizer wraps an "
                                       "mx.optimizer.Optimizer, not str")
        assert errors["params"] == "ValueError invalid params of type: <class 'list'>"
        assert errors["param-type"] == ("InvalidArgumentError params['w'] must be an NDArray or "
                                        "a gluon Parameter, not ndarray")
        assert errors["prefix"] == "InvalidArgumentError prefix must be a str, not int"


def test_two_models_example_in_two_sets():
    script = os.path.join(ROOT, "examples", "python", "mxnet_two_models.py")
    result = run_job(4, script, env=THREADS)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [lines_of(result, r) for r in range(4)]
    assert all(len(rank_lines) == 1 for rank_lines in lines), result.stdout + result.stderr
    words = [rank_lines[0].split() for rank_lines in lines]
    assert [w[0] for w in words] == ["regression", "regression", "mlp", "mlp"]
    # Members of a set agree on the set-averaged loss and on every parameter bit; the sets differ.
    assert words[0][3:] == words[1][3:] and words[2][3:] == words[3][3:]
    assert words[0][-1] != words[2][-1]
    for w in words:
        assert float(w[6]) < 0.1 * float(w[4]), w
