"""horovod.torch's asynchronous collectives and their handles (integers, as Horovod's): each
submits one tutti request, or a few for the composite ones (grouped reducescatter, sparse
allreduce, Adasum), and synchronize(handle) returns what Horovod's returns.

Errors: a call the caller got wrong raises a ValueError subclass at submission; a collective
that fails raises a HorovodInternalError subclass from synchronize() (tutti.errors).
"""
import functools
import inspect
import itertools
import threading
import time
import warnings

import torch

from tutti import _capi, _compression, _numpy_api, _runtime, _world
from tutti.errors import DuplicateNameError, InvalidArgumentError, UnsupportedError
from tutti.errors import TimeoutError as _TuttiTimeout
from tutti._process_sets import global_process_set, set_id

from . import adasum as _adasum
from .tensors import buffer, contiguous, empty_like, new_tensor

# Horovod's op constants. Adasum is tutti.torch's own (over point-to-point, tutti/torch/adasum.py)
# and never reaches the library.
Average, Sum, Min, Max, Product = (_capi.OP_AVERAGE, _capi.OP_SUM, _capi.OP_MIN, _capi.OP_MAX,
                                   _capi.OP_PRODUCT)
Adasum = 6
_OPS = {Average: "Average", Sum: "Sum", Min: "Min", Max: "Max", Product: "Product",
        Adasum: "Adasum"}


# ---- handles ------------------------------------------------------------------------------------
class _Pending:
    """What a handle stands for: `wait()` returns the result, `poll()` says whether it is done,
    `settle(deadline)` waits until it is done or the monotonic `deadline` passed, without raising
    its error, and says whether it is done."""

    __slots__ = ("wait", "poll", "requests")

    def __init__(self, wait, poll, requests=()):
        self.wait, self.poll, self.requests = wait, poll, tuple(requests)

    def settle(self, deadline):
        for request in self.requests:
            remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
            try:
                request.wait(remaining_ms)
            except _TuttiTimeout:
                if not request.poll():
                    return False
            except Exception:  # its own error: done all the same
                pass
        return self.poll()


_handles = {}
_handle_ids = itertools.count(1)  # next() is atomic: threads may submit concurrently


def _register(request, finish=None):
    """A handle for one tutti request; `finish(result)` maps its result to what synchronize
    returns."""
    def wait():
        result = request.wait()
        return finish(result) if finish else result
    return _register_pending(_Pending(wait, request.poll, [request]))


def _register_pending(pending):
    key = next(_handle_ids)
    _handles[key] = pending
    return key


def clear_handles():
    _handles.clear()
    with _names_lock:
        _names.clear()
        _name_of_handle.clear()


_runtime.at_shutdown(clear_handles)  # a later runtime starts without them


def forget_settled(set_ids, timeout_s=5.0):
    """After a failure that elastic.run recovers from: drops the named handles on `set_ids` once
    their requests completed (the re-formation fails them; the script that submitted them unwound
    without synchronizing), so that the retried step may use their names again. A request the
    failure has not completed yet (a lane of the old incarnation still unwinding its collective,
    a sweep still under way on the I/O thread) gets up to `timeout_s` in all to complete."""
    with _names_lock:
        handles = [h for h, key in _name_of_handle.items() if key[0] in set_ids]
    deadline = time.monotonic() + timeout_s
    for handle in handles:
        pending = _handles.get(handle)
        if pending is None or pending.settle(deadline):
            _handles.pop(handle, None)
            _release(handle)


def poll(handle):
    """True once the operation behind `handle` completed (synchronize then returns at once)."""
    pending = _handles.get(handle)
    if pending is None:
        raise InvalidArgumentError(f"Handle {handle} was not created or has been cleared.")
    done = pending.poll()
    if done:
        _release(handle)
    return done


