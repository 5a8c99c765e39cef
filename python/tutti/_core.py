"""The runtime of this process and its collectives, on anything that exposes a CPU or CUDA buffer.

The framework modules (tutti's NumPy API in __init__, tutti.torch) describe their tensors as
`Buffer`s and say how to make result tensors (and, for CUDA tensors, implement `DeviceHooks`);
everything else (submission, request lifetime, keeping buffers alive while the library uses them,
stream order, errors) lives here once.
"""
import ctypes
import os
import threading

from . import _capi
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
        """The C descriptor, and the shape array it points into (keep both alive)."""
        if len(self.shape) > _capi.MAX_DIMS:
            raise InvalidArgumentError(f"{len(self.shape)} dimensions; tutti takes at most "
                                       f"{_capi.MAX_DIMS}")
        shape = (ctypes.c_int64 * max(len(self.shape), 1))(*self.shape)
        tensor = _capi.Tensor()
        tensor.struct_size = ctypes.sizeof(_capi.Tensor)
        tensor.data = self.pointer
        tensor.dtype = self.dtype
        tensor.ndim = len(self.shape)
        tensor.shape = ctypes.cast(shape, _capi.c_int64_p)
        tensor.device_type = self.device_type
        if self.device_type != _capi.DEVICE_CPU:
            tensor.device_index = self.device_index
            tensor.stream = self.stream or None  # the producer's stream; unused for CPU tensors
        return tensor, shape


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
        self._complete(status, _last_error())
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
            message = _last_error()
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


ELEMENT_SIZE = {_capi.DTYPE_FLOAT16: 2, _capi.DTYPE_BFLOAT16: 2, _capi.DTYPE_FLOAT32: 4,
                _capi.DTYPE_FLOAT64: 8, _capi.DTYPE_INT8: 1, _capi.DTYPE_UINT8: 1,
                _capi.DTYPE_INT32: 4, _capi.DTYPE_INT64: 8, _capi.DTYPE_INT16: 2,
                _capi.DTYPE_BOOL: 1}


def _name(name):
    return None if name is None else name.encode("utf-8")


def _reduce_options(op, prescale, postscale, priority, compression=None):
    """`compression`: a tutti._compression.WireCompressor, or None (the library's defaults)."""
    options = _capi.AllreduceOptions()
    options.struct_size = ctypes.sizeof(_capi.AllreduceOptions)
    options.reduce_op = op
    options.prescale_factor = prescale
    options.postscale_factor = postscale
    options.priority = priority
    options.compression = _capi.COMPRESSION_NONE
    options.compression_ratio = 0.01
    options.adaptive_compressor = _capi.COMPRESSION_BF16
    options.adaptive_interval = 10
    options.adaptive_min_bytes = 65536
    options.adaptive_max_change = 0.2
    if compression is not None:
        compression.fill(options)
    return options


