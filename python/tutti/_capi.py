"""libtutti.so through ctypes: the loader, the C structs of tutti.h and the function prototypes.

Nothing here knows about NumPy or PyTorch; it mirrors tutti.h (docs/abi-policy.md): struct
layouts are only ever appended to, and every struct starts with its size.
"""
import ctypes
import ctypes.util
import os
import sys

# ---- values of tutti.h (they never change) ------------------------------------------------------
OK = 0
IN_PROGRESS = 1

DTYPE_FLOAT16, DTYPE_BFLOAT16, DTYPE_FLOAT32, DTYPE_FLOAT64 = 1, 2, 3, 4
DTYPE_INT8, DTYPE_UINT8, DTYPE_INT32, DTYPE_INT64 = 5, 6, 7, 8
DTYPE_INT16, DTYPE_BOOL = 9, 10  # ABI 0.5

OP_SUM, OP_AVERAGE, OP_MIN, OP_MAX, OP_PRODUCT = 1, 2, 3, 4, 5
(COMPRESSION_NONE, COMPRESSION_FP16, COMPRESSION_BF16, COMPRESSION_TOPK,
 COMPRESSION_ADAPTIVE) = 0, 1, 2, 3, 4

DEVICE_CPU, DEVICE_CUDA = 0, 1
WORLD = 0
MAX_DIMS = 16

c_int32_p = ctypes.POINTER(ctypes.c_int32)
c_int64_p = ctypes.POINTER(ctypes.c_int64)


class Tensor(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("shape", c_int64_p),
        ("device_type", ctypes.c_int32),
        ("device_index", ctypes.c_int32),
        ("stream", ctypes.c_void_p),
    ]


ALLOCATE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
DEALLOCATE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)


class InitOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("header_version", ctypes.c_int32),
        ("coordinator", ctypes.c_char_p),
        ("job", ctypes.c_char_p),
        ("token", ctypes.c_char_p),
        ("rank", ctypes.c_int32),
        ("size", ctypes.c_int32),
        ("num_static_sets", ctypes.c_int32),
        ("static_set_sizes", c_int32_p),
        ("static_set_ranks", c_int32_p),
        ("timeout_ms", ctypes.c_int64),
        ("allocate", ctypes.c_void_p),
        ("deallocate", ctypes.c_void_p),
        ("allocator_user", ctypes.c_void_p),
        ("fusion_threshold_bytes", ctypes.c_int64),
        ("cycle_time_ms", ctypes.c_double),
        ("cache_capacity", ctypes.c_int32),
        ("stall_warning_seconds", ctypes.c_double),
        ("stall_shutdown_seconds", ctypes.c_double),
        ("timeline_path", ctypes.c_char_p),
        ("transport", ctypes.c_char_p),
    ]


class AllreduceOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("reduce_op", ctypes.c_int32),
        ("prescale_factor", ctypes.c_double),
        ("postscale_factor", ctypes.c_double),
        ("priority", ctypes.c_int32),
        # Since 0.12: library compression (docs/compression.md).
        ("compression", ctypes.c_int32),
        ("compression_ratio", ctypes.c_double),
        ("adaptive_compressor", ctypes.c_int32),
        ("adaptive_interval", ctypes.c_int32),
        ("adaptive_min_bytes", ctypes.c_int64),
        ("adaptive_max_change", ctypes.c_double),
    ]


class Counters(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t)] + [
        (name, ctypes.c_uint64)
        for name in ("announce_messages", "announce_bytes", "tensors_announced",
                     "tensors_announced_cached", "execute_messages", "execute_bytes",
                     "collectives", "tensors_executed", "tensors_fused", "fast_path_rounds",
                     "fast_path_tensors")
    ]


class CoordinatorCounters(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t)] + [
        (name, ctypes.c_uint64)
        for name in ("announce_messages", "announce_bytes", "tensors_announced",
                     "tensors_announced_cached", "execute_messages", "collectives_released",
                     "tensors_released", "tensors_fused", "cache_evictions", "stall_warnings",
                     "stalls_failed")
    ]


class CoordinatorSetCounters(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("set_id", ctypes.c_int32)] + [
        (name, ctypes.c_uint64)
        for name in ("announcements", "tensors_announced", "tensors_announced_cached",
                     "fast_path_grants", "fast_path_exits", "announcements_dropped",
                     "fast_path_rounds")
    ]


class SetCounters(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("set_id", ctypes.c_int32)] + [
        (name, ctypes.c_uint64)
        for name in ("collectives", "tensors", "tensors_fused", "bytes", "wait_ns",
                     "execute_ns", "tensors_compressed", "adaptive_revisits",
                     "adaptive_compress_choices")
    ]


