"""tutti's element types and reduction ops as Python sees them: the one table between NumPy's
dtypes and the C ABI's (tutti.h TUTTI_DTYPE_*), element sizes, and the op constants every binding
re-exports. bfloat16 is NumPy's `ml_dtypes.bfloat16` (which JAX and TensorFlow install)."""
import numpy as np

from . import _capi
from .errors import InvalidArgumentError

Sum, Average, Min, Max, Product = (_capi.OP_SUM, _capi.OP_AVERAGE, _capi.OP_MIN, _capi.OP_MAX,
                                   _capi.OP_PRODUCT)

NUMPY_TO_TUTTI = {np.dtype(np.float16): _capi.DTYPE_FLOAT16,
                  np.dtype(np.float32): _capi.DTYPE_FLOAT32,
                  np.dtype(np.float64): _capi.DTYPE_FLOAT64,
                  np.dtype(np.int8): _capi.DTYPE_INT8, np.dtype(np.uint8): _capi.DTYPE_UINT8,
                  np.dtype(np.int32): _capi.DTYPE_INT32, np.dtype(np.int64): _capi.DTYPE_INT64,
                  np.dtype(np.int16): _capi.DTYPE_INT16, np.dtype(np.bool_): _capi.DTYPE_BOOL}
TUTTI_TO_NUMPY = {v: k for k, v in NUMPY_TO_TUTTI.items()}

ELEMENT_SIZE = {_capi.DTYPE_FLOAT16: 2, _capi.DTYPE_BFLOAT16: 2, _capi.DTYPE_FLOAT32: 4,
                _capi.DTYPE_FLOAT64: 8, _capi.DTYPE_INT8: 1, _capi.DTYPE_UINT8: 1,
                _capi.DTYPE_INT32: 4, _capi.DTYPE_INT64: 8, _capi.DTYPE_INT16: 2,
                _capi.DTYPE_BOOL: 1}


def bfloat16():
    """NumPy's bfloat16 type (ml_dtypes); None without it."""
    try:
        import ml_dtypes
    except ImportError:
        return None
    return np.dtype(ml_dtypes.bfloat16)


def dtype_code(array, what="array"):
    """The tutti dtype of a NumPy array; InvalidArgumentError (the NumPy API's message, with
    bfloat16 among the choices) for another."""
    code = NUMPY_TO_TUTTI.get(array.dtype)
    if code is None and array.dtype.name == "bfloat16":
        code = _capi.DTYPE_BFLOAT16
    if code is None:
        names = [str(d) for d in NUMPY_TO_TUTTI] + ["bfloat16"]
        raise InvalidArgumentError(f"{what} has dtype {array.dtype}, which tutti does not reduce; "
                                   f"use one of {', '.join(names)}")
    return code


def numpy_dtype(code):
    """The NumPy dtype of a tutti dtype."""
    if code == _capi.DTYPE_BFLOAT16:
        found = bfloat16()
        if found is None:
            raise InvalidArgumentError("a bfloat16 result needs ml_dtypes (pip install ml_dtypes)")
        return found
    return TUTTI_TO_NUMPY[code]


def new_array(dtype, shape):
    """An empty NumPy array of a tutti dtype, and its address (for results the library owns)."""
    array = np.empty(shape, numpy_dtype(dtype))
    return array, array.ctypes.data
