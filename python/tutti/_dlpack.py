"""DLPack both ways, framework-neutral (dlpack.h 0.8's structs through ctypes): what a device
array's `__dlpack__` capsule says (pointer, dtype, shape, device), and a view that exports memory
the library owns (a device result) as a DLPack producer, for a framework to import and copy.

The capsule protocol, as the array API standard has it: a consumer calls
`x.__dlpack__(stream=s)`, where `s` is the stream on which the consumer will use the data (for
CUDA: 1 is the legacy default stream, 2 the per-thread default, anything else a cudaStream_t); the
producer makes the data ready on `s` (no host wait). tutti passes the stream its collective is
ordered after, so a device array's producer order holds as for PyTorch's current stream.

A capsule read here is kept (not renamed "used_dltensor"): its own destructor runs the
producer's deleter once the Buffer that holds it goes, which keeps the memory alive while a
request may touch it."""
import ctypes

from . import _capi
from .errors import InvalidArgumentError, UnsupportedError

# DLDeviceType and DLDataTypeCode (dlpack.h).
CPU, CUDA = 1, 2
DEVICE_NAMES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal",
                9: "vpi", 10: "rocm", 11: "rocm_host", 13: "cuda_managed", 14: "oneapi",
                15: "webgpu", 16: "hexagon"}
_INT, _UINT, _FLOAT, _BFLOAT, _BOOL = 0, 1, 2, 4, 6
_TO_TUTTI = {(_FLOAT, 16): _capi.DTYPE_FLOAT16, (_BFLOAT, 16): _capi.DTYPE_BFLOAT16,
             (_FLOAT, 32): _capi.DTYPE_FLOAT32, (_FLOAT, 64): _capi.DTYPE_FLOAT64,
             (_INT, 8): _capi.DTYPE_INT8, (_UINT, 8): _capi.DTYPE_UINT8,
             (_INT, 16): _capi.DTYPE_INT16, (_INT, 32): _capi.DTYPE_INT32,
             (_INT, 64): _capi.DTYPE_INT64, (_BOOL, 8): _capi.DTYPE_BOOL}
_FROM_TUTTI = {v: k for k, v in _TO_TUTTI.items()}
_NAMES = {_INT: "int", _UINT: "uint", _FLOAT: "float", _BFLOAT: "bfloat", _BOOL: "bool"}


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32),
                ("dtype", _DataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _ManagedTensor(ctypes.Structure):
    pass


_Deleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(_ManagedTensor))
_ManagedTensor._fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p),
                           ("deleter", _Deleter)]

_api = ctypes.pythonapi
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_CapsuleDestructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _CapsuleDestructor]


def device_of(value):
    """(DLPack device type, index) of `value` when it speaks DLPack, else None."""
    dlpack_device = getattr(value, "__dlpack_device__", None)
    if dlpack_device is None:
        return None
    device_type, index = dlpack_device()
    return int(device_type), int(index)


class Described:
    """What a capsule says: `pointer`, tutti `dtype`, `shape`, device (`device_type` as DLPack
    numbers it, `device_index`); `capsule` keeps the memory alive."""

    __slots__ = ("pointer", "dtype", "shape", "device_type", "device_index", "capsule")


def describe(value, stream, what="array"):
    """Reads `value.__dlpack__(stream=stream)`. Refuses dtypes tutti lacks and non-contiguous
    layouts (the core cannot copy device memory: the framework's contiguous copy serves)."""
    capsule = value.__dlpack__(stream=stream)
    if not _api.PyCapsule_IsValid(capsule, b"dltensor"):
        raise InvalidArgumentError(f"{what}: __dlpack__ returned no DLPack capsule")
    managed = _ManagedTensor.from_address(_api.PyCapsule_GetPointer(capsule, b"dltensor"))
    t = managed.dl_tensor
    kind = (t.dtype.code, t.dtype.bits)
    if kind not in _TO_TUTTI or t.dtype.lanes != 1:
        name = _NAMES.get(t.dtype.code, f"type code {t.dtype.code}")
        raise InvalidArgumentError(f"{what} has dtype {name}{t.dtype.bits}"
                                   f"{'x' + str(t.dtype.lanes) if t.dtype.lanes != 1 else ''}, "
                                   "which tutti does not support")
    shape = tuple(t.shape[i] for i in range(t.ndim))
    if t.strides:
        expected = 1
        for i in reversed(range(t.ndim)):
            if shape[i] != 1 and t.strides[i] != expected:
                raise InvalidArgumentError(f"{what} must be contiguous (row-major)")
            expected *= shape[i]
    d = Described()
    d.pointer = (t.data or 0) + t.byte_offset
    d.dtype, d.shape = _TO_TUTTI[kind], shape
    d.device_type, d.device_index = t.device.device_type, t.device.device_id
    d.capsule = capsule
    return d


# ---- export: library-owned memory as a DLPack producer -------------------------------------------
_exported = {}  # address of a live _ManagedTensor -> what keeps it valid


@_Deleter
def _delete(managed):
    _exported.pop(ctypes.addressof(managed.contents), None)


# The capsule's destructor sees it while it is being freed: it must not become a Python object
# again, so these take the raw pointer.
_raw_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _api))
_raw_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))


@_CapsuleDestructor
def _capsule_gone(capsule):
    # An unconsumed capsule ("dltensor" still) deletes its tensor; a consumer that renamed it to
    # "used_dltensor" calls the deleter itself.
    if _raw_is_valid(capsule, b"dltensor"):
        _exported.pop(_raw_get_pointer(capsule, b"dltensor"), None)


class View:
    """`pointer` (memory of `shape` and tutti `dtype` on `device`, a DLPack (type, index)) as a
    DLPack producer whose data is ready at once (the caller orders streams itself); `owner` is
    kept alive until every capsule made from the view was deleted."""

    def __init__(self, pointer, dtype, shape, device, owner=None):
        if dtype not in _FROM_TUTTI:
            raise UnsupportedError(f"dtype {dtype} has no DLPack type")
        self.pointer, self.dtype, self.shape, self.device, self.owner = (
            pointer, dtype, tuple(shape), tuple(device), owner)

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        shape = (ctypes.c_int64 * max(len(self.shape), 1))(*self.shape)
        managed = _ManagedTensor()
        t = managed.dl_tensor
        t.data = self.pointer or None
        t.device = _Device(*self.device)
        t.ndim = len(self.shape)
        code, bits = _FROM_TUTTI[self.dtype]
        t.dtype = _DataType(code, bits, 1)
        t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
        t.strides = None
        t.byte_offset = 0
        managed.deleter = _delete
        address = ctypes.addressof(managed)
        _exported[address] = (managed, shape, self)
        return _api.PyCapsule_New(address, b"dltensor", _capsule_gone)