class PeerStats(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("transport", ctypes.c_int32),
        ("connected", ctypes.c_int32),
        ("bytes_sent", ctypes.c_uint64),
        ("bytes_received", ctypes.c_uint64),
    ]


def _candidates():
    """Where the library may be, in the order tried."""
    env = os.environ.get("TUTTI_LIBRARY")
    if env:
        yield env
    here = os.path.dirname(os.path.abspath(__file__))
    for name in ("libtutti.so.0", "libtutti.so"):
        yield os.path.join(here, name)
    # Installed by `cmake --install` (docs/install.md): the libdir it wrote next to this package.
    try:
        from ._install_paths import LIBDIR
        yield os.path.join(LIBDIR, "libtutti.so.0")
    except ImportError:
        pass
    # Used from a source checkout: python/tutti -> build/ (the README's build directory).
    checkout = os.path.dirname(os.path.dirname(here))
    for build in ("build", "build-asan"):
        yield os.path.join(checkout, build, "libtutti.so")
    found = ctypes.util.find_library("tutti")
    yield found or "libtutti.so.0"


def _load_mode():
    """RTLD_DEEPBIND when TensorFlow is already loaded: its libtensorflow_framework exports its
    own google::protobuf globally, which would otherwise bind libtutti's calls into Debian's
    libprotobuf-lite to a different protobuf (a crash in tutti_init). DEEPBIND makes libtutti and
    its dependencies prefer their own symbols. Only then: sanitizer runtimes refuse DEEPBIND."""
    if "tensorflow" in sys.modules and hasattr(os, "RTLD_DEEPBIND"):
        return ctypes.DEFAULT_MODE | os.RTLD_DEEPBIND
    return ctypes.DEFAULT_MODE


def load():
    tried = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path, mode=_load_mode()), path
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise ImportError("cannot load libtutti: set TUTTI_LIBRARY to its path, or build it "
                      "(build/libtutti.so). Tried: " + "; ".join(tried))


lib, library_path = load()

_runtime = ctypes.c_void_p
_request = ctypes.c_void_p
_status = ctypes.c_int32
_TP = ctypes.POINTER(Tensor)


def _declare(name, *argtypes, restype=_status):
    function = getattr(lib, name)
    function.argtypes = list(argtypes)
    function.restype = restype
    return function


def _declare_since(version, name, *argtypes, restype=_status):
    """A function added in ABI `version`: a library built before it still loads (so that the
    CPU API keeps working), and calling the missing function says what to do."""
    try:
        return _declare(name, *argtypes, restype=restype)
    except AttributeError:
        def missing(*args):
            raise NotImplementedError(f"{library_path} has no {name}: it predates tutti ABI "
                                      f"{version}; rebuild or update libtutti")
        missing.__name__ = name
        return missing


tutti_init = _declare("tutti_init", ctypes.POINTER(InitOptions), ctypes.POINTER(_runtime))
tutti_finalize = _declare("tutti_finalize", _runtime)
tutti_abort = _declare("tutti_abort", _runtime)
tutti_get_version = _declare("tutti_get_version", c_int32_p)
tutti_status_string = _declare("tutti_status_string", _status, restype=ctypes.c_char_p)
tutti_last_error = _declare("tutti_last_error", restype=ctypes.c_char_p)
for _name in ("rank", "size", "local_rank", "local_size", "cross_rank", "cross_size"):
    globals()["tutti_" + _name] = _declare("tutti_" + _name, _runtime, c_int32_p)
tutti_process_set_add = _declare("tutti_process_set_add", _runtime, c_int32_p, ctypes.c_int32,
                                 ctypes.c_int64, c_int32_p)
tutti_process_set_remove = _declare("tutti_process_set_remove", _runtime, ctypes.c_int32,
                                    ctypes.c_int64)
tutti_process_set_autotune = _declare("tutti_process_set_autotune", _runtime, ctypes.c_int32)
tutti_process_set_size = _declare("tutti_process_set_size", _runtime, ctypes.c_int32, c_int32_p)
tutti_process_set_ranks = _declare("tutti_process_set_ranks", _runtime, ctypes.c_int32, c_int32_p,
                                   ctypes.c_int32, c_int32_p)
tutti_process_set_included = _declare("tutti_process_set_included", _runtime, ctypes.c_int32,
                                      c_int32_p)
tutti_process_set_rank = _declare("tutti_process_set_rank", _runtime, ctypes.c_int32, c_int32_p)
tutti_allreduce = _declare("tutti_allreduce", _runtime, ctypes.c_char_p, ctypes.c_int32, _TP, _TP,
                           ctypes.POINTER(AllreduceOptions), ctypes.POINTER(_request))
