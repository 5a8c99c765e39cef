"""tutti.torch on CUDA tensors (docs/python.md, "CUDA tensors"): results stay on the device and
are right once synchronize() returned on the current stream. Each section named on the command
line prints "cuda <section> ok"; all of them by default.

TUTTI_TEST_DEVICE=cpu runs the same checks on CPU tensors (the stream-specific parts skipped): it
keeps this script honest on machines without a GPU."""
import gc
import os
import sys

import torch

import tutti
import tutti.torch as hvd

hvd.init()
rank, size = hvd.rank(), hvd.size()
ON_GPU = os.environ.get("TUTTI_TEST_DEVICE", "cuda") == "cuda"
if ON_GPU:
    tutti.device_check("cuda", hvd.local_rank() % torch.cuda.device_count())
    device = torch.device("cuda", hvd.local_rank() % torch.cuda.device_count())
    torch.cuda.set_device(device)
else:
    device = torch.device("cpu")


def on_device(tensor):
    assert tensor.device == device, (tensor.device, device)
    return tensor


def host(tensor):
    """The tensor's values, read on the current stream (as a user would)."""
    return on_device(tensor).cpu()


def expect_equal(got, expected):
    torch.testing.assert_close(host(got), expected.cpu())


def allreduce():
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.int64):
        mine = torch.arange(6, device=device).reshape(2, 3).to(dtype) + rank
        total = sum(torch.arange(6).reshape(2, 3).to(dtype) + r for r in range(size))
        got = hvd.allreduce(mine, op=hvd.Sum, name=f"sum.{dtype}")
        assert got.dtype == dtype
        expect_equal(got, total)
        if dtype.is_floating_point:
            expect_equal(hvd.allreduce(mine, name=f"average.{dtype}"), total / size)
    t = torch.full((1000,), float(rank + 1), device=device)
    assert hvd.allreduce_(t, op=hvd.Sum, name="in-place") is t
    expect_equal(t, torch.full((1000,), size * (size + 1) / 2))
    wide = torch.zeros(4, 6, device=device)
    view = wide[:, ::2]
    view += rank + 1
    hvd.allreduce_(view, op=hvd.Sum, name="strided")
    assert float(wide[0, 0]) == size * (size + 1) / 2 and float(wide[0, 1]) == 0
    expect_equal(hvd.allreduce(torch.ones(3, device=device), op=hvd.Sum, prescale_factor=0.5,
                               postscale_factor=4.0, name="scaled"), torch.full((3,), 2.0 * size))
    a, b = hvd.grouped_allreduce([torch.ones(2, device=device), torch.ones(3, device=device) * 2],
                                 op=hvd.Sum, name="grouped")
    expect_equal(a, torch.full((2,), float(size)))
    expect_equal(b, torch.full((3,), 2.0 * size))
    group = [torch.ones(2, device=device), torch.ones(5, device=device)]
    hvd.grouped_allreduce_(group, op=hvd.Sum, name="grouped-in-place")
    expect_equal(group[1], torch.full((5,), float(size)))
    x = torch.full((2,), float(rank + 1), device=device, requires_grad=True)
    hvd.allreduce(x, op=hvd.Sum, name="autograd").sum().backward()
    expect_equal(x.grad, torch.full((2,), float(size)))
    if ON_GPU:
        try:
            hvd.grouped_allreduce([torch.ones(2, device=device), torch.ones(2)], name="mixed")
        except RuntimeError as e:  # Horovod's class; tutti's is a ValueError too
            assert isinstance(e, ValueError) and isinstance(e, tutti.MixedDevicesError), e
            assert "same device" in str(e), e
        else:
            raise AssertionError("tensors on two devices in one call did not raise")


def broadcast():
    b = torch.full((3, 2), float(rank), device=device)
    got = hvd.broadcast(b, root_rank=size - 1, name="copy")
    expect_equal(got, torch.full((3, 2), float(size - 1)))
    expect_equal(b, torch.full((3, 2), float(rank)))  # broadcast (not broadcast_) copies
    assert hvd.broadcast_(b, root_rank=0, name="in-place") is b
    expect_equal(b, torch.zeros(3, 2))
    model = torch.nn.Linear(3, 2).to(device)
    torch.nn.init.constant_(model.weight, float(rank))
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    expect_equal(model.weight.detach(), torch.zeros(2, 3))


