"""torch tensors as the core sees them: dtypes, Buffers (by pointer, no copies) and, for CUDA
tensors, the stream hooks (tutti._core.DeviceHooks)."""
import torch
import torch.utils.dlpack

from tutti import _capi, _dlpack, _dtypes, _host_pool
from tutti._core import Buffer, DeviceHooks
from tutti.errors import InvalidArgumentError, UnsupportedError

TORCH_TO_TUTTI = {torch.float16: _capi.DTYPE_FLOAT16, torch.bfloat16: _capi.DTYPE_BFLOAT16,
                  torch.float32: _capi.DTYPE_FLOAT32, torch.float64: _capi.DTYPE_FLOAT64,
                  torch.int8: _capi.DTYPE_INT8, torch.uint8: _capi.DTYPE_UINT8,
                  torch.int16: _capi.DTYPE_INT16, torch.int32: _capi.DTYPE_INT32,
                  torch.int64: _capi.DTYPE_INT64, torch.bool: _capi.DTYPE_BOOL}
TUTTI_TO_TORCH = {v: k for k, v in TORCH_TO_TUTTI.items()}

# __cuda_array_interface__ type strings; bfloat16 has none (NumPy lacks it) and travels as int16.
_TYPESTR = {_capi.DTYPE_FLOAT16: "<f2", _capi.DTYPE_BFLOAT16: "<i2", _capi.DTYPE_FLOAT32: "<f4",
            _capi.DTYPE_FLOAT64: "<f8", _capi.DTYPE_INT8: "|i1", _capi.DTYPE_UINT8: "|u1",
            _capi.DTYPE_INT16: "<i2", _capi.DTYPE_INT32: "<i4", _capi.DTYPE_INT64: "<i8",
            _capi.DTYPE_BOOL: "|b1"}


class _DeviceArray:
    """Device memory the library owns, seen by torch.as_tensor without a copy."""

    def __init__(self, pointer, shape, dtype):
        self.__cuda_array_interface__ = {"version": 2, "shape": tuple(shape),
                                         "typestr": _TYPESTR[dtype], "data": (pointer, False),
                                         "strides": None}


class _CudaHooks(DeviceHooks):
    """Stream order of CUDA requests on torch's current streams."""

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
            return torch.empty(shape, dtype=TUTTI_TO_TORCH[dtype], device=device)
        view = torch.as_tensor(_DeviceArray(pointer, shape, dtype), device=device)
        if dtype == _capi.DTYPE_BFLOAT16:
            view = view.view(torch.bfloat16)
        return view.clone()  # on the current stream, ordered after the request by the wait


_CUDA = _CudaHooks()


def buffer(tensor, what="tensor"):
    """The Buffer of a contiguous CPU or CUDA tensor (kept alive by it)."""
    if not isinstance(tensor, torch.Tensor):
        raise InvalidArgumentError(f"{what} must be a torch.Tensor, not {type(tensor).__name__}")
    dtype = TORCH_TO_TUTTI.get(tensor.dtype)
    # One test for the common case (a dense contiguous CPU tensor of a supported dtype); the
    # others say what is wrong.
    if tensor.is_sparse:
        raise InvalidArgumentError(f"{what} is sparse: use sparse_allreduce_async, or "
                                   "DistributedOptimizer(sparse_as_dense=True)")
    if not (tensor.is_cuda or tensor.is_cpu):
        raise UnsupportedError(f"{what} is on {tensor.device}; tutti takes CPU and CUDA tensors")
    if dtype is None:
        raise InvalidArgumentError(f"{what} has dtype {tensor.dtype}, which tutti does not "
                                   "support")
    if not tensor.is_contiguous():
        raise InvalidArgumentError(f"{what} must be contiguous")
    shape = tuple(tensor.shape)
    if tensor.is_cuda:
        # The producer is the current stream: work queued on it before this call is seen.
        stream = torch.cuda.current_stream(tensor.device).cuda_stream
        return Buffer(tensor.data_ptr(), dtype, shape, tensor, _capi.DEVICE_CUDA,
                      tensor.device.index, stream, _CUDA)
    return Buffer(tensor.data_ptr(), dtype, shape, tensor)


def _host_tensor(dtype, shape):
    """A new CPU tensor of a tutti dtype, on recycled memory when it is large (tutti/
    _host_pool.py: no page faults on every call); its memory returns to the pool with it."""
    count = 1
    for d in shape:
        count *= d
    block = _host_pool.take(count * _dtypes.ELEMENT_SIZE[dtype]) \
        if dtype != _capi.DTYPE_BOOL else None  # torch 1.13 takes no bool through DLPack
    if block is None:
        return torch.empty(shape, dtype=TUTTI_TO_TORCH[dtype])
    view = _dlpack.View(block.pointer, dtype, shape, (_dlpack.CPU, 0), owner=block)
    return torch.utils.dlpack.from_dlpack(view)


def new_tensor(dtype, shape):
    """The core's allocator for results whose size only the collective knows (CPU)."""
    tensor = _host_tensor(dtype, shape)
    return tensor, tensor.data_ptr()


def empty_like(tensor):
    """An uninitialized tensor shaped as the contiguous `tensor`, for a result the library
    writes: large CPU ones on recycled memory."""
    if tensor.is_cuda or tensor.numel() * tensor.element_size() < _host_pool.MIN_BYTES:
        return torch.empty_like(tensor)
    return _host_tensor(TORCH_TO_TUTTI[tensor.dtype], tuple(tensor.shape))


def contiguous(tensor):
    return tensor if tensor.is_contiguous() else tensor.contiguous()
