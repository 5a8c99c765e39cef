"""MPI mode from Python (docs/launchers.md): libtutti_mpi.so through ctypes, with mpi4py's
communicators. Loaded on first use, so that tutti imports without MPI or mpi4py."""
import ctypes
import os

from . import _capi
from .errors import UnsupportedError

_lib = None


def _mpi():
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise UnsupportedError(f"MPI mode needs mpi4py (Debian: python3-mpi4py): {e}", -16) from None
    return MPI


def _comm_type():
    MPI = _mpi()
    # MPI_Comm is a pointer in Open MPI, an int in MPICH.
    return ctypes.c_void_p if MPI._sizeof(MPI.Comm) == ctypes.sizeof(ctypes.c_void_p) else ctypes.c_int


def lib():
    """libtutti_mpi.so: TUTTI_MPI_LIBRARY, else beside the libtutti that was loaded."""
    global _lib
    if _lib is not None:
        return _lib
    _mpi()  # libmpi first, as mpi4py loads it
    here = os.path.dirname(_capi.library_path)
    candidates = [os.environ.get("TUTTI_MPI_LIBRARY")] if os.environ.get("TUTTI_MPI_LIBRARY") else []
    candidates += [os.path.join(here, "libtutti_mpi.so.0"), os.path.join(here, "libtutti_mpi.so"),
                   "libtutti_mpi.so.0"]
    tried = []
    for path in candidates:
        try:
            loaded = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            break
        except OSError as e:
            tried.append(f"{path} ({e})")
    else:
        raise UnsupportedError("MPI mode needs libtutti_mpi.so (built where CMake finds an MPI); "
                               "tried: " + "; ".join(tried), -16)
    comm = _comm_type()
    status = ctypes.c_int32
    runtime = ctypes.c_void_p
    for name, args in (
            ("tutti_mpi_init", [comm, ctypes.POINTER(_capi.InitOptions), ctypes.POINTER(runtime)]),
            ("tutti_mpi_finalize", [runtime]),
            ("tutti_process_set_from_comm", [runtime, comm, ctypes.c_int64,
                                             ctypes.POINTER(ctypes.c_int32)]),
            ("tutti_process_set_comm", [runtime, ctypes.c_int32, ctypes.POINTER(comm)])):
        function = getattr(loaded, name)
        function.argtypes = args
        function.restype = status
    _lib = loaded
    return _lib


def is_comm(value):
    """Whether `value` is an mpi4py communicator (without importing mpi4py when it is not)."""
    module = type(value).__module__ or ""
    if not module.startswith("mpi4py"):
        return False
    return isinstance(value, _mpi().Comm)


def handle(comm):
    """The C handle of an mpi4py communicator (MPI_COMM_NULL for None)."""
    MPI = _mpi()
    return MPI._handleof(MPI.COMM_NULL if comm is None else comm)


def from_handle(value):
    """An mpi4py Intracomm wrapping the C handle `value` (the caller frees it)."""
    MPI = _mpi()
    comm = MPI.Intracomm()
    _comm_type().from_address(MPI._addressof(comm)).value = value
    return comm
