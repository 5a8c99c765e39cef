"""The collectives of a runtime (tutti/_runtime.py's Runtime inherits them): one ctypes call per
collective, each returning a tutti._core.Handle. The per-call path is short on purpose
(docs/python.md, "Where the time goes"): the descriptors and options are reused, because the
library copies them at submission; no closures or device lookups for host memory on the common
path."""
import ctypes
import threading

from . import _capi
from ._core import Descriptor, Handle, _orphans, device_of, output_of, received_splits
from .errors import check


def _name(name):
    return None if name is None else name.encode("utf-8")


def _build_options(op, prescale, postscale, priority, compression):
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


# Options without compression, by (op, prescale, postscale, priority): the library copies them at
# submission, so one struct serves every call with the same values. Bounded: scale factors may be
# anything.
_options_cache = {}


def _reduce_options(op, prescale, postscale, priority, compression=None):
    """The options' C struct (passed by reference); `compression`: a
    tutti._compression.WireCompressor, or None (the library's defaults)."""
    if compression is not None:
        return ctypes.byref(_build_options(op, prescale, postscale, priority, compression))
    key = (op, prescale, postscale, priority)
    found = _options_cache.get(key)
    if found is None:
        if len(_options_cache) >= 256:
            _options_cache.clear()
        options = _build_options(op, prescale, postscale, priority, None)
        found = _options_cache[key] = (options, ctypes.byref(options))
    return found[1]


class _Scratch(threading.local):
    """This thread's reusable descriptors for single-tensor calls (input, output)."""

    def __init__(self):
        self.first, self.second = Descriptor(), Descriptor()


_scratch = _Scratch()
_CPU = _capi.DEVICE_CPU


class Submission:
    """Mixin: the collectives, on `self.handle` (the runtime's tutti_runtime_t)."""

    def _submit(self, call, keepalive, finish=None, device=None):
        _orphans.sweep()
        request = ctypes.c_void_p()
        check(call(ctypes.byref(request)))
        return Handle(request, keepalive, finish, device)

    @staticmethod
    def _device_of(*labelled):
        """device_of, without building its list for host memory (the common case)."""
        for _, buffer in labelled:
            if buffer.device_type != _CPU:
                return device_of(labelled)
        return None

    # `finish`, where given, maps the completed request to the handle's result (default: None).
    def allreduce(self, buffer, output, name=None, set_id=0, op=_capi.OP_AVERAGE, prescale=1.0,
                  postscale=1.0, priority=0, finish=None, compression=None):
        device = self._device_of(("input", buffer), ("output", output))
        scratch = _scratch
        scratch.first.fill(buffer)
        if output is not buffer:  # in place: one descriptor for both
            scratch.second.fill(output)
        _orphans.sweep()
        request = ctypes.c_void_p()
        check(_capi.tutti_allreduce(self.handle, _name(name), set_id, scratch.first.pointer,
                                    scratch.first.pointer if output is buffer
                                    else scratch.second.pointer,
                                    _reduce_options(op, prescale, postscale, priority, compression),
                                    ctypes.byref(request)))
        return Handle(request, (buffer, output), finish, device)

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
            self.handle, _name(name), set_id, len(buffers), ins, outs, options, r),
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
            self.handle, _name(name), set_id, ctypes.byref(tensor), options, r),
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
