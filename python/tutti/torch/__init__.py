"""Horovod's PyTorch API on tutti: `import tutti.torch as hvd` in a Horovod training script.

Names and semantics follow `horovod.torch` (ranks are global ranks; op defaults to Average).
Contiguous CPU and CUDA tensors are passed by pointer without copies and kept alive by their
request until it completes. A CUDA tensor is produced by the current stream at submission, and
synchronize() makes the current stream (not the host) wait for the transfer (docs/python.md).
"""
import io
import itertools
import pickle

import torch

import tutti as _tutti
from tutti import _capi
from tutti._core import Buffer, DeviceHooks
from tutti.errors import InvalidArgumentError, UnsupportedError

from .compression import Compression

Average, Sum, Min, Max, Product = (_capi.OP_AVERAGE, _capi.OP_SUM, _capi.OP_MIN, _capi.OP_MAX,
                                   _capi.OP_PRODUCT)
Adasum = None  # not supported: passing it raises

_TORCH_TO_TUTTI = {torch.float16: _capi.DTYPE_FLOAT16, torch.bfloat16: _capi.DTYPE_BFLOAT16,
                   torch.float32: _capi.DTYPE_FLOAT32, torch.float64: _capi.DTYPE_FLOAT64,
                   torch.int8: _capi.DTYPE_INT8, torch.uint8: _capi.DTYPE_UINT8,
                   torch.int32: _capi.DTYPE_INT32, torch.int64: _capi.DTYPE_INT64}
_TUTTI_TO_TORCH = {v: k for k, v in _TORCH_TO_TUTTI.items()}


# ---- process sets -------------------------------------------------------------------------------
class ProcessSet:
    """A set of global ranks. Register it with init(process_sets=[...]) or add_process_set()."""

    def __init__(self, ranks):
        self.ranks = sorted(int(r) for r in ranks)
        self.process_set_id = None

    def _id(self):
        if self.process_set_id is None:
            raise InvalidArgumentError(f"process set {self.ranks} is not registered: pass it to "
                                       "init(process_sets=...) or add_process_set()")
        return self.process_set_id

    def included(self):
        return _tutti.rank() in self.ranks

    def rank(self):
        """This process's position in the set, or -1 if it is not a member (as Horovod)."""
        me = _tutti.rank()
        return self.ranks.index(me) if me in self.ranks else -1

    def size(self):
        return len(self.ranks)

    def __repr__(self):
        return f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks})"

    def __eq__(self, other):
        return isinstance(other, ProcessSet) and self.process_set_id == other.process_set_id \
            and self.ranks == other.ranks

    def __hash__(self):
        return hash((self.process_set_id, tuple(self.ranks)))

    # Calls on a set: some_set.allreduce(tensor) is allreduce(tensor, process_set=some_set).
    def __getattr__(self, name):
        function = _SET_METHODS.get(name)
        if function is None:
            raise AttributeError(name)
        return lambda *args, **kwargs: function(*args, process_set=self, **kwargs)


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0


def _set_id(process_set):
    if process_set is None:
        return 0
    if isinstance(process_set, int):
        return process_set
    return process_set._id()