def synchronize(handle):
    """Waits for `handle` and returns its result, raising its error (a HorovodInternalError).
    An unknown handle returns None, as in Horovod; a callable one (sparse_allreduce_async's) is
    called."""
    if callable(handle):
        return handle()
    pending = _handles.pop(handle, None)
    if pending is None:
        return None
    try:
        return pending.wait()
    finally:
        _release(handle)


# ---- names in use -------------------------------------------------------------------------------
# A named request's name stays taken, per set, until its handle is synchronized (or polled done):
# a second request of that name raises DuplicateNameError (a ValueError) at once. The library
# refuses a name only while its collective is in flight, which a fast collective may have left
# already when the script's next line reuses the name; Horovod's users rely on the error.
_names_lock = threading.Lock()
_names = set()            # (set id, name)
_name_of_handle = {}      # handle -> (set id, name)


def _claim(name, process_set):
    if name is None:
        return None
    key = (set_id(process_set), name)
    with _names_lock:
        if key in _names:
            raise DuplicateNameError(f"a request named '{name}' is already pending on process "
                                     f"set {key[0]}", -4)
        _names.add(key)
    return key


def _release(handle):
    with _names_lock:
        key = _name_of_handle.pop(handle, None)
        if key is not None:
            _names.discard(key)


def _named_request(function):
    """Takes the request's name for its handle's lifetime (see above). The name and the set are
    read by position or keyword directly (inspect's bind costs more than the collective's own
    Python path)."""
    parameters = inspect.signature(function).parameters
    names = list(parameters)
    name_at, set_at = names.index("name"), names.index("process_set")
    set_default = parameters["process_set"].default

    @functools.wraps(function)
    def submit(*args, **kwargs):
        name = args[name_at] if len(args) > name_at else kwargs.get("name")
        if name is None:
            return function(*args, **kwargs)
        process_set = args[set_at] if len(args) > set_at else kwargs.get("process_set",
                                                                          set_default)
        key = _claim(name, process_set)
        try:
            handle = function(*args, **kwargs)
        except BaseException:
            with _names_lock:
                _names.discard(key)
            raise
        with _names_lock:
            _name_of_handle[handle] = key
        return handle
    return submit


# ---- reduce ops ---------------------------------------------------------------------------------
def reduce_op(op, average):
    """Horovod's rules for the deprecated `average` and the default op (Average)."""
    if op is not None and average is not None:
        raise ValueError("The op parameter supersedes average. Please provide only one of them.")
    if average is not None:
        warnings.warn("Parameter `average` has been replaced with `op` and will be removed in "
                      "v1.0", DeprecationWarning)
        return Average if average else Sum
    if op is None:
        return Average
    if op not in _OPS:
        raise InvalidArgumentError(f"unknown reduce op {op!r}: use one of "
                                   f"{', '.join('hvd.' + n for n in _OPS.values())}")
    return op


def _wire(compression, tensor):
    """The library compression for `tensor`: float32 CPU tensors only (others run exact, as
    Horovod's fp16 leaves non-floating tensors alone)."""
    if compression is None:
        return None
    return _compression.wire_settings(
        compression, tensor.dtype == torch.float32 and tensor.device.type == "cpu")


def _allreduce(source, output, name, op, prescale, postscale, process_set, priority=0,
               compression=None):
    """One allreduce of `source` into `output` (the same tensor in place); returns the
    request."""
    if op == Adasum:
        return _adasum.allreduce(source, output, name, prescale, postscale, process_set)
    source_buffer = buffer(source)
    return _runtime.get().allreduce(source_buffer,
                                    source_buffer if output is source else buffer(output),
                                    name, set_id(process_set), op, prescale, postscale, priority,
                                    compression=_wire(compression, source))


# ---- allreduce ----------------------------------------------------------------------------------
@_named_request
def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set, compression=None):
    """Reduces into a new tensor; returns a handle. `compression`: a library compressor
    (Compression.wire_fp16, ...), or None."""
    op = reduce_op(op, average)
    source = contiguous(tensor.detach())
    output = empty_like(source)
    request = _allreduce(source, output, name, op, prescale_factor, postscale_factor, process_set,
                         compression=compression)
    return _register(request, lambda _: output)


