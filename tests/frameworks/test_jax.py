"""tutti.jax and the framework-neutral array core: the core in this process, the binding on real
jobs of 2 and 4 ranks (values and gradients against single-process references, eager and jit,
misuse), a training run, and the example."""
import os
import subprocess

import numpy as np
import pytest

from conftest import ROOT, assert_ok, engine_missing, errors_of, job_env, lines_of, run_job

try:
    import jax
    import jax.numpy as jnp
except ImportError:
    jax = None


@pytest.fixture(autouse=True)
def needs_jax():
    if jax is None:
        engine_missing("jax is not installed in this Python (python/constraints-jax.txt)")


# ---- the array core, in this process -----------------------------------------------------------
def test_core_reads_host_arrays_without_copies():
    from tutti import _arrays, _capi
    plain = np.arange(6, dtype=np.float32)
    assert _arrays.host_array(plain) is plain
    data = bytearray(b"\x01\x02\x03")
    view = _arrays.host_array(data)
    assert view.dtype == np.uint8 and np.shares_memory(view, np.frombuffer(data, np.uint8))

    class Interface:
        __array_interface__ = plain.__array_interface__
    assert np.shares_memory(_arrays.host_array(Interface()), plain)

    class DLPackOnly:
        def __dlpack__(self, **kwargs): return plain.__dlpack__(**kwargs)
        def __dlpack_device__(self): return plain.__dlpack_device__()
    assert np.shares_memory(_arrays.host_array(DLPackOnly()), plain)
    on_cpu = jnp.arange(4.0)
    array = _arrays.host_array(on_cpu)
    assert array.ctypes.data == on_cpu.unsafe_buffer_pointer() and not array.flags.writeable
    half = _arrays.host_array(jnp.ones(3, jnp.bfloat16))
    assert _arrays.dtype_code(half) == _capi.DTYPE_BFLOAT16
    assert _arrays.new_array(_capi.DTYPE_BFLOAT16, (2,))[0].dtype == half.dtype
    strided = _arrays.host_array(np.arange(8.0)[::2])
    assert strided.flags.c_contiguous and strided.tolist() == [0.0, 2.0, 4.0, 6.0]
    assert _arrays.host_array([1.5, 2.5]).tolist() == [1.5, 2.5]


def test_core_refuses_device_memory_and_non_arrays():
    import tutti
    from tutti import _arrays

    class OnCuda:
        __cuda_array_interface__ = {"shape": (2,), "typestr": "<f4", "data": (0, False),
                                    "version": 3}

    class OnRocm:
        def __dlpack__(self, **kwargs): raise AssertionError("must not be read")
        def __dlpack_device__(self): return (10, 1)
    for value, device in ((OnCuda(), "cuda"), (OnRocm(), "rocm:1")):
        with pytest.raises(tutti.UnsupportedError) as error:
            _arrays.host_array(value, "tensor")
        assert str(error.value) == (
            f"tensor is in {device} memory: tutti's framework-neutral core takes device memory "
            "only with a framework's device hooks, which this binding does not pass yet "
            "(tutti.torch reduces CUDA tensors on the device); copy it to the host first")
        assert isinstance(error.value, NotImplementedError)
    with pytest.raises(tutti.InvalidArgumentError) as error:
        _arrays.host_array(object())
    assert str(error.value) == ("array must be an array (NumPy, the buffer protocol, "
                                "__array_interface__, __array__ or __dlpack__), not object")
    with pytest.raises(tutti.InvalidArgumentError) as error:
        _arrays.buffer_of(np.zeros(2, np.complex64))
    assert str(error.value).startswith("array has dtype complex64, which tutti does not reduce")
    assert str(error.value).endswith(", bool, bfloat16")


def test_import_without_jax_says_what_to_install():
    if not os.path.exists("/usr/bin/python3"):
        pytest.skip("no /usr/bin/python3")
    probe = subprocess.run(["/usr/bin/python3", "-c", "import jax"], capture_output=True)
    if probe.returncode == 0:
        pytest.skip("/usr/bin/python3 has jax")
    result = subprocess.run(["/usr/bin/python3", "-c", "import tutti.jax"], env=job_env(),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "ImportError: tutti.jax needs JAX: pip install tutti[jax] (or pip install jax)")


