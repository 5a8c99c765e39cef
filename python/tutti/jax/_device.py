"""tutti.jax's device hooks (tutti/_arrays.py ArrayHooks): jax.Arrays on a GPU through DLPack,
zero-copy, results on the input's device.

JAX exposes no stream to order other work after, so the order is kept through the legacy default
stream and the host:
- inputs: `x.__dlpack__(stream=1)` makes JAX's device wait, on the legacy default stream, for
  the buffer's definition; the collective is ordered after that stream (no host wait);
- outputs of allreduce and broadcast: new jax.Arrays the library writes (their zero fill made
  ready on the legacy stream the same way). JAX thinks them ready once filled, so a wait holds
  the host until the collective's device work finished (`host_waits`) before they are handed out;
- request-owned results (allgather, reducescatter, alltoall): imported with
  `jax.dlpack.from_dlpack` and copied into a jax.Array, waited for before the request is freed.
Under `jax.jit` the arrays are traced and the collectives run as ordered host callbacks instead
(tutti/jax/ops.py). Two ranks on one GPU need `XLA_PYTHON_CLIENT_PREALLOCATE=false`: otherwise
the first process takes most of the GPU's memory.
"""
import jax
import jax.numpy as jnp

from tutti import _arrays, _dlpack, _dtypes
from tutti.errors import UnsupportedError

# DLPack's number for CUDA's legacy default stream (0 is not allowed there).
_LEGACY_STREAM = 1


def _dtype(code):
    return _dtypes.numpy_dtype(code)


class JaxHooks(_arrays.ArrayHooks):
    host_waits = True  # JAX has no stream to order after: see the module's docstring

    def __init__(self, platform="gpu"):
        # JAX's platform of the devices, and their DLPack type (CUDA; the CPU only in tests,
        # which run these hooks' JAX calls on a machine without a GPU).
        self.platform = platform
        self.dlpack_type = _dlpack.CUDA if platform == "gpu" else _dlpack.CPU

    def _device(self, index):
        """The jax.Device numbered `index` (for a GPU: as this process numbers its visible
        CUDA devices)."""
        for device in jax.local_devices():
            if device.platform == self.platform and device.local_hardware_id == index:
                return device
        raise UnsupportedError(f"JAX has no {self.platform} device numbered {index} in this "
                               "process")

    def stream(self, device_index):
        return 0  # the legacy default stream

    def export_stream(self, device_index):
        # JAX's CPU arrays take no stream (their definition is awaited on the host).
        return _LEGACY_STREAM if self.dlpack_type == _dlpack.CUDA else None

    def _address(self, array, device_index):
        """The address of a new jax.Array, its definition ready on the legacy stream."""
        return _dlpack.describe(array, self.export_stream(device_index), "result").pointer

    def empty(self, dtype, shape, device_index):
        array = jnp.zeros(shape, _dtype(dtype), device=self._device(device_index))
        return array, self._address(array, device_index)

    def copy(self, value, device_index):
        array = jnp.array(value, copy=True)
        return array, self._address(array, device_index)

    def copy_result(self, dtype, shape, pointer, device_index):
        if not pointer:  # an empty result has no memory to import
            return jnp.zeros(shape, _dtype(dtype), device=self._device(device_index))
        view = _dlpack.View(pointer, dtype, shape, (self.dlpack_type, device_index))
        copy = jnp.array(jax.dlpack.from_dlpack(view), copy=True)
        return copy.block_until_ready()  # the request, and its memory, is freed next


HOOKS = JaxHooks()