@_named_request
def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set, priority=0,
                     compression=None):
    """Reduces `tensor` in place; returns a handle (synchronize returns `tensor`)."""
    op = reduce_op(op, average)
    work = contiguous(tensor)
    request = _allreduce(work, work, name, op, prescale_factor, postscale_factor, process_set,
                         priority, compression)
    return _register(request, lambda _: tensor if work is tensor else tensor.copy_(work))


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


def _grouped_allreduce(sources, outputs, name, op, prescale, postscale, process_set,
                       compression=None):
    if op == Adasum:
        requests = [_adasum.allreduce(s, o, None if name is None else f"{name}.{i}", prescale,
                                      postscale, process_set)
                    for i, (s, o) in enumerate(zip(sources, outputs))]
        return _adasum.Group(requests)
    # One setting for the whole group (tuttid compares it per tensor): compressed only when every
    # tensor can be.
    wire = _wire(compression, sources[0]) if all(_wire(compression, s) for s in sources) else None
    return _runtime.get().grouped_allreduce([buffer(s) for s in sources],
                                          [buffer(o) for o in outputs], name,
                                          set_id(process_set), op, prescale, postscale,
                                          compression=wire)


@_named_request
def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set,
                            compression=None):
    op = reduce_op(op, average)
    sources = [contiguous(t.detach()) for t in tensors]
    outputs = [empty_like(s) for s in sources]
    request = _grouped_allreduce(sources, outputs, name, op, prescale_factor, postscale_factor,
                                 process_set, compression)
    return _register(request, lambda _: outputs)