# ---- the binding on real jobs ------------------------------------------------------------------
@pytest.mark.parametrize("ranks", [2, 4])
def test_collectives_gradients_and_misuse(ranks):
    result = run_job(ranks, "jax_api.py")
    assert_ok(result, "jax api ok", ranks)
    shape_error = ("MismatchError mismatched 'shape[0]' on process set 0: rank 0 sent allreduce "
                   "float32[3] op=average in group 'shape' (1 of 1), rank 1 sent allreduce "
                   "float32[4] op=average in group 'shape' (1 of 1)")
    gathered_rows = sum(r + 1 for r in range(ranks))
    for r in range(ranks):
        errors = errors_of(result, r)
        assert errors["shape"] == shape_error
        assert errors["unregistered"] == (
            "InvalidArgumentError process set [0] is not registered: pass it to "
            "init(process_sets=...) or add_process_set()")
        assert errors["grad-max"] == ("UnsupportedError the gradient of an allreduce with op Max "
                                      "is not defined in tutti.jax: differentiate Sum or Average")
        assert errors["splits-jit"] == (
            "UnsupportedError alltoall with splits inside jax.jit: the number of rows it "
            "receives is known only when it runs; call it outside jit, or without splits")
        assert errors["op"] == ("InvalidArgumentError unknown reduction op 7: use tutti.jax.Sum, "
                                "Average, Min, Max or Product")
        assert errors["pytree"] == ("InvalidArgumentError allreduce takes one array; use "
                                    "grouped_allreduce for a pytree")
        assert errors["jit-rows"] == (
            f"JaxRuntimeError MismatchError: inside jax.jit this rank traced a result of shape "
            f"({(r + 1) * ranks}, 2), the collective gave ({gathered_rows}, 2): the members' "
            f"shapes differ")
        member = r < ranks // 2
        assert ("non-member" in errors) == (not member)
        if not member:
            for key in ("non-member", "non-member-jit"):
                assert errors[key] == f"NotAMemberError rank {r} is not a member of process set 1"


def test_training_matches_one_process_and_keeps_replicas_identical():
    result = run_job(2, "jax_train.py")
    assert_ok(result, "train ok", 2)
    runs = [[line.split() for line in lines_of(result, r) if line.startswith("op ")]
            for r in range(2)]
    assert len(runs[0]) == 2 and [line[1] for line in runs[0]] == ["2", "1"]  # Average, Sum
    for mine, theirs in zip(*runs):
        assert mine[-1] == theirs[-1], (mine, theirs)  # parameters bit for bit
        first, last = float(mine[3]), float(mine[4])
        assert last < 0.01 * first, mine  # it converged


def test_two_models_example_in_two_sets():
    script = os.path.join(ROOT, "examples", "python", "jax_two_models.py")
    result = run_job(4, script)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [lines_of(result, r) for r in range(4)]
    assert all(len(rank_lines) == 1 for rank_lines in lines), result.stdout + result.stderr
    words = [rank_lines[0].split() for rank_lines in lines]
    assert [w[0] for w in words] == ["regression", "regression", "mlp", "mlp"]
    # Members of a set agree on the set-averaged loss and on every parameter bit; the sets differ.
    assert words[0][3:] == words[1][3:] and words[2][3:] == words[3][3:]
    assert words[0][-1] != words[2][-1]
    for w in words:
        assert float(w[6]) < 0.05 * float(w[4]), w


def test_device_hooks_make_copy_and_import_arrays():
    """tutti.jax's device hooks (GPU arrays through DLPack) with their JAX calls on the CPU, the
    only device here: new arrays and their addresses, a copy (never the input's buffer), and a
    request-owned result imported and copied. On a GPU: tests/frameworks/test_jax_gpu.py."""
    import tutti.errors
    from tutti import _capi
    from tutti.jax._device import JaxHooks

    hooks = JaxHooks("cpu")
    assert hooks.host_waits and hooks.stream(0) == 0 and hooks.export_stream(0) is None
    assert JaxHooks().export_stream(0) == 1  # for a GPU's: the legacy default stream
    empty, address = hooks.empty(_capi.DTYPE_BFLOAT16, (2, 3), 0)
    assert empty.dtype == jnp.bfloat16 and empty.shape == (2, 3)
    assert address == empty.unsafe_buffer_pointer()
    source = jnp.arange(3, dtype=jnp.int32)
    copy, address = hooks.copy(source, 0)
    assert copy.tolist() == [0, 1, 2] and address != source.unsafe_buffer_pointer()
    owned = np.array([1.5, 2.5, 3.5, 4.5], np.float32)
    result = hooks.copy_result(_capi.DTYPE_FLOAT32, (2, 2), owned.ctypes.data, 0)
    owned[:] = 0  # the request's memory goes; the result is JAX's own
    assert result.dtype == jnp.float32 and result.tolist() == [[1.5, 2.5], [3.5, 4.5]]
    assert hooks.copy_result(_capi.DTYPE_INT64, (0, 3), 0, 0).shape == (0, 3)
    with pytest.raises(tutti.errors.UnsupportedError,
                       match="^JAX has no gpu device numbered 0 in this process$"):
        JaxHooks().empty(_capi.DTYPE_FLOAT32, (1,), 0)
