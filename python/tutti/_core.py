"""Requests, on anything that exposes a CPU or CUDA buffer: what a collective reads and writes
(`Buffer`), how its request is waited for and freed (`Handle`), and device order (`DeviceHooks`).

The bindings (tutti's NumPy API, the array core the frameworks share, tutti.torch) describe their
tensors as Buffers and say how to make result tensors; the runtime (tutti/_runtime.py) submits
them; request lifetime, keeping buffers alive while the library uses them, stream order and
errors live here once.
"""
import ctypes
import threading

from . import _capi
from ._dtypes import ELEMENT_SIZE
from .errors import check, from_status, InternalError, InvalidArgumentError, MixedDevicesError


class DeviceHooks:
    """What the core needs from a framework to run its device (CUDA) tensors; tutti.torch
    implements it. Streams are cudaStream_t values as ints (0: the legacy default stream).

    `host_waits`: a framework that exposes no stream to order its work after (JAX, TensorFlow,
    MXNet) sets it; a wait on its requests then holds the host until their device work finished
    (tutti_request_wait), so that their results are ready for any stream, and wait_stream and
    fence are not used."""

    host_waits = False

    def wait_stream(self, device_index, owners):
        """The stream a wait orders after a request: the calling thread's current stream on the
        device. `owners` (the request's tensors) are marked as used by that stream, so that their
        allocator does not hand their memory out again before the stream reached that point."""
        raise NotImplementedError

    def fence(self, device_index):
        """Marks the work queued so far on the current stream: an object with query() (True once
        that work finished) and synchronize()."""
        raise NotImplementedError

    def copy_result(self, dtype, shape, pointer, device_index):
        """A new tensor holding a copy of a request-owned result in device memory, made on the
        current stream (which is ordered after the request)."""
        raise NotImplementedError


class Buffer:
    """Memory the library reads or writes: pointer, tutti dtype, shape. `owner` is kept alive
    for as long as a request may touch the memory. Device memory (device_type DEVICE_CUDA) also
    names its device, the stream that produces it (`stream`, 0 or None: the legacy default
    stream) and the framework's `hooks` (a DeviceHooks)."""

    __slots__ = ("pointer", "dtype", "shape", "owner", "device_type", "device_index", "stream",
                 "hooks")

    def __init__(self, pointer, dtype, shape, owner, device_type=_capi.DEVICE_CPU,
                 device_index=0, stream=None, hooks=None):
        self.pointer, self.dtype, self.shape, self.owner = pointer, dtype, tuple(shape), owner
        self.device_type, self.device_index = device_type, device_index
        self.stream, self.hooks = stream, hooks

    @property
    def device_name(self):
        if self.device_type == _capi.DEVICE_CPU:
            return "cpu"
        if self.device_type == _capi.DEVICE_CUDA:
            return f"cuda:{self.device_index}"
        return f"device type {self.device_type}:{self.device_index}"

    def describe(self):
        """A new C descriptor, and the shape array it points into (keep both alive until the
        call that reads them returned: the library copies both at submission)."""
        descriptor = Descriptor()
        return descriptor.fill(self), descriptor.shape

    def describe_into(self, descriptor):
        """The C descriptor of this buffer, written into `descriptor` (a reusable Descriptor)."""
        return descriptor.fill(self)


class Descriptor:
    """A reusable C tensor descriptor: the library copies the descriptor and its shape at
    submission, so one per thread and argument serves every call (no ctypes objects made per
    call; tutti/_runtime.py keeps them)."""

    __slots__ = ("tensor", "shape", "pointer")

    def __init__(self):
        self.shape = (ctypes.c_int64 * _capi.MAX_DIMS)()
        self.tensor = _capi.Tensor()
        self.tensor.struct_size = ctypes.sizeof(_capi.Tensor)
        self.tensor.shape = ctypes.cast(self.shape, _capi.c_int64_p)
        self.pointer = ctypes.byref(self.tensor)

    def fill(self, buffer):
        """Describes `buffer`; returns the descriptor's struct."""
        shape = buffer.shape
        if len(shape) > _capi.MAX_DIMS:
            raise InvalidArgumentError(f"{len(shape)} dimensions; tutti takes at most "
                                       f"{_capi.MAX_DIMS}")
        tensor = self.tensor
        tensor.data = buffer.pointer
        tensor.dtype = buffer.dtype
        tensor.ndim = len(shape)
        self.shape[:len(shape)] = shape
        tensor.device_type = buffer.device_type
        if buffer.device_type != _capi.DEVICE_CPU:
            tensor.device_index = buffer.device_index
            tensor.stream = buffer.stream or None  # the producer's stream
        else:
            tensor.device_index = 0
            tensor.stream = None
        return tensor


class _Device:
    """The one device of a call's device tensors, as its requests' waits and results need it."""

    __slots__ = ("type", "index", "hooks", "owners")

    def __init__(self, device_type, index, hooks, owners):
        self.type, self.index, self.hooks, self.owners = device_type, index, hooks, owners


def device_of(labelled):
    """The device of a call's (label, Buffer) pairs: None when they are in host memory, a _Device
    otherwise. Tensors of one call on different devices raise MixedDevicesError."""
    first = None
    for label, buffer in labelled:
        if first is None:
            first = (label, buffer)
        elif (buffer.device_type, buffer.device_index) != (first[1].device_type,
                                                           first[1].device_index):
            raise MixedDevicesError(
                f"all tensors of one call must be on the same device: {first[0]} is on "
                f"{first[1].device_name}, {label} on {buffer.device_name}")
    if first is None or first[1].device_type == _capi.DEVICE_CPU:
        return None
    buffer = first[1]
    if buffer.hooks is None:
        raise InternalError(f"a tensor on {buffer.device_name} without its framework's hooks")
    return _Device(buffer.device_type, buffer.device_index, buffer.hooks,
                   [b.owner for _, b in labelled])