def allgather():
    got = hvd.allgather(torch.full((rank + 1, 3), rank, dtype=torch.int64, device=device),
                        name="ragged")
    rows = [r for r in range(size) for _ in range(r + 1)]
    expect_equal(got, torch.tensor(rows).unsqueeze(1).expand(-1, 3))
    half = hvd.allgather(torch.full((2,), rank + 0.5, dtype=torch.float16, device=device),
                         name="half")
    expect_equal(half, torch.tensor([r + 0.5 for r in range(size) for _ in range(2)],
                                    dtype=torch.float16))
    brain = hvd.allgather(torch.full((1, 2), rank + 1.0, dtype=torch.bfloat16, device=device),
                          name="bfloat16")
    assert brain.dtype == torch.bfloat16
    expect_equal(brain, torch.tensor([[r + 1.0] * 2 for r in range(size)], dtype=torch.bfloat16))
    empty = hvd.allgather(torch.zeros(0, 4, device=device), name="empty")
    assert host(empty).shape == (0, 4)
    x, y = hvd.grouped_allgather([torch.tensor([rank], device=device),
                                  torch.full((rank + 1, 2), rank, device=device)], name="grouped")
    expect_equal(x, torch.arange(size))
    assert host(y).shape == (size * (size + 1) // 2, 2)
    rows = hvd.reducescatter(torch.ones(2 * size, 3, device=device), op=hvd.Sum, name="rs")
    expect_equal(rows, torch.full((2, 3), float(size)))
    received = hvd.alltoall(torch.arange(2 * size, device=device) + 100 * rank, name="a2a")
    expect_equal(received, torch.tensor([100 * r + 2 * rank + k for r in range(size)
                                         for k in range(2)]))
    out, splits = hvd.alltoall(torch.full((size,), rank, device=device), splits=[1] * size,
                               name="a2a-splits")
    expect_equal(out, torch.arange(size))
    assert splits.tolist() == [1] * size
    assert splits.device == device and splits.dtype == torch.int32  # Horovod: the input's device
    x = torch.ones(rank + 1, 2, device=device, requires_grad=True)
    gathered = hvd.allgather(x, name="autograd")
    gathered.sum().backward()
    expect_equal(x.grad, torch.full((rank + 1, 2), 1.0))  # averaged over the set, as Horovod


def synchronize():
    n = 1 << 20
    handles = [hvd.allreduce_async(torch.full((n,), float(rank + i), device=device), op=hvd.Sum,
                                   name=f"async.{i}") for i in range(4)]
    gathered = hvd.allgather_async(torch.full((2, 2), rank, device=device), name="async.gather")
    in_place = torch.full((n,), float(rank), device=device)
    inplace_handle = hvd.allreduce_async_(in_place, op=hvd.Sum, name="async.in-place")
    dropped = hvd.allreduce_async_(torch.ones(n, device=device), name="async.dropped")
    gc.collect()  # the tensor's last reference is the handle's
    for i, h in enumerate(handles):
        got = hvd.synchronize(h)
        # Read on the current stream right away: synchronize() ordered it after the transfer.
        assert float(got[0]) == float(got[-1]) == sum(r + i for r in range(size)), (i, got[0])
    expect_equal(hvd.synchronize(gathered), torch.tensor([[r, r] for r in range(size)
                                                           for _ in range(2)]))
    assert hvd.synchronize(inplace_handle) is in_place
    assert float(in_place[-1]) == size * (size - 1) / 2
    expect_equal(hvd.synchronize(dropped)[:3], torch.ones(3))
    polled = hvd.allreduce_async(torch.ones(5, device=device), op=hvd.Sum, name="polled")
    while not hvd.poll(polled):
        pass
    expect_equal(hvd.synchronize(polled), torch.full((5,), float(size)))
    if rank == 0:
        hvd.send(torch.arange(4, dtype=torch.float32, device=device), 1, tag=3)
    elif rank == 1:
        target = torch.zeros(4, device=device)
        assert hvd.recv(target, 0, tag=3) is target
        expect_equal(target, torch.arange(4, dtype=torch.float32))


def horovod_semantics():
    """What Horovod's test_torch.py expects of GPU tensors that tutti once did differently."""
    # float16 is scaled in float16 on the GPU (the factor made a half, one rounding) and in float32
    # on the CPU; integers in float64 on both (test_horovod_allreduce_prescale and _postscale).
    for dtype in (torch.float16, torch.int32, torch.float32):
        tensor = torch.full((4,), 3, dtype=dtype, device=device)
        factor = torch.tensor(0.1, dtype=torch.float64)
        if dtype == torch.float16 and not ON_GPU:
            scaled = (tensor.float() * factor.float()).to(dtype)
        elif dtype.is_floating_point:
            scaled = tensor * factor.to(dtype).to(device)
        else:
            scaled = (tensor.double() * factor.to(device)).to(dtype)
        expected = (scaled * size).cpu()
        got = hvd.allreduce(tensor, op=hvd.Sum, prescale_factor=0.1, name=f"prescale.{dtype}")
        assert torch.equal(host(got), expected), (dtype, got, expected)
        summed = (tensor * size).cpu()
        if dtype == torch.float16 and not ON_GPU:
            expected = (summed.float() * factor.float()).to(dtype)
        elif dtype.is_floating_point:
            expected = summed * factor.to(dtype)
        else:
            expected = (summed.double() * factor).to(dtype)
        got = hvd.allreduce(tensor, op=hvd.Sum, postscale_factor=0.1, name=f"postscale.{dtype}")
        assert torch.equal(host(got), expected), (dtype, got, expected)
    if not ON_GPU or size < 2:
        return
    # One name on the CPU on rank 0 and the GPU on the others: refused on every rank with one
    # message (test_horovod_allreduce_cpu_gpu_error catches RuntimeError).
    mixed = torch.ones(3) if rank == 0 else torch.ones(3, device=device)
    try:
        hvd.allreduce(mixed, name="cpu-gpu")
    except RuntimeError as e:
        assert isinstance(e, tutti.MismatchError), e
        assert str(e).startswith("mismatched CPU/GPU device selection for 'cpu-gpu' on process set "
                                 f"0: rank 0 has it on the CPU, rank 1 on cuda:"), e
    else:
        raise AssertionError("a name on the CPU and the GPU did not raise")


def adasum():
    """Adasum of device tensors equals the Adasum tree of every rank's vector."""
    from tutti.torch.adasum import tree
    if size & (size - 1):
        return
    vectors = [torch.arange(64, dtype=torch.float64) * (r + 1) - 3 * r for r in range(size)]
    got = hvd.allreduce(vectors[rank].to(device=device, dtype=torch.float32), op=hvd.Adasum,
                        name="adasum")
    assert got.dtype == torch.float32
    torch.testing.assert_close(host(got), tree(vectors).to(torch.float32))


def side_stream():
    if not ON_GPU:
        return
    side = torch.cuda.Stream(device)
    n = 1 << 22
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # the producer is slow: the library must wait for it
        x = torch.full((n,), float(rank + 1), device=device)
        handle = hvd.allreduce_async(x, op=hvd.Sum, name="side.async")
        y = torch.full((n,), float(rank + 1), device=device)
        torch.cuda._sleep(100_000_000)
        y.mul_(2)
        got_y = hvd.allreduce(y, op=hvd.Sum, name="side.sync")
        got_x = hvd.synchronize(handle)  # the side stream (current here) waits for both
        assert float(got_x[-1]) == size * (size + 1) / 2, float(got_x[-1])
        assert float(got_y[-1]) == size * (size + 1), float(got_y[-1])
    # Produced on the side stream, reduced and consumed on the default stream.
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)
        z = torch.full((n,), float(rank), device=device)
    torch.cuda.current_stream(device).wait_stream(side)
    z.record_stream(torch.cuda.current_stream(device))
    got = hvd.allreduce(z, op=hvd.Sum, name="side.default")
    assert float(got.sum()) == n * size * (size - 1) / 2


SECTIONS = {f.__name__: f for f in (allreduce, broadcast, allgather, synchronize,
                                    horovod_semantics, adasum, side_stream)}
for section in sys.argv[1:] or list(SECTIONS):
    SECTIONS[section]()
    hvd.barrier()
    print(f"cuda {section} ok", flush=True)
hvd.shutdown()
