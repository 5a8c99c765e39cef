"""CUDA tensors in the Python package: tutti.device_check and DeviceUnavailableError, how device
descriptors, stream waits and device results go through the core (with stand-ins for the library
and for torch's streams, so that these run anywhere), and real 2-rank jobs on CUDA tensors, which
skip without a CUDA device."""
import ctypes
import os
import re
import subprocess
import sys

import pytest
import torch

from conftest import BUILD, ROOT, lines_of, run_job


def _import_tutti():
    """The package from python/ with the build's library, as the jobs' ranks get them."""
    saved = os.environ.get("TUTTI_LIBRARY")
    os.environ["TUTTI_LIBRARY"] = os.path.join(BUILD, "libtutti.so")
    sys.path.insert(0, os.path.join(ROOT, "python"))
    try:
        import tutti
        import tutti.torch
        return tutti
    finally:
        sys.path.pop(0)
        if saved is None:
            os.environ.pop("TUTTI_LIBRARY")
        else:
            os.environ["TUTTI_LIBRARY"] = saved


tutti = _import_tutti()
hvd = tutti.torch
from tutti import _capi, _core  # noqa: E402 - after the import above
from tutti.torch import tensors  # noqa: E402

UNAVAILABLE_PREFIXES = ("this libtutti was built without GPU support", "no CUDA device",
                        "cannot load the GPU module")


# ---- statuses and device_check ------------------------------------------------------------------
def test_every_status_of_tutti_h_has_its_exception_class():
    with open(os.path.join(ROOT, "capi", "include", "tutti", "tutti.h")) as f:
        statuses = re.findall(r"#define TUTTI_ERR_(\w+) \((-\d+)\)", f.read())
    assert ("DEVICE_UNAVAILABLE", "-19") in statuses
    for name, code in statuses:
        cls = tutti.errors.from_status(int(code), "message").__class__
        expected = "".join(word.capitalize() for word in name.split("_")) + "Error"
        assert cls.__name__ == expected and cls.status == int(code), (name, cls)
        assert getattr(tutti, expected) is cls  # exported by the package


def test_device_unavailable_error_carries_status_and_message():
    error = tutti.errors.from_status(-19, "no CUDA device: cudaGetDeviceCount says 0")
    assert isinstance(error, tutti.DeviceUnavailableError) and isinstance(error, tutti.TuttiError)
    assert error.status == -19 and str(error) == "no CUDA device: cudaGetDeviceCount says 0"


def test_device_check_says_why_cuda_is_unavailable():
    try:
        tutti.device_check("cuda", 0)
    except tutti.DeviceUnavailableError as e:
        assert e.status == -19
        assert str(e).startswith(UNAVAILABLE_PREFIXES), str(e)
    else:
        assert torch.cuda.is_available(), "device_check passed on a machine without CUDA"
        pytest.skip("this machine has a usable CUDA device")
    with pytest.raises(tutti.DeviceUnavailableError):
        tutti.device_check()  # cuda, device 0


def test_device_check_of_the_cpu_passes():
    assert tutti.device_check("cpu") is None
    assert tutti.device_check("cpu", 0) is None
    assert tutti.device_check(_capi.DEVICE_CPU) is None


@pytest.mark.parametrize("device_type,index", [("tpu", 0), (7, 0), ("cuda", -1), (None, 0)])
def test_device_check_of_a_bad_device_is_an_invalid_argument(device_type, index):
    with pytest.raises(tutti.InvalidArgumentError):
        tutti.device_check(device_type, index)


# ---- descriptors --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype,code", [(torch.float32, _capi.DTYPE_FLOAT32),
                                        (torch.float16, _capi.DTYPE_FLOAT16),
                                        (torch.bfloat16, _capi.DTYPE_BFLOAT16),
                                        (torch.int64, _capi.DTYPE_INT64)])
def test_cpu_tensor_descriptor(dtype, code):
    tensor = torch.zeros(2, 3, dtype=dtype)
    buffer = tensors.buffer(tensor)
    descriptor, shape = buffer.describe()
    assert descriptor.struct_size == ctypes.sizeof(_capi.Tensor)
    assert descriptor.data == tensor.data_ptr() and descriptor.dtype == code
    assert descriptor.ndim == 2 and [descriptor.shape[i] for i in range(2)] == [2, 3]
    assert descriptor.device_type == _capi.DEVICE_CPU == 0
    assert descriptor.device_index == 0 and descriptor.stream is None
    assert buffer.owner is tensor and buffer.hooks is None
    assert _core.device_of([("tensor", buffer)]) is None