@_named_request
def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set,
                             compression=None):
    op = reduce_op(op, average)
    works = [contiguous(t) for t in tensors]
    request = _grouped_allreduce(works, works, name, op, prescale_factor, postscale_factor,
                                 process_set, compression)

    def finish(_):
        for t, w in zip(tensors, works):
            if w is not t:
                t.copy_(w)
        return list(tensors)
    return _register(request, finish)


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Allreduce of a sparse COO tensor as Horovod does it: its indices and values are
    allgathered (duplicate indices add up when the result is used); Average divides the values
    by the set size. Returns, as Horovod, a callable that waits and returns the sparse result
    (synchronize() takes it too)."""
    if op not in (Average, Sum):
        raise InvalidArgumentError(f"sparse_allreduce_async supports hvd.Average and hvd.Sum, "
                                   f"not hvd.{_OPS.get(op, op)}")
    # Allgather concatenates rows: gather the indices transposed (one row per nonzero).
    indices = allgather_async(tensor._indices().transpose(0, 1).contiguous(),
                              name=f"{name}.indices", process_set=process_set)
    values = allgather_async(tensor._values(), name=f"{name}.values", process_set=process_set)
    size = len(_world.process_set_ranks(set_id(process_set)))

    def wait():
        gathered_values = synchronize(values)
        gathered_indices = synchronize(indices)
        if op == Average:
            gathered_values = gathered_values / size
        return torch.sparse_coo_tensor(gathered_indices.transpose(0, 1), gathered_values,
                                       tensor.size())
    return wait


# ---- allgather, broadcast, alltoall, reducescatter ----------------------------------------------
@_named_request
def allgather_async(tensor, name=None, process_set=global_process_set):
    return _register(_runtime.get().allgather(buffer(contiguous(tensor.detach())), new_tensor,
                                            name, set_id(process_set)))


@_named_request
def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    return _register(_runtime.get().grouped_allgather(
        [buffer(contiguous(t.detach())) for t in tensors], new_tensor, name,
        set_id(process_set)))


@_named_request
def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    output = contiguous(tensor.detach()).clone()
    request = _runtime.get().broadcast(buffer(output), root_rank, name, set_id(process_set))
    return _register(request, lambda _: output)


@_named_request
def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    work = contiguous(tensor)
    request = _runtime.get().broadcast(buffer(work), root_rank, name, set_id(process_set))
    return _register(request, lambda _: tensor if work is tensor else tensor.copy_(work))


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


@_named_request
def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """synchronize returns (received rows, rows received from each member), as Horovod 0.28."""
    if isinstance(splits, torch.Tensor):
        splits = splits.tolist()  # one copy from the device, not one per element
    split_list = None if splits is None else [int(s) for s in splits]
    request = _runtime.get().alltoall(buffer(contiguous(tensor.detach())), new_tensor, split_list,
                                    name, set_id(process_set))

    def finish(result):
        output, received = result
        # On the input's device, as Horovod returns it for GPU tensors.
        return output, torch.tensor(received, dtype=torch.int32, device=tensor.device)
    return _register(request, finish)


def _reducescatter_op(op):
    if op == Adasum:
        raise UnsupportedError("reducescatter does not support Adasum: use hvd.Average or "
                               "hvd.Sum")
    if op not in (Average, Sum):
        raise InvalidArgumentError(f"reducescatter supports hvd.Average and hvd.Sum, not "
                                   f"hvd.{_OPS.get(op, op)}")
    return op


@_named_request
def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    op = _reducescatter_op(op)
    return _register(_runtime.get().reducescatter(buffer(contiguous(tensor.detach())), new_tensor,
                                                name, set_id(process_set), op, prescale_factor,
                                                postscale_factor))


@_named_request
def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    """One reducescatter per tensor, submitted together (tutti fuses what fits); synchronize
    returns the list of results."""
    op = _reducescatter_op(op)
    rt, sid = _runtime.get(), set_id(process_set)
    requests = [rt.reducescatter(buffer(contiguous(t.detach())), new_tensor,
                                 None if name is None else f"{name}.{i}", sid, op,
                                 prescale_factor, postscale_factor)
                for i, t in enumerate(tensors)]
    return _register_pending(_Pending(lambda: [r.wait() for r in requests],
                                      lambda: all(r.poll() for r in requests), requests))


def barrier(process_set=global_process_set):
    _numpy_api.barrier(set_id(process_set))


def join(device=-1, process_set=global_process_set):
    """This rank has no more data: it stands in for the set's collectives until every member
    joined, and returns the global rank that joined last. Horovod's `device` says where its
    stand-in zeros live; tutti's always live in host memory, which CUDA members accept, so any
    device id behaves the same (docs/python.md, porting table)."""
    if not isinstance(device, int) or isinstance(device, bool):
        raise InvalidArgumentError(f"device must be an int, not {type(device).__name__}")
    return _numpy_api.join(set_id(process_set))


# ---- point to point (tutti's own, for pipelines) ------------------------------------------------
# The library moves host memory only for point to point (tutti.h, tutti_send): CUDA tensors are
# staged through a host copy here, made and consumed on the current stream.
def send(tensor, dst, tag=0, process_set=global_process_set):
    """Sends `tensor` to global rank `dst` of the set; returns once its data left this process.
    A CUDA tensor is read after the current stream's work queued before the call."""
    _runtime.get().send(buffer(contiguous(tensor.detach())), dst, tag, set_id(process_set)).wait()


def recv(tensor, src, tag=0, process_set=global_process_set):
    """Receives into `tensor` (exactly the sent size) from global rank `src` and returns it. For a
    CUDA tensor, the current stream is ordered after the data arrived on the device."""
    target = tensor if tensor.is_contiguous() else torch.empty_like(tensor, memory_format=torch.contiguous_format)
    _runtime.get().recv(buffer(target), src, tag, set_id(process_set)).wait()
    if target is not tensor:
        tensor.copy_(target)  # on the current stream
    return tensor
