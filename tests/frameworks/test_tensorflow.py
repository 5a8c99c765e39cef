"""tutti.tensorflow and tutti.keras (Keras 3, TensorFlow backend) on real jobs of 2 ranks (4 for
the two-set example, 2 and 4 for the API test): values and gradients against single-process
references, eager and inside tf.function, misuse with exact classes and messages, model.fit
training with bitwise-identical replicas, and the example. Run with the TensorFlow environment's
Python:

    .venv-tensorflow/bin/python -m pytest -q tests/frameworks/test_tensorflow.py

Without TensorFlow and Keras it skips (fails under CI=true), so another framework's environment
running tests/frameworks passes over it."""
import os
import subprocess
import tempfile

import pytest

from conftest import ROOT, assert_ok, engine_missing, errors_of, job_env, lines_of, run_job

try:
    import keras  # noqa: F401 - only probed: the ranks import it
    import tensorflow  # noqa: F401
except ImportError:
    tensorflow = None

QUIET = {"TF_CPP_MIN_LOG_LEVEL": "3", "KERAS_BACKEND": "tensorflow"}


@pytest.fixture(autouse=True)
def needs_tensorflow():
    if tensorflow is None:
        engine_missing("tensorflow and keras are not installed in this Python "
                       "(python/constraints-tensorflow.txt)")


@pytest.mark.parametrize("module,message", [
    ("tutti.tensorflow", "ImportError: tutti.tensorflow needs TensorFlow: pip install "
                         "tutti[tensorflow] (or pip install tensorflow)"),
    ("tutti.keras", "ImportError: tutti.keras needs Keras 3: pip install tutti[keras] (or pip "
                    "install keras)")])
