"""tutti.tensorflow's device hooks (tutti/_arrays.py ArrayHooks): eager tf.Tensors on a GPU
through DLPack, zero-copy, results on the input's GPU.

TensorFlow exposes no stream and its `__dlpack__` takes none, so the order is kept on the host:
before a tensor is exported, and after each result is made, the hooks wait for the work TF has
queued (`tf.test.experimental.sync_devices()`); a wait holds the host until the collective's
device work finished (`host_waits`), so that TF may read the results from any stream. Outputs of
allreduce and broadcast are new tensors TF allocated (tf.zeros, or a DeepCopy of the input) that
the library writes before handing them out; request-owned results (allgather, reducescatter,
alltoall) are imported with `tf.experimental.dlpack.from_dlpack` and deep-copied. "/GPU:i" is
CUDA device i of this process (TF's default numbering of its visible GPUs). Inside tf.function the
collectives run as py_functions on the CPU (tutti/tensorflow/ops.py): TF copies GPU tensors to the
host for them.
"""
import tensorflow as tf

from tutti import _arrays, _capi, _dlpack, _dtypes


def _tf_dtype(code):
    if code == _capi.DTYPE_BFLOAT16:
        return tf.bfloat16
    return tf.as_dtype(_dtypes.numpy_dtype(code))


def _ready():
    """Waits for the work TF has queued on its devices."""
    tf.test.experimental.sync_devices()


class TensorFlowHooks(_arrays.ArrayHooks):
    host_waits = True  # TensorFlow has no stream to order after: see the module's docstring

    def __init__(self, device_kind="GPU"):
        # TF's name of the devices, and their DLPack type (CUDA; the CPU only in tests, which
        # run these hooks' TF calls on a machine without a GPU).
        self.device_kind = device_kind
        self.dlpack_type = _dlpack.CUDA if device_kind == "GPU" else _dlpack.CPU

    def _device(self, index):
        return tf.device(f"/{self.device_kind}:{index}")

    def stream(self, device_index):
        return 0  # the legacy default stream, after the host wait below

    def export_stream(self, device_index):
        _ready()
        return None  # tf.Tensor.__dlpack__ refuses any stream

    def _made(self, tensor):
        _ready()
        return tensor, _dlpack.describe(tensor, None, "result").pointer

    def empty(self, dtype, shape, device_index):
        with self._device(device_index):
            return self._made(tf.zeros(shape, _tf_dtype(dtype)))

    def copy(self, value, device_index):
        with self._device(device_index):  # tf.identity may hand back the same buffer
            return self._made(tf.raw_ops.DeepCopy(x=value))

    def copy_result(self, dtype, shape, pointer, device_index):
        with self._device(device_index):
            if not pointer:  # an empty result has no memory to import
                return tf.zeros(shape, _tf_dtype(dtype))
            view = _dlpack.View(pointer, dtype, shape, (self.dlpack_type, device_index))
            result = tf.raw_ops.DeepCopy(x=tf.experimental.dlpack.from_dlpack(view.__dlpack__()))
        _ready()  # the request, and its memory, is freed next
        return result


HOOKS = TensorFlowHooks()