tutti_broadcast = _declare("tutti_broadcast", _runtime, ctypes.c_char_p, ctypes.c_int32, _TP,
                           ctypes.c_int32, ctypes.POINTER(_request))
tutti_allgather = _declare("tutti_allgather", _runtime, ctypes.c_char_p, ctypes.c_int32, _TP,
                           ctypes.POINTER(_request))
tutti_reducescatter = _declare("tutti_reducescatter", _runtime, ctypes.c_char_p, ctypes.c_int32,
                               _TP, ctypes.POINTER(AllreduceOptions), ctypes.POINTER(_request))
tutti_alltoall = _declare("tutti_alltoall", _runtime, ctypes.c_char_p, ctypes.c_int32, _TP,
                          c_int64_p, ctypes.c_int32, ctypes.POINTER(_request))
tutti_send = _declare("tutti_send", _runtime, ctypes.c_int32, _TP, ctypes.c_int32, ctypes.c_int32,
                      ctypes.POINTER(_request))
tutti_recv = _declare("tutti_recv", _runtime, ctypes.c_int32, _TP, ctypes.c_int32, ctypes.c_int32,
                      ctypes.POINTER(_request))
tutti_grouped_allreduce = _declare("tutti_grouped_allreduce", _runtime, ctypes.c_char_p,
                                   ctypes.c_int32, ctypes.c_int32, _TP, _TP,
                                   ctypes.POINTER(AllreduceOptions), ctypes.POINTER(_request))
tutti_grouped_allgather = _declare("tutti_grouped_allgather", _runtime, ctypes.c_char_p,
                                   ctypes.c_int32, ctypes.c_int32, _TP, ctypes.POINTER(_request))
tutti_join = _declare("tutti_join", _runtime, ctypes.c_int32, ctypes.c_int64, c_int32_p)
tutti_barrier = _declare("tutti_barrier", _runtime, ctypes.c_int32, ctypes.POINTER(_request))
tutti_request_test = _declare("tutti_request_test", _request)
tutti_request_wait = _declare("tutti_request_wait", _request, ctypes.c_int64)
tutti_request_output = _declare("tutti_request_output", _request, _TP)
tutti_request_output_at = _declare("tutti_request_output_at", _request, ctypes.c_int32, _TP)
tutti_request_received_splits = _declare("tutti_request_received_splits", _request, c_int64_p,
                                         ctypes.c_int32, c_int32_p)
tutti_request_free = _declare("tutti_request_free", _request)
# ABI 0.4 (device tensors).
tutti_request_stream_wait = _declare_since("0.4", "tutti_request_stream_wait", _request,
                                           ctypes.c_void_p, ctypes.c_int64)
tutti_device_check = _declare_since("0.4", "tutti_device_check", ctypes.c_int32, ctypes.c_int32)
tutti_nccl_version = _declare_since("0.5", "tutti_nccl_version", c_int32_p)
# ABI 0.6 (elastic jobs).
tutti_membership_epoch = _declare_since("0.6", "tutti_membership_epoch", _runtime,
                                        ctypes.POINTER(ctypes.c_uint64))
tutti_await_membership_epoch = _declare_since("0.6", "tutti_await_membership_epoch", _runtime,
                                              ctypes.c_uint64, ctypes.c_int64,
                                              ctypes.POINTER(ctypes.c_uint64))
# ABI 0.7 (ranks added to elastic jobs).
tutti_ranks_waiting = _declare_since("0.7", "tutti_ranks_waiting", _runtime, c_int32_p)
# ABI 0.8 (the members' fast path).
tutti_get_coordinator_set_counters = _declare_since(
    "0.8", "tutti_get_coordinator_set_counters", _runtime, ctypes.c_int32,
    ctypes.POINTER(CoordinatorSetCounters))
tutti_get_counters = _declare("tutti_get_counters", _runtime, ctypes.POINTER(Counters))
tutti_get_coordinator_counters = _declare("tutti_get_coordinator_counters", _runtime,
                                          ctypes.POINTER(CoordinatorCounters))
tutti_get_peer_stats = _declare("tutti_get_peer_stats", _runtime, ctypes.c_int32, ctypes.c_int32,
                                ctypes.POINTER(PeerStats))
tutti_get_set_counters = _declare_since("0.11", "tutti_get_set_counters", _runtime, ctypes.c_int32,
                                        ctypes.POINTER(SetCounters))
tutti_timeline_start = _declare("tutti_timeline_start", _runtime, ctypes.c_char_p)
tutti_timeline_stop = _declare("tutti_timeline_stop", _runtime)


def version():
    v = ctypes.c_int32()
    tutti_get_version(ctypes.byref(v))
    return v.value