def test_device_tensor_descriptor():
    hooks = _FakeHooks()
    buffer = _core.Buffer(0x7f0000001000, _capi.DTYPE_FLOAT16, (4,), "owner", _capi.DEVICE_CUDA,
                          1, 0x5555, hooks)
    descriptor, _ = buffer.describe()
    assert descriptor.device_type == _capi.DEVICE_CUDA == 1 and descriptor.device_index == 1
    assert descriptor.stream == 0x5555 and descriptor.data == 0x7f0000001000
    # The legacy default stream is NULL.
    default = _core.Buffer(1, _capi.DTYPE_FLOAT32, (1,), None, _capi.DEVICE_CUDA, 0, 0, hooks)
    assert default.describe()[0].stream is None
    device = _core.device_of([("tensor", buffer)])
    assert (device.type, device.index, device.hooks, device.owners) == (1, 1, hooks, ["owner"])


def test_tensors_of_one_call_must_share_a_device():
    hooks = _FakeHooks()
    cpu = tensors.buffer(torch.ones(2))
    cuda0 = _core.Buffer(1, _capi.DTYPE_FLOAT32, (2,), None, _capi.DEVICE_CUDA, 0, 0, hooks)
    cuda1 = _core.Buffer(2, _capi.DTYPE_FLOAT32, (2,), None, _capi.DEVICE_CUDA, 1, 0, hooks)
    # Horovod raises a RuntimeError for a grouped call mixing CPU and GPU tensors (its tests catch
    # torch.FatalError or RuntimeError); tutti's class is that and a ValueError, as the caller's
    # other mistakes are.
    with pytest.raises(tutti.MixedDevicesError,
                       match=r"^all tensors of one call must be on the same device: "
                             r"tensors\[0\] is on cuda:0, tensors\[1\] on cpu$") as raised:
        _core.device_of([("tensors[0]", cuda0), ("tensors[1]", cpu)])
    assert isinstance(raised.value, RuntimeError) and isinstance(raised.value, ValueError)
    assert isinstance(raised.value, tutti.InvalidArgumentError) and raised.value.status == -1
    with pytest.raises(tutti.MixedDevicesError, match="input is on cuda:0, output on cuda:1"):
        _core.device_of([("input", cuda0), ("output", cuda1)])
    assert _core.device_of([("a", cuda1), ("b", cuda1)]).index == 1
    assert _core.device_of([("a", cpu), ("b", cpu)]) is None


def test_tensors_on_other_devices_are_refused():
    with pytest.raises(tutti.UnsupportedError, match="tensor is on meta; tutti takes CPU and CUDA"):
        tensors.buffer(torch.empty(2, device="meta"))


@pytest.mark.parametrize("dtype,typestr", [(_capi.DTYPE_FLOAT32, "<f4"),
                                           (_capi.DTYPE_FLOAT16, "<f2"),
                                           (_capi.DTYPE_BFLOAT16, "<i2"),
                                           (_capi.DTYPE_INT64, "<i8"), (_capi.DTYPE_UINT8, "|u1")])
def test_device_results_are_seen_through_the_cuda_array_interface(dtype, typestr):
    array = tensors._DeviceArray(0x7f0000002000, (3, 4), dtype)
    assert array.__cuda_array_interface__ == {"version": 2, "shape": (3, 4), "typestr": typestr,
                                              "data": (0x7f0000002000, False), "strides": None}


# ---- requests on device tensors, with stand-ins for the library and torch's streams ------------
class _FakeFence:
    def __init__(self):
        self.done = False

    def query(self):
        return self.done

    def synchronize(self):
        self.done = True


class _FakeHooks(_core.DeviceHooks):
    def __init__(self):
        self.calls = []
        self.fences = []

    def wait_stream(self, device_index, owners):
        self.calls.append(("wait_stream", device_index, list(owners)))
        return 0xabc

    def fence(self, device_index):
        self.calls.append(("fence", device_index))
        self.fences.append(_FakeFence())
        return self.fences[-1]

    def copy_result(self, dtype, shape, pointer, device_index):
        self.calls.append(("copy_result", dtype, shape, pointer, device_index))
        return "device copy"