class _Inflight:
    """A request and everything the library may still touch; freed once done and unreferenced,
    or, with a `fence`, once the work the caller's stream queued on its results has finished."""

    __slots__ = ("request", "keepalive", "orphaned", "fence")

    def __init__(self, request, keepalive, fence=None):
        self.request, self.keepalive, self.orphaned, self.fence = request, keepalive, False, fence


class _Registry:
    """Requests whose Python handle was dropped before they completed: their buffers must stay
    alive until the library is done with them (a dropped handle must not corrupt memory)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._orphans = []

    def adopt(self, inflight):
        with self._lock:
            self._orphans.append(inflight)

    def sweep(self, force=False):
        if not self._orphans:  # read without the lock: an adopt racing this is swept next time
            return
        with self._lock:
            keep = []
            for item in self._orphans:
                if item.fence is not None:
                    done = force or item.fence.query()
                else:
                    done = force or _capi.tutti_request_test(item.request) != _capi.IN_PROGRESS
                if done:
                    _capi.tutti_request_free(item.request)
                else:
                    keep.append(item)
            self._orphans = keep

    def settle(self):
        """Waits for the device work still reading request-owned results (before finalize)."""
        with self._lock:
            fences = [item.fence for item in self._orphans if item.fence is not None]
        for fence in fences:
            fence.synchronize()


_orphans = _Registry()


class Handle:
    """An asynchronous collective: `poll()` says whether it completed, `wait()` returns its result
    (raising its error). Dropping the handle early is safe: the request finishes on its own.

    A request on device tensors (`device`, a _Device) completes for `wait()` once the calling
    thread's current stream is ordered after its device work (tutti_request_stream_wait): the host
    waits for the negotiation, the GPU for the transfer. Its results are made on that stream, and
    the request is freed once the stream is past them."""

    def __init__(self, request, keepalive, finish, device=None):
        self._inflight = _Inflight(request, keepalive)
        self._finish = finish  # request -> result, run once on success
        self._device = device
        self._done = False
        self._result = None
        self._error = None

    def poll(self):
        if self._done:
            return True
        status = _capi.tutti_request_test(self._inflight.request)
        if status == _capi.IN_PROGRESS:
            return False
        self._complete(status, _last_error() if status != _capi.OK else "")
        return True

    def wait(self, timeout_ms=None):
        """The result, once completed; raises the request's error, or tutti.TimeoutError if
        `timeout_ms` passed first (the request then stays pending). None: the runtime's timeout."""
        if not self._done:
            timeout = -1 if timeout_ms is None else int(timeout_ms)
            device = self._device
            if device is None or device.hooks.host_waits:
                status = _capi.tutti_request_wait(self._inflight.request, timeout)
            else:
                stream = device.hooks.wait_stream(device.index, device.owners)
                status = _capi.tutti_request_stream_wait(self._inflight.request, stream or None,
                                                         timeout)
            message = _last_error() if status != _capi.OK else ""
            if status < 0 and _capi.tutti_request_test(self._inflight.request) == _capi.IN_PROGRESS:
                raise from_status(status, message)  # the wait timed out; still pending
            self._complete(status, message)
        if self._error is not None:
            raise self._error
        return self._result

    def _complete(self, status, message):
        self._done = True
        inflight = self._inflight
        request = inflight.request
        fence = None
        try:
            if status == _capi.OK:
                self._result = self._finish(request) if self._finish else None
                if self._device is not None and not self._device.hooks.host_waits:
                    # The current stream may still have to run the device work and the copies of
                    # request-owned results: the request is freed once it has.
                    fence = self._device.hooks.fence(self._device.index)
            else:
                self._error = from_status(status, message)
        finally:
            self._inflight = None
            self._finish = None
            if fence is not None and not fence.query():
                inflight.fence = fence
                _orphans.adopt(inflight)
            else:
                _capi.tutti_request_free(request)

    def __del__(self):
        inflight = getattr(self, "_inflight", None)
        if inflight is not None:
            _orphans.adopt(inflight)


def _last_error():
    return _capi.tutti_last_error().decode("utf-8", "replace")


def output_of(request, make, index=None, device=None):
    """Copies a request-owned result (allgather, reducescatter, alltoall) into a new tensor:
    `make(dtype, shape)` returns (tensor, pointer) for a result in host memory; one in device
    memory (of a request on `device`) is copied by the device's hooks."""
    out = _capi.Tensor()
    out.struct_size = ctypes.sizeof(_capi.Tensor)
    if index is None:
        status = check(_capi.tutti_request_output(request, ctypes.byref(out)))
    else:
        status = check(_capi.tutti_request_output_at(request, index, ctypes.byref(out)))
    if status != _capi.OK:  # the library said the result is not there yet: never read defaults
        raise InternalError(f"a result read before it was there: {_last_error()}")
    shape = tuple(out.shape[i] for i in range(out.ndim))
    if out.device_type != _capi.DEVICE_CPU:
        if device is None:
            raise InternalError(f"a result in memory of device type {out.device_type} for a "
                                "request on host tensors")
        return device.hooks.copy_result(out.dtype, shape, out.data or 0, out.device_index)
    tensor, pointer = make(out.dtype, shape)
    count = 1
    for d in shape:
        count *= d
    if count:
        ctypes.memmove(pointer, out.data, count * ELEMENT_SIZE[out.dtype])
    return tensor


def received_splits(request):
    splits = (ctypes.c_int64 * 4096)()
    count = ctypes.c_int32()
    check(_capi.tutti_request_received_splits(request, splits, 4096, ctypes.byref(count)))
    return [splits[i] for i in range(count.value)]