def add_process_set(process_set, timeout_ms=0):
    """Adds a set (a ProcessSet or a list of ranks); collective over its members."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    process_set.process_set_id = _tutti.add_process_set(process_set.ranks, timeout_ms)
    return process_set


def remove_process_set(process_set, timeout_ms=0):
    """Removes a set; collective over its members. Returns True (errors raise)."""
    _tutti.remove_process_set(_set_id(process_set), timeout_ms)
    process_set.process_set_id = None
    return True


# ---- lifetime -----------------------------------------------------------------------------------
def init(comm=None, process_sets=None, **options):
    """Joins the job. `process_sets`: ProcessSet objects registered everywhere at once (ids 1, 2,
    ... in order), or "dynamic" / None to add them later. Other options go to tutti.init."""
    if comm is not None:
        raise UnsupportedError("tutti takes no MPI communicator: ranks come from the environment")
    static = [] if process_sets in (None, "dynamic") else list(process_sets)
    _tutti.init(static_sets=[s.ranks for s in static], **options)
    global_process_set.ranks = list(range(_tutti.size()))
    for i, s in enumerate(static):
        s.process_set_id = i + 1


def shutdown():
    _handles.clear()
    _tutti.shutdown()


is_initialized = _tutti.is_initialized
rank, size = _tutti.rank, _tutti.size
local_rank, local_size = _tutti.local_rank, _tutti.local_size
cross_rank, cross_size = _tutti.cross_rank, _tutti.cross_size


# Horovod's build flags name its own backends, none of which tutti.torch has; whether CUDA tensors
# work here is tutti.device_check("cuda", index).
def nccl_built(): return False
def mpi_built(): return False
def gloo_built(): return False
def cuda_built(): return False
def rocm_built(): return False
def mpi_enabled(): return False
def gloo_enabled(): return False


def start_timeline(file_path, mark_cycles=False):
    _tutti.start_timeline(file_path)


def stop_timeline():
    _tutti.stop_timeline()


# ---- tensors ------------------------------------------------------------------------------------
# __cuda_array_interface__ type strings; bfloat16 has none (NumPy lacks it) and travels as int16.
_TYPESTR = {_capi.DTYPE_FLOAT16: "<f2", _capi.DTYPE_BFLOAT16: "<i2", _capi.DTYPE_FLOAT32: "<f4",
            _capi.DTYPE_FLOAT64: "<f8", _capi.DTYPE_INT8: "|i1", _capi.DTYPE_UINT8: "|u1",
            _capi.DTYPE_INT32: "<i4", _capi.DTYPE_INT64: "<i8"}


class _DeviceArray:
    """Device memory the library owns, seen by torch.as_tensor without a copy."""

    def __init__(self, pointer, shape, dtype):
        self.__cuda_array_interface__ = {"version": 2, "shape": tuple(shape),
                                         "typestr": _TYPESTR[dtype], "data": (pointer, False),
                                         "strides": None}


class _CudaHooks(DeviceHooks):
    """Stream order of CUDA requests on torch's current streams (tutti._core.DeviceHooks)."""

    def wait_stream(self, device_index, owners):
        stream = torch.cuda.current_stream(device_index)
        for tensor in owners:
            tensor.record_stream(stream)  # the caching allocator reuses them after the wait only
        return stream.cuda_stream

    def fence(self, device_index):
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(device_index))
        return event

    def copy_result(self, dtype, shape, pointer, device_index):
        device = torch.device("cuda", device_index)
        count = 1
        for d in shape:
            count *= d
        if count == 0:
            return torch.empty(shape, dtype=_TUTTI_TO_TORCH[dtype], device=device)
        view = torch.as_tensor(_DeviceArray(pointer, shape, dtype), device=device)
        if dtype == _capi.DTYPE_BFLOAT16:
            view = view.view(torch.bfloat16)
        return view.clone()  # on the current stream, ordered after the request by the wait


_CUDA = _CudaHooks()


def _buffer(tensor, what="tensor"):
    if not isinstance(tensor, torch.Tensor):
        raise InvalidArgumentError(f"{what} must be a torch.Tensor, not {type(tensor).__name__}")
    if tensor.device.type not in ("cpu", "cuda"):
        raise UnsupportedError(f"{what} is on {tensor.device}; tutti takes CPU and CUDA tensors")
    if tensor.dtype not in _TORCH_TO_TUTTI:
        raise InvalidArgumentError(f"{what} has dtype {tensor.dtype}, which tutti does not "
                                   "support")
    if not tensor.is_contiguous():
        raise InvalidArgumentError(f"{what} must be contiguous")
    dtype, shape = _TORCH_TO_TUTTI[tensor.dtype], tuple(tensor.shape)
    if tensor.device.type == "cuda":
        # The producer is the current stream: work queued on it before this call is seen.
        stream = torch.cuda.current_stream(tensor.device).cuda_stream
        return Buffer(tensor.data_ptr(), dtype, shape, tensor, _capi.DEVICE_CUDA,
                      tensor.device.index, stream, _CUDA)
    return Buffer(tensor.data_ptr(), dtype, shape, tensor)