def test_import_without_the_framework_says_what_to_install(module, message):
    framework = module.split(".")[1]
    probe = subprocess.run(["/usr/bin/python3", "-c", f"import {framework}"],
                           capture_output=True)
    if not os.path.exists("/usr/bin/python3") or probe.returncode == 0:
        pytest.skip(f"/usr/bin/python3 has {framework}")
    result = subprocess.run(["/usr/bin/python3", "-c", f"import {module}"], env=job_env(),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == message


@pytest.mark.parametrize("ranks", [2, 4])
def test_collectives_gradients_tapes_and_misuse(ranks):
    result = run_job(ranks, "tf_api.py", env=QUIET)
    assert_ok(result, "tf api ok", ranks)
    for r in range(ranks):
        errors = errors_of(result, r)
        assert errors["grouped-gather-list"] == ("InvalidArgumentError grouped_allgather takes a "
                                                 "list of tensors, not EagerTensor")
        assert errors["grouped-gather-scalar"] == (
            "InvalidArgumentError grouped_allgather takes tensors of at least one dimension; "
            "tensors[1] is a scalar")
        assert errors["grouped-scatter-op"] == ("InvalidArgumentError grouped_reducescatter "
                                                "takes op Sum or Average, not Max")
        assert errors["grouped-scatter-scalar"] == (
            "InvalidArgumentError grouped_reducescatter takes tensors of at least one dimension; "
            "tensors[0] is a scalar")
        assert errors["sync-fused"] == (
            "InvalidArgumentError SyncBatchNormalization does not support fused=True (Keras 3 "
            "has no fused batch normalization)")
        assert errors["sync-synchronized"] == (
            "InvalidArgumentError SyncBatchNormalization synchronizes through tutti; "
            "synchronized=True (tf.distribute) does not apply")
        assert errors["jit"] == (
            "UnsupportedError tutti.tensorflow collectives cannot run inside "
            "tf.function(jit_compile=True): XLA compiles no Python callback; use tf.function "
            "without jit_compile (Keras: model.compile(..., jit_compile=False))")
        assert errors["grad-max"] == (
            "UnsupportedError the gradient of an allreduce with op Max is not defined in "
            "tutti.tensorflow: differentiate Sum or Average")
        assert errors["op"] == ("InvalidArgumentError unknown reduction op 7: use "
                                "tutti.tensorflow.Sum, Average, Min, Max or Product")
        assert errors["list"] == ("InvalidArgumentError allreduce takes one tensor; use "
                                  "grouped_allreduce for a list")
        assert errors["sparse-min"] == (
            "UnsupportedError allreduce of tf.IndexedSlices supports op Sum and Average, not "
            "Min: pass sparse_as_dense=True or densify it")
        assert errors["unregistered"] == (
            "InvalidArgumentError process set [0] is not registered: pass it to "
            "init(process_sets=...) or add_process_set()")
        assert errors["barrier-graph"] == ("UnsupportedError barrier runs eagerly only, not "
                                           "inside tf.function")
        assert errors["tape-op"] == ("InvalidArgumentError DistributedGradientTape reduces with "
                                     "op Sum or Average")
        # A failure while the graph runs comes back as TF's error for RuntimeError, holding
        # tutti's class and message.
        assert errors["shape"].startswith("UnknownError "), errors["shape"]
        assert ("MismatchError: mismatched 'shape[0]' on process set 0: rank 0 sent allreduce "
                "float32[3] op=average in group 'shape' (1 of 1), rank 1 sent allreduce "
                "float32[4] op=average in group 'shape' (1 of 1)") in errors["shape"]
    for r in range(ranks // 2):
        assert "non-member" not in errors_of(result, r)
    for r in range(ranks // 2, ranks):
        for key in ("non-member", "non-member-graph"):
            assert errors_of(result, r)[key] == (f"NotAMemberError rank {r} is not a member of "
                                               f"process set 1")


def test_keras_fit_converges_with_identical_replicas_and_callbacks():
    with tempfile.TemporaryDirectory() as folder:
        result = run_job(2, "keras_train.py", folder, env=QUIET)
        assert_ok(result, "keras ok", 2)
        assert sorted(os.listdir(folder)) == ["best-0.keras"]  # rank 0 alone writes
    mine, theirs = lines_of(result, 0), lines_of(result, 1)
    for prefix in ("loss", "rates", "weights"):
        line = [l for l in mine if l.startswith(prefix)]
        assert line == [l for l in theirs if l.startswith(prefix)], (mine, theirs)
    losses = [float(v) for v in next(l for l in mine if l.startswith("loss")).split()[1:]]
    assert losses[-1] < 0.01 * losses[0], losses
    rates = next(l for l in mine if l.startswith("rates")).split()[1:]
    # warmup from 0.05 / 2 over two epochs (fractional), held, then 0.05 * 0.5 ** epoch
    assert rates == ["0.0375", "0.05", "0.05", "0.05", "0.003125", "0.0015625"]


def test_keras_two_models_example_in_two_sets():
    script = os.path.join(ROOT, "examples", "python", "keras_two_models.py")
    result = run_job(4, script, env=QUIET, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    words = [lines_of(result, r)[-1].split() for r in range(4)]
    assert [w[0] for w in words] == ["regression", "regression", "classifier", "classifier"]
    assert words[0] == words[1] and words[2] == words[3]  # same loss and weights in a set
    assert words[0][-1] != words[2][-1]
    for w in words:
        assert float(w[-3]) < 0.7 * float(w[-5]), w  # "loss FIRST -> LAST weights DIGEST"


def test_device_hooks_make_copy_and_import_tensors():
    """tutti.tensorflow's device hooks (GPU tensors through DLPack) with their TF calls on the
    CPU, the only device here: new tensors and their addresses, a deep copy (never the input's
    buffer), and a request-owned result imported and copied. On a GPU: not run (the GPU machine
    has no TensorFlow)."""
    import numpy as np
    import tensorflow as tf
    from tutti import _capi, _dlpack
    from tutti.tensorflow._device import TensorFlowHooks

    hooks = TensorFlowHooks("CPU")
    assert hooks.host_waits and hooks.stream(0) == 0 and hooks.export_stream(0) is None
    empty, address = hooks.empty(_capi.DTYPE_BFLOAT16, (2, 3), 0)
    assert empty.dtype == tf.bfloat16 and empty.shape == (2, 3) and "CPU" in empty.device
    assert address == _dlpack.describe(empty, None).pointer
    source = tf.constant([1, 2, 3], tf.int32)
    copy, address = hooks.copy(source, 0)
    assert copy.numpy().tolist() == [1, 2, 3]
    assert address != _dlpack.describe(source, None).pointer
    # TensorFlow takes imported memory aligned to 64 bytes, as the library's device results are.
    raw = np.zeros(256, np.uint8)
    start = -raw.ctypes.data % 64
    owned = raw[start:start + 16].view(np.float32)
    owned[:] = [1.5, 2.5, 3.5, 4.5]
    result = hooks.copy_result(_capi.DTYPE_FLOAT32, (2, 2), owned.ctypes.data, 0)
    owned[:] = 0  # the request's memory goes; the result is TF's own
    assert result.dtype == tf.float32 and result.numpy().tolist() == [[1.5, 2.5], [3.5, 4.5]]
    assert hooks.copy_result(_capi.DTYPE_INT64, (0, 3), 0, 0).shape == (0, 3)