class _FakeLibrary:
    """The request functions of _capi, recording calls; `pending` requests report IN_PROGRESS."""

    def __init__(self, monkeypatch, wait_status=_capi.OK):
        self.calls = []
        self.pending = set()
        self.wait_status = wait_status
        for name in ("tutti_request_wait", "tutti_request_stream_wait", "tutti_request_test",
                     "tutti_request_free", "tutti_request_output"):
            monkeypatch.setattr(_capi, name, getattr(self, name[len("tutti_"):]))

    def request_wait(self, request, timeout):
        self.calls.append(("wait", request.value, timeout))
        return self.wait_status

    def request_stream_wait(self, request, stream, timeout):
        self.calls.append(("stream_wait", request.value, stream, timeout))
        return self.wait_status

    def request_test(self, request):
        return _capi.IN_PROGRESS if request.value in self.pending else _capi.OK

    def request_free(self, request):
        self.calls.append(("free", request.value))
        return _capi.OK

    def request_output(self, request, output):
        out = output._obj
        out.data, out.dtype, out.ndim = 0x7f0000003000, _capi.DTYPE_FLOAT32, 2
        self.shape = (ctypes.c_int64 * 2)(5, 3)
        out.shape = ctypes.cast(self.shape, _capi.c_int64_p)
        out.device_type, out.device_index = _capi.DEVICE_CUDA, 1
        return _capi.OK


def _device(hooks, owners=("input", "output")):
    return _core._Device(_capi.DEVICE_CUDA, 1, hooks, list(owners))


def test_cpu_requests_wait_on_the_host(monkeypatch):
    library = _FakeLibrary(monkeypatch)
    handle = _core.Handle(ctypes.c_void_p(11), ("kept",), lambda request: "result")
    assert handle.wait(timeout_ms=500) == "result"
    assert library.calls == [("wait", 11, 500), ("free", 11)]


def test_device_requests_make_the_current_stream_wait(monkeypatch):
    library = _FakeLibrary(monkeypatch)
    hooks = _FakeHooks()
    library.pending.add(12)  # the transfer is still running when the stream wait returns
    order = []
    handle = _core.Handle(ctypes.c_void_p(12), ("kept",), lambda request: order.append(
        list(library.calls)) or "result", _device(hooks))
    assert handle.wait() == "result"
    # The current stream waits (the host does not); the result is made after that.
    assert order == [[("stream_wait", 12, 0xabc, -1)]]
    assert hooks.calls == [("wait_stream", 1, ["input", "output"]), ("fence", 1)]
    # Freed only once the current stream is past the work that reads the request's results.
    assert ("free", 12) not in library.calls
    _core._orphans.sweep()
    assert ("free", 12) not in library.calls
    hooks.fences[0].done = True
    _core._orphans.sweep()
    assert library.calls[-1] == ("free", 12)
    assert handle.wait() == "result"  # a second wait returns the result again
    assert library.calls.count(("free", 12)) == 1


def test_device_request_fenced_already_is_freed_at_once(monkeypatch):
    library = _FakeLibrary(monkeypatch)

    class DoneHooks(_FakeHooks):
        def fence(self, device_index):
            fence = super().fence(device_index)
            fence.done = True
            return fence
    handle = _core.Handle(ctypes.c_void_p(13), (), None, _device(DoneHooks()))
    assert handle.wait() is None
    assert library.calls == [("stream_wait", 13, 0xabc, -1), ("free", 13)]


def test_device_stream_wait_that_times_out_leaves_the_request_pending(monkeypatch):
    library = _FakeLibrary(monkeypatch, wait_status=-8)
    library.pending.add(14)
    hooks = _FakeHooks()
    handle = _core.Handle(ctypes.c_void_p(14), (), lambda request: "late", _device(hooks))
    with pytest.raises(tutti.TimeoutError):
        handle.wait(timeout_ms=10)
    assert library.calls == [("stream_wait", 14, 0xabc, 10)]
    library.wait_status = _capi.OK
    assert handle.wait() == "late"
    hooks.fences[0].synchronize()
    _core._orphans.sweep()
    assert library.calls[-1] == ("free", 14)