def _new_tensor(dtype, shape):
    tensor = torch.empty(shape, dtype=_TUTTI_TO_TORCH[dtype])
    return tensor, tensor.data_ptr()


# Horovod handles are integers: poll(handle) / synchronize(handle).
_handles = {}
_handle_ids = itertools.count(1)  # next() is atomic: threads may submit concurrently


def _register(handle, finish=None):
    """Wraps a tutti Handle; `finish(result)` maps the raw result to what synchronize returns."""
    key = next(_handle_ids)
    _handles[key] = (handle, finish)
    return key


def poll(handle):
    """True once the operation behind `handle` completed (synchronize then returns at once)."""
    return _handles[handle][0].poll()


def synchronize(handle):
    """Waits for `handle` and returns its result (raising its error)."""
    if handle not in _handles:
        raise InvalidArgumentError(f"unknown or already synchronized handle {handle}")
    inner, finish = _handles.pop(handle)
    result = inner.wait()
    return finish(result) if finish else result


def _contiguous(tensor):
    return tensor if tensor.is_contiguous() else tensor.contiguous()


def _reduce_factors(op, average, prescale_factor, postscale_factor):
    if average is not None:
        op = Average if average else Sum
    if op is None:
        op = Average
    if op is Adasum:
        raise UnsupportedError("Adasum is not supported by tutti")
    return op, prescale_factor, postscale_factor


# ---- allreduce ----------------------------------------------------------------------------------
def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set, priority=0):
    """Reduces `tensor` in place; returns a handle."""
    op, pre, post = _reduce_factors(op, average, prescale_factor, postscale_factor)
    work = _contiguous(tensor)
    b = _buffer(work)
    handle = _tutti._rt().allreduce(b, b, name, _set_id(process_set), op, pre, post, priority)
    return _register(handle, lambda _: tensor if work is tensor else tensor.copy_(work))


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set, priority=0):
    """Reduces into a new tensor; returns a handle."""
    op, pre, post = _reduce_factors(op, average, prescale_factor, postscale_factor)
    source = _contiguous(tensor.detach())
    output = torch.empty_like(source)
    handle = _tutti._rt().allreduce(_buffer(source), _buffer(output), name, _set_id(process_set),
                                    op, pre, post, priority)
    return _register(handle, lambda _: output)