class Runtime:
    """One tutti runtime (tutti_init ... tutti_finalize)."""

    def __init__(self, coordinator=None, job=None, token=None, rank=None, size=None,
                 static_sets=(), timeout_ms=0, fusion_threshold=None, cycle_time_ms=None,
                 cache_capacity=None, timeline=None, transport=None, comm=None):
        options = _capi.InitOptions()
        options.struct_size = ctypes.sizeof(_capi.InitOptions)
        options.header_version = _capi.version()
        options.coordinator = _name(coordinator)
        options.job = _name(job)
        options.token = _name(token)
        options.rank = -1 if rank is None else rank
        options.size = -1 if size is None else size
        flat = [r for s in static_sets for r in s]
        sizes = (ctypes.c_int32 * max(len(static_sets), 1))(*[len(s) for s in static_sets])
        ranks = (ctypes.c_int32 * max(len(flat), 1))(*flat)
        options.num_static_sets = len(static_sets)
        options.static_set_sizes = ctypes.cast(sizes, _capi.c_int32_p)
        options.static_set_ranks = ctypes.cast(ranks, _capi.c_int32_p)
        options.timeout_ms = timeout_ms
        options.fusion_threshold_bytes = -1 if fusion_threshold is None else fusion_threshold
        options.cycle_time_ms = -1.0 if cycle_time_ms is None else cycle_time_ms
        options.cache_capacity = -1 if cache_capacity is None else cache_capacity
        options.timeline_path = _name(timeline)
        options.transport = _name(transport)
        handle = ctypes.c_void_p()
        self._mpi = None
        self._bootstrap = None
        if comm is None:
            from . import _zero_setup
            if _zero_setup.wanted(coordinator):
                # torchrun without a coordinator: rank 0 starts one (docs/launchers.md).
                boot = _zero_setup.TorchrunBootstrap((timeout_ms or 60000) / 1000.0)
                options.coordinator = _name(boot.coordinator)
                options.token = _name(token or boot.token)
                if job is None and not os.environ.get("TUTTI_JOB"):
                    options.job = _name(boot.job)
                self._bootstrap = boot
        if comm is not None:
            # MPI mode: rank, size and the coordinator come from the communicator.
            from . import _mpi
            if rank is not None or size is not None:
                raise InvalidArgumentError("rank and size come from the communicator in MPI mode")
            check(_mpi.lib().tutti_mpi_init(_mpi.handle(comm), ctypes.byref(options),
                                            ctypes.byref(handle)))
            self._mpi = _mpi
        else:
            try:
                check(_capi.tutti_init(ctypes.byref(options), ctypes.byref(handle)))
            except BaseException:
                if self._bootstrap is not None:
                    self._bootstrap.abandon()
                raise
        self._handle = handle

    # ---- lifetime ------------------------------------------------------------------------------
    @property
    def handle(self):
        if self._handle is None:
            raise InvalidArgumentError("tutti is not initialized (init() first, or after shutdown)")
        return self._handle

    def finalize(self):
        if self._handle is not None:
            handle, self._handle = self._handle, None
            _orphans.settle()
            try:
                if self._mpi is not None:
                    check(self._mpi.lib().tutti_mpi_finalize(handle))
                else:
                    check(_capi.tutti_finalize(handle))
            finally:
                if self._bootstrap is not None:
                    self._bootstrap.finish()
                    self._bootstrap = None
            _orphans.sweep(force=True)

    def abort(self):
        check(_capi.tutti_abort(self.handle))

    # ---- the world and process sets ------------------------------------------------------------
    def _int(self, function, *args):
        value = ctypes.c_int32()
        check(function(self.handle, *args, ctypes.byref(value)))
        return value.value

    def rank(self): return self._int(_capi.tutti_rank)
    def size(self): return self._int(_capi.tutti_size)
    def local_rank(self): return self._int(_capi.tutti_local_rank)
    def local_size(self): return self._int(_capi.tutti_local_size)
    def cross_rank(self): return self._int(_capi.tutti_cross_rank)
    def cross_size(self): return self._int(_capi.tutti_cross_size)

    def membership_epoch(self):
        value = ctypes.c_uint64()
        check(_capi.tutti_membership_epoch(self.handle, ctypes.byref(value)))
        return value.value

    def await_membership_epoch(self, after, timeout_ms=0):
        value = ctypes.c_uint64()
        check(_capi.tutti_await_membership_epoch(self.handle, after, timeout_ms,
                                                 ctypes.byref(value)))
        return value.value

    def ranks_waiting(self):
        value = ctypes.c_int32()
        check(_capi.tutti_ranks_waiting(self.handle, ctypes.byref(value)))
        return value.value

    def add_process_set(self, ranks, timeout_ms=0):
        ranks = list(ranks)
        array = (ctypes.c_int32 * max(len(ranks), 1))(*ranks)
        set_id = ctypes.c_int32()
        check(_capi.tutti_process_set_add(self.handle, array, len(ranks), timeout_ms,
                                          ctypes.byref(set_id)))
        return set_id.value

    def process_set_from_comm(self, comm, timeout_ms=0):
        """MPI mode: the set of this process's communicator (None: none), collective over the
        job; -1 for None. Every distinct group of the processes' communicators becomes a set."""
        if self._mpi is None:
            raise InvalidArgumentError("process sets from communicators need MPI mode: "
                                       "init(comm=MPI.COMM_WORLD)")
        set_id = ctypes.c_int32()
        check(self._mpi.lib().tutti_process_set_from_comm(
            self.handle, self._mpi.handle(comm), timeout_ms, ctypes.byref(set_id)))
        return set_id.value

    def process_set_comm(self, set_id):
        """MPI mode: a new mpi4py communicator of the set's members (None for a non-member);
        collective over the members."""
        if self._mpi is None:
            raise InvalidArgumentError("communicators of process sets need MPI mode: "
                                       "init(comm=MPI.COMM_WORLD)")
        comm_handle = self._mpi._comm_type()()
        check(self._mpi.lib().tutti_process_set_comm(self.handle, set_id, ctypes.byref(comm_handle)))
        comm = self._mpi.from_handle(comm_handle.value)
        return None if comm == self._mpi._mpi().COMM_NULL else comm

    def remove_process_set(self, set_id, timeout_ms=0):
        check(_capi.tutti_process_set_remove(self.handle, set_id, timeout_ms))

    def process_set_autotune(self, set_id):
        check(_capi.tutti_process_set_autotune(self.handle, set_id))

    def process_set_ranks(self, set_id):
        count = self._int(_capi.tutti_process_set_size, set_id)
        ranks = (ctypes.c_int32 * max(count, 1))()
        n = ctypes.c_int32()
        check(_capi.tutti_process_set_ranks(self.handle, set_id, ranks, count, ctypes.byref(n)))
        return [ranks[i] for i in range(n.value)]

    def process_set_included(self, set_id):
        return bool(self._int(_capi.tutti_process_set_included, set_id))

    def process_set_rank(self, set_id):
        return self._int(_capi.tutti_process_set_rank, set_id)

    # ---- collectives: each returns a Handle ----------------------------------------------------
    def _submit(self, call, keepalive, finish=None, device=None):
        _orphans.sweep()
        request = ctypes.c_void_p()
        check(call(ctypes.byref(request)))
        return Handle(request, keepalive, finish, device)

    # `finish`, where given, maps the completed request to the handle's result (default: None).
    def allreduce(self, buffer, output, name=None, set_id=0, op=_capi.OP_AVERAGE, prescale=1.0,
                  postscale=1.0, priority=0, finish=None, compression=None):
        device = device_of([("input", buffer), ("output", output)])
        (t_in, s_in), (t_out, s_out) = buffer.describe(), output.describe()
        options = _reduce_options(op, prescale, postscale, priority, compression)
        return self._submit(lambda r: _capi.tutti_allreduce(
            self.handle, _name(name), set_id, ctypes.byref(t_in), ctypes.byref(t_out),
            ctypes.byref(options), r), (buffer, output, s_in, s_out), finish, device)

    def grouped_allreduce(self, buffers, outputs, name=None, set_id=0, op=_capi.OP_AVERAGE,
                          prescale=1.0, postscale=1.0, priority=0, finish=None, compression=None):
        device = device_of([(f"tensors[{i}]", b) for i, b in enumerate(buffers)] +
                           [(f"outputs[{i}]", o) for i, o in enumerate(outputs)])
        ins = (_capi.Tensor * len(buffers))()
        outs = (_capi.Tensor * len(outputs))()
        shapes = []
        for i, (b, o) in enumerate(zip(buffers, outputs)):
            ins[i], s = b.describe()
            shapes.append(s)
            outs[i], s = o.describe()
            shapes.append(s)
        options = _reduce_options(op, prescale, postscale, priority, compression)
        return self._submit(lambda r: _capi.tutti_grouped_allreduce(
            self.handle, _name(name), set_id, len(buffers), ins, outs, ctypes.byref(options), r),
            (buffers, outputs, ins, outs, shapes), finish, device)

    def broadcast(self, buffer, root, name=None, set_id=0, finish=None):
        device = device_of([("tensor", buffer)])
        tensor, shape = buffer.describe()
        return self._submit(lambda r: _capi.tutti_broadcast(
            self.handle, _name(name), set_id, ctypes.byref(tensor), root, r), (buffer, shape),
            finish, device)

    def allgather(self, buffer, make, name=None, set_id=0):
        device = device_of([("tensor", buffer)])
        tensor, shape = buffer.describe()
        return self._submit(lambda r: _capi.tutti_allgather(
            self.handle, _name(name), set_id, ctypes.byref(tensor), r), (buffer, shape),
            lambda request: output_of(request, make, device=device), device)

    def grouped_allgather(self, buffers, make, name=None, set_id=0):
        device = device_of([(f"tensors[{i}]", b) for i, b in enumerate(buffers)])
        ins = (_capi.Tensor * len(buffers))()
        shapes = []
        for i, b in enumerate(buffers):
            ins[i], s = b.describe()
            shapes.append(s)
        return self._submit(lambda r: _capi.tutti_grouped_allgather(
            self.handle, _name(name), set_id, len(buffers), ins, r), (buffers, ins, shapes),
            lambda request: [output_of(request, make, i, device) for i in range(len(buffers))],
            device)

    def reducescatter(self, buffer, make, name=None, set_id=0, op=_capi.OP_AVERAGE, prescale=1.0,
                      postscale=1.0):
        device = device_of([("tensor", buffer)])
        tensor, shape = buffer.describe()
        options = _reduce_options(op, prescale, postscale, 0)
        return self._submit(lambda r: _capi.tutti_reducescatter(
            self.handle, _name(name), set_id, ctypes.byref(tensor), ctypes.byref(options), r),
            (buffer, shape), lambda request: output_of(request, make, device=device), device)

    def alltoall(self, buffer, make, splits=None, name=None, set_id=0):
        device = device_of([("tensor", buffer)])
        tensor, shape = buffer.describe()
        split_array = None if splits is None else (ctypes.c_int64 * max(len(splits), 1))(*splits)
        count = 0 if splits is None else len(splits)
        return self._submit(lambda r: _capi.tutti_alltoall(
            self.handle, _name(name), set_id, ctypes.byref(tensor), split_array, count, r),
            (buffer, shape, split_array),
            lambda request: (output_of(request, make, device=device), received_splits(request)),
            device)

    def send(self, buffer, destination, tag=0, set_id=0):
        device = device_of([("tensor", buffer)])
        tensor, shape = buffer.describe()
        return self._submit(lambda r: _capi.tutti_send(
            self.handle, set_id, ctypes.byref(tensor), destination, tag, r), (buffer, shape),
            None, device)

    def recv(self, buffer, source, tag=0, set_id=0, finish=None):
        device = device_of([("tensor", buffer)])
        tensor, shape = buffer.describe()
        return self._submit(lambda r: _capi.tutti_recv(
            self.handle, set_id, ctypes.byref(tensor), source, tag, r), (buffer, shape), finish,
            device)

    def barrier(self, set_id=0):
        return self._submit(lambda r: _capi.tutti_barrier(self.handle, set_id, r), ())

    def join(self, set_id=0, timeout_ms=0):
        last = ctypes.c_int32()
        check(_capi.tutti_join(self.handle, set_id, timeout_ms, ctypes.byref(last)))
        return last.value

    # ---- observability -------------------------------------------------------------------------
    _TRANSPORTS = {1: "tcp", 2: "shm", 3: "mpi"}

    def peer_stats(self, peer, set_id=0):
        s = _capi.PeerStats()
        s.struct_size = ctypes.sizeof(_capi.PeerStats)
        check(_capi.tutti_get_peer_stats(self.handle, set_id, peer, ctypes.byref(s)))
        return {"transport": self._TRANSPORTS.get(s.transport, str(s.transport)),
                "connected": bool(s.connected), "bytes_sent": s.bytes_sent,
                "bytes_received": s.bytes_received}

    def counters(self):
        c = _capi.Counters()
        c.struct_size = ctypes.sizeof(_capi.Counters)
        check(_capi.tutti_get_counters(self.handle, ctypes.byref(c)))
        return {name: getattr(c, name) for name, _ in _capi.Counters._fields_[1:]}

    def coordinator_counters(self):
        c = _capi.CoordinatorCounters()
        c.struct_size = ctypes.sizeof(_capi.CoordinatorCounters)
        check(_capi.tutti_get_coordinator_counters(self.handle, ctypes.byref(c)))
        return {name: getattr(c, name) for name, _ in _capi.CoordinatorCounters._fields_[1:]}

    def set_counters(self, set_id):
        c = _capi.SetCounters()
        c.struct_size = ctypes.sizeof(_capi.SetCounters)
        check(_capi.tutti_get_set_counters(self.handle, set_id, ctypes.byref(c)))
        return {name: getattr(c, name) for name, _ in _capi.SetCounters._fields_[2:]}

    def coordinator_set_counters(self, set_id):
        c = _capi.CoordinatorSetCounters()
        c.struct_size = ctypes.sizeof(_capi.CoordinatorSetCounters)
        check(_capi.tutti_get_coordinator_set_counters(self.handle, set_id, ctypes.byref(c)))
        return {name: getattr(c, name) for name, _ in _capi.CoordinatorSetCounters._fields_[2:]}

    def timeline_start(self, path):
        check(_capi.tutti_timeline_start(self.handle, _name(path)))

    def timeline_stop(self):
        check(_capi.tutti_timeline_stop(self.handle))