def test_failed_device_request_raises_and_is_freed(monkeypatch):
    library = _FakeLibrary(monkeypatch, wait_status=-6)
    hooks = _FakeHooks()
    handle = _core.Handle(ctypes.c_void_p(15), (), lambda request: "never", _device(hooks))
    with pytest.raises(tutti.PeerLostError):
        handle.wait()
    assert library.calls[-1] == ("free", 15) and ("fence", 1) not in hooks.calls


def test_polled_device_request_completes_without_a_stream_wait(monkeypatch):
    library = _FakeLibrary(monkeypatch)
    hooks = _FakeHooks()
    handle = _core.Handle(ctypes.c_void_p(16), (), lambda request: "done", _device(hooks))
    assert handle.poll()
    assert handle.wait() == "done"
    assert not any(call[0] == "stream_wait" for call in library.calls)
    hooks.fences[0].synchronize()
    _core._orphans.sweep()
    assert library.calls[-1] == ("free", 16)


def test_device_results_are_copied_by_the_framework(monkeypatch):
    _FakeLibrary(monkeypatch)
    hooks = _FakeHooks()
    got = _core.output_of(ctypes.c_void_p(17), tensors.new_tensor, device=_device(hooks))
    assert got == "device copy"
    assert hooks.calls == [("copy_result", _capi.DTYPE_FLOAT32, (5, 3), 0x7f0000003000, 1)]
    with pytest.raises(tutti.InternalError):
        _core.output_of(ctypes.c_void_p(17), tensors.new_tensor)  # a device result, host request


# ---- real jobs on CUDA tensors ------------------------------------------------------------------
def _no_cuda_reason():
    if not torch.cuda.is_available():
        return "no CUDA device"
    try:
        tutti.device_check("cuda", 0)
    except (tutti.DeviceUnavailableError, NotImplementedError) as e:
        return f"no CUDA device: {e}"
    return None


needs_cuda = pytest.mark.skipif(_no_cuda_reason() is not None,
                                reason=_no_cuda_reason() or "no CUDA device")


SECTIONS = ["allreduce", "broadcast", "allgather", "synchronize", "horovod_semantics", "adasum",
            "side_stream"]


def assert_sections_ok(result, sections, ranks=2):
    assert result.returncode == 0, result.stdout + result.stderr
    for r in range(ranks):
        for section in sections:
            assert f"cuda {section} ok" in lines_of(result, r), (r, result.stdout + result.stderr)


_cuda_jobs = {}


def cuda_job(ranks):
    """One job per rank count runs every section: 1 rank takes the NCCL path, 2 ranks share the
    GPU and take the staged path (a one-GPU machine has nothing else to show)."""
    if ranks not in _cuda_jobs:
        _cuda_jobs[ranks] = run_job(ranks, "torch_cuda.py", timeout=300)
    return _cuda_jobs[ranks]


@needs_cuda
@pytest.mark.parametrize("ranks", [1, 2])
@pytest.mark.parametrize("section", SECTIONS)
def test_torch_on_cuda_tensors(section, ranks):
    assert_sections_ok(cuda_job(ranks), [section], ranks)


def test_cuda_worker_checks_hold_on_cpu_tensors():
    """The GPU job's script, on CPU tensors: its expectations are right wherever it runs."""
    result = run_job(2, "torch_cuda.py", env={"TUTTI_TEST_DEVICE": "cpu"})
    assert_sections_ok(result, SECTIONS)


def test_build_queries_answer_for_the_gpu_module():
    """nccl_built()/cuda_built() say whether tutti's GPU module loads: here with a module path
    that does not exist (0 and False), and with the simulated module (no NCCL: 0, but True)."""
    code = ("import tutti, tutti.torch as hvd\n"
            "try:\n    tutti.nccl_version(); print('loaded')\n"
            "except tutti.DeviceUnavailableError as e:\n    print('unavailable', e)\n"
            "print(hvd.nccl_built(), hvd.cuda_built())\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"),
               TUTTI_LIBRARY=os.path.join(BUILD, "libtutti.so"),
               TUTTI_GPU_MODULE="/nonexistent/libtutti_cuda.so")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("unavailable cannot load the GPU module"), lines
    assert lines[1] == "0 False"
    sim = os.path.join(BUILD, "tests", "libtutti_gpu_sim.so")
    if not os.path.exists(sim):
        pytest.skip(f"no simulated GPU module at {sim}")
    out = subprocess.run([sys.executable, "-c", code], env=dict(env, TUTTI_GPU_MODULE=sim),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["loaded", "0 True"], out.stdout