class _AllreduceFunction(torch.autograd.Function):
    """Allreduce inside autograd: the gradient is allreduced the same way (as Horovod)."""

    @staticmethod
    def forward(ctx, tensor, name, op, prescale, postscale, process_set):
        ctx.args = (op, prescale, postscale, process_set)
        return synchronize(allreduce_async(tensor, None, name, op, prescale, postscale,
                                           process_set))

    @staticmethod
    def backward(ctx, grad_output):
        op, prescale, postscale, process_set = ctx.args
        grad = synchronize(allreduce_async(grad_output, None, None, op, prescale, postscale,
                                           process_set))
        return grad, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Reduces into a new tensor; differentiable (the gradient is reduced alike)."""
    op, prescale_factor, postscale_factor = _reduce_factors(op, average, prescale_factor,
                                                            postscale_factor)
    compressed, ctx = compression.compress(tensor)
    if compressed.requires_grad:
        result = _AllreduceFunction.apply(compressed, name, op, prescale_factor, postscale_factor,
                                          process_set)
    else:
        result = synchronize(allreduce_async(compressed, None, name, op, prescale_factor,
                                             postscale_factor, process_set))
    return compression.decompress(result, ctx)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    op, pre, post = _reduce_factors(op, average, prescale_factor, postscale_factor)
    works = [_contiguous(t) for t in tensors]
    buffers = [_buffer(w) for w in works]
    handle = _tutti._rt().grouped_allreduce(buffers, buffers, name, _set_id(process_set), op,
                                            pre, post)

    def finish(_):
        for t, w in zip(tensors, works):
            if w is not t:
                t.copy_(w)
        return list(tensors)
    return _register(handle, finish)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    op, pre, post = _reduce_factors(op, average, prescale_factor, postscale_factor)
    sources = [_contiguous(t) for t in tensors]
    outputs = [torch.empty_like(s) for s in sources]
    handle = _tutti._rt().grouped_allreduce([_buffer(s) for s in sources],
                                            [_buffer(o) for o in outputs], name,
                                            _set_id(process_set), op, pre, post)
    return _register(handle, lambda _: outputs)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    pairs = [compression.compress(t) for t in tensors]
    results = synchronize(grouped_allreduce_async([p[0] for p in pairs], average, name, op,
                                                  prescale_factor, postscale_factor, process_set))
    return [compression.decompress(r, p[1]) for r, p in zip(results, pairs)]


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


# ---- allgather, broadcast, alltoall, reducescatter ----------------------------------------------
def allgather_async(tensor, name=None, process_set=global_process_set):
    return _register(_tutti._rt().allgather(_buffer(_contiguous(tensor.detach())), _new_tensor,
                                            name, _set_id(process_set)))


class _AllgatherFunction(torch.autograd.Function):
    """Allgather inside autograd: each member's gradient is the sum of its rows' gradients."""

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.process_set = process_set
        ctx.rows = tensor.shape[0] if tensor.dim() > 0 else 1
        rows = synchronize(allgather_async(torch.tensor([ctx.rows], dtype=torch.int64), None,
                                           process_set))
        ctx.offset = int(rows[:_set_position(process_set)].sum())
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = synchronize(allreduce_async(grad_output.contiguous(), None, None, Sum, 1.0, 1.0,
                                           ctx.process_set))
        return grad[ctx.offset:ctx.offset + ctx.rows], None, None


def _set_position(process_set):
    ranks = _tutti.process_set_ranks(_set_id(process_set))
    return ranks.index(rank())


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenates every member's tensor along the first dimension; differentiable."""
    if tensor.requires_grad:
        return _AllgatherFunction.apply(tensor, name, process_set)
    return synchronize(allgather_async(tensor, name, process_set))


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    return _register(_tutti._rt().grouped_allgather([_buffer(_contiguous(t)) for t in tensors],
                                                    _new_tensor, name, _set_id(process_set)))


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    return synchronize(grouped_allgather_async(tensors, name, process_set))


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    work = _contiguous(tensor)
    handle = _tutti._rt().broadcast(_buffer(work), root_rank, name, _set_id(process_set))
    return _register(handle, lambda _: tensor if work is tensor else tensor.copy_(work))


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    output = _contiguous(tensor.detach()).clone()
    handle = _tutti._rt().broadcast(_buffer(output), root_rank, name, _set_id(process_set))
    return _register(handle, lambda _: output)


