"""tutti.jax on jax.Arrays of a GPU (run by tests/frameworks/test_jax_gpu.py, on the GPU machine
only): every collective eagerly (DLPack, zero-copy, results on the input's GPU) and inside
jax.jit (ordered host callbacks), JAX's queued work seen before the collective, and the time of a
64 MiB allreduce both ways (printed, never asserted). Every rank uses its local GPU modulo the
device count, so 2 ranks on a one-GPU machine share it (XLA_PYTHON_CLIENT_PREALLOCATE=false).
Each check prints "ok <name>" or "fail <name>: detail"."""
import time

import jax
import jax.numpy as jnp
import numpy as np

import tutti.jax as hvd

hvd.init()
rank, size = hvd.rank(), hvd.size()
gpus = jax.local_devices(backend="gpu")
gpu = gpus[hvd.local_rank() % len(gpus)]


def check(name, condition, detail=""):
    print(f"{'ok' if condition else 'fail'} {name}{'' if condition else ': ' + str(detail)}",
          flush=True)


def on_gpu(array):
    return array.devices() == {gpu}


def put(value):
    return jax.device_put(jnp.asarray(value), gpu)


def same(got, want):
    return on_gpu(got) and np.array_equal(np.asarray(got), np.asarray(want))


for dtype in (jnp.float32, jnp.float16, jnp.bfloat16, jnp.int32, jnp.int8, jnp.uint8):
    mine = put(jnp.arange(6, dtype=dtype).reshape(2, 3) + rank)
    want = sum(np.arange(6).reshape(2, 3) + r for r in range(size)).astype(dtype)
    got = hvd.allreduce(mine, op=hvd.Sum, name=f"allreduce.{jnp.dtype(dtype).name}")
    check(f"allreduce_{jnp.dtype(dtype).name}", same(got, want), got)

tree = {"w": put(jnp.ones((4, 4))), "b": put(jnp.full(3, rank, jnp.int32))}
got = hvd.grouped_allreduce(tree, op=hvd.Sum, name="grouped")
check("grouped_allreduce", same(got["w"], np.full((4, 4), size)) and
      same(got["b"], np.full(3, sum(range(size)))), got)

got = hvd.broadcast(put(jnp.full(5, float(rank))), size - 1, name="broadcast")
check("broadcast", same(got, np.full(5, size - 1.0)), got)

got = hvd.allgather(put(jnp.full((rank + 1, 2), rank, jnp.int32)), name="allgather")
check("allgather_uneven", same(got, np.concatenate(
    [np.full((r + 1, 2), r, np.int32) for r in range(size)])), got)

got = hvd.reducescatter(put(jnp.ones((2 * size, 3))), op=hvd.Sum, name="reducescatter")
check("reducescatter", same(got, np.full((2, 3), float(size))), got)

got, received = hvd.alltoall(put(jnp.arange(size, dtype=jnp.int32) + 10 * rank),
                             splits=[1] * size, name="alltoall")
check("alltoall", same(got, np.array([10 * r + rank for r in range(size)], np.int32)) and
      np.asarray(received).tolist() == [1] * size, (got, received))

# JAX's queued work is seen: a long computation feeds the collective directly.
big = put(jnp.full((2048, 2048), 1.0 + rank))
produced = (big @ big.T) / 2048.0
got = hvd.allreduce(produced, op=hvd.Sum, name="after JAX's work")
want = sum((1.0 + r) ** 2 for r in range(size))
check("producer_order", on_gpu(got) and np.allclose(np.asarray(got), want), np.asarray(got)[0, :3])

# Inside jit: ordered host callbacks, the results back on the GPU.
step = jax.jit(lambda x: hvd.allreduce(x * 2, op=hvd.Sum, name="jitted"))
got = step(put(jnp.ones(8)))
check("jit_allreduce", same(got, np.full(8, 2.0 * size)), got)

# 64 MiB of float32, eagerly (on the device) and inside jit (staged through the host).
payload = put(jnp.ones(16 << 20, jnp.float32))
timed = jax.jit(lambda x: hvd.allreduce(x, op=hvd.Sum, name="timed jit"))
for label, run in (("eager", lambda: hvd.allreduce(payload, op=hvd.Sum, name="timed eager")),
                   ("jit", lambda: timed(payload))):
    run().block_until_ready()  # warm up (and compile)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        run().block_until_ready()
        times.append(time.perf_counter() - start)
    print(f"time allreduce 64MiB {label} ranks={size} median_ms={np.median(times) * 1e3:.2f}",
          flush=True)
hvd.shutdown()