class _BroadcastFunction(torch.autograd.Function):
    """Broadcast inside autograd: the root's gradient is the sum of everyone's, others get 0."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank, ctx.process_set = root_rank, process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = synchronize(allreduce_async(grad_output.contiguous(), None, None, Sum, 1.0, 1.0,
                                           ctx.process_set))
        if rank() != ctx.root_rank:
            grad = torch.zeros_like(grad)
        return grad, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Returns `root_rank`'s tensor on every member; differentiable."""
    if tensor.requires_grad:
        return _BroadcastFunction.apply(tensor, root_rank, name, process_set)
    return synchronize(broadcast_async(tensor, root_rank, name, process_set))


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    if isinstance(splits, torch.Tensor):
        splits = splits.tolist()  # one copy from the device, not one per element
    split_list = None if splits is None else [int(s) for s in splits]
    handle = _tutti._rt().alltoall(_buffer(_contiguous(tensor)), _new_tensor, split_list, name,
                                   _set_id(process_set))

    def finish(result):
        output, received = result
        return output if splits is None else (output, torch.tensor(received, dtype=torch.int32))
    return _register(handle, finish)


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Returns the received rows; with `splits`, also how many rows came from each member."""
    return synchronize(alltoall_async(tensor, splits, name, process_set))


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    return _register(_tutti._rt().reducescatter(_buffer(_contiguous(tensor)), _new_tensor, name,
                                                _set_id(process_set), op, prescale_factor,
                                                postscale_factor))


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    compressed, ctx = compression.compress(tensor)
    result = synchronize(reducescatter_async(compressed, name, op, process_set, prescale_factor,
                                             postscale_factor))
    return compression.decompress(result, ctx)


def barrier(process_set=global_process_set):
    _tutti.barrier(_set_id(process_set))


def join(device=-1, process_set=global_process_set):
    """This rank has no more data; returns the global rank that joined last."""
    return _tutti.join(_set_id(process_set))


# ---- point to point (tutti's own, for pipelines) ------------------------------------------------
def send(tensor, dst, tag=0, process_set=global_process_set):
    _tutti._rt().send(_buffer(_contiguous(tensor)), dst, tag, _set_id(process_set)).wait()


def recv(tensor, src, tag=0, process_set=global_process_set):
    """Receives into `tensor` (contiguous, exactly the sent size) and returns it."""
    _tutti._rt().recv(_buffer(tensor), src, tag, _set_id(process_set)).wait()
    return tensor


# ---- objects and model state --------------------------------------------------------------------
def _to_bytes(obj):
    stream = io.BytesIO()
    torch.save(obj, stream, pickle_protocol=pickle.HIGHEST_PROTOCOL)
    return torch.frombuffer(bytearray(stream.getvalue()), dtype=torch.uint8)


def _from_bytes(data):
    return torch.load(io.BytesIO(data.numpy().tobytes()))


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Returns `obj` from `root_rank` on every member (pickled through torch.save)."""
    name = name or "broadcast_object"  # not the type: non-roots often pass None
    payload = _to_bytes(obj) if rank() == root_rank else torch.empty(0, dtype=torch.uint8)
    length = torch.tensor([payload.numel()], dtype=torch.int64)
    broadcast_(length, root_rank, name=f"{name}.length", process_set=process_set)
    if rank() != root_rank:
        payload = torch.empty(int(length.item()), dtype=torch.uint8)
    broadcast_(payload, root_rank, name=f"{name}.payload", process_set=process_set)
    return obj if rank() == root_rank else _from_bytes(payload)


def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns every member's `obj`, in set order."""
    name = name or "allgather_object"
    payload = _to_bytes(obj)
    lengths = allgather(torch.tensor([payload.numel()], dtype=torch.int64),
                        name=f"{name}.lengths", process_set=process_set)
    data = allgather(payload, name=f"{name}.payload", process_set=process_set)
    out, at = [], 0
    for n in lengths.tolist():
        out.append(_from_bytes(data[at:at + n]))
        at += n
    return out


def broadcast_parameters(params, root_rank, prefix="", process_set=global_process_set):
    """Broadcasts a state_dict or named parameters in place from `root_rank`."""
    items = sorted(params.items()) if isinstance(params, dict) else list(params)
    handles = []
    for name, p in items:
        if not isinstance(p, torch.Tensor):
            continue
        handles.append(broadcast_async_(p.data if p.requires_grad else p, root_rank,
                                        name=f"broadcast.{prefix}{name}", process_set=process_set))
    for h in handles:
        synchronize(h)


def broadcast_optimizer_state(optimizer, root_rank, prefix="", process_set=global_process_set):
    """Makes every member's optimizer state (and hyperparameters) equal to `root_rank`'s."""
    state = broadcast_object(optimizer.state_dict(), root_rank,
                             name=f"{prefix}optimizer_state", process_set=process_set)
    if rank() != root_rank:
        optimizer.load_state_dict(state)


_SET_METHODS = {f.__name__: f for f in (
    allreduce, allreduce_, allreduce_async, allreduce_async_, grouped_allreduce,
    grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_, allgather,
    allgather_async, grouped_allgather, grouped_allgather_async, broadcast, broadcast_,
    broadcast_async, broadcast_async_, alltoall, alltoall_async, reducescatter,
    reducescatter_async, barrier, join, broadcast_object, allgather_object,
    broadcast_parameters)}

from .optimizer import DistributedOptimizer  # noqa: E402 - it uses the functions above
