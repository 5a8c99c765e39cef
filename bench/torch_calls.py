"""What a PyTorch user pays per call: tutti.torch beside torch.distributed with Gloo, in one job
(the same ranks, CPU tensors and launch), interleaved repetitions, medians with min-max.

    tuttirun -np 2 python3 bench/torch_calls.py [--sizes 4K,64K,1M,16M,64M] [--reps 5]
        [--step 200] [--profile FILE]

Rows, per size: `allreduce_` (in place) and `allreduce` (out of place) of tutti.torch, Gloo's
in-place `all_reduce`; then the step of many small tensors as a training step submits them:
`--step` tensors of 4 KiB through `allreduce_async_` and one `synchronize` each (Gloo:
`all_reduce(async_op=True)`, then `wait`). A call's time is a batch of calls between barriers
divided by the batch. Rank 0 prints one line per row (`row name: tutti ... gloo ...`, in µs or
ms) and the CPU time per submitted tensor of the step (getrusage of the rank, both ranks summed
would double it). `--profile FILE`: rank 0 writes a cProfile of 2,000 in-place 4 KiB calls."""
import argparse
import os
import resource
import statistics
import tempfile
import time

import torch
import torch.distributed as dist

import tutti.torch as hvd


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def batch_for(nbytes):
    """Calls per timed batch: about 2 ms of work at least, capped for the largest sizes."""
    return max(1, min(500, (4 << 20) // max(nbytes, 1)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="4K,64K,1M,16M,64M")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--step", type=int, default=200)
    parser.add_argument("--profile", default=None)
    args = parser.parse_args()

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    store = os.path.join(tempfile.gettempdir(), f"tutti-torch-calls-{os.getppid()}")
    store = hvd.broadcast_object(store, root_rank=0)
    dist.init_process_group("gloo", store=dist.FileStore(store, size), rank=rank, world_size=size)

    def per_call(run, tensor, calls):
        hvd.barrier()
        start = time.perf_counter()
        for _ in range(calls):
            run(tensor)
        return (time.perf_counter() - start) / calls

    names = [f"calls.{i}" for i in range(args.step)]

    def tutti_step(tensors):
        handles = [hvd.allreduce_async_(t, op=hvd.Sum, name=n) for t, n in zip(tensors, names)]
        for handle in handles:
            hvd.synchronize(handle)

    def gloo_step(tensors):
        for work in [dist.all_reduce(t, async_op=True) for t in tensors]:
            work.wait()

    rows = []
    for nbytes in (parse_size(s) for s in args.sizes.split(",")):
        tensor = torch.ones(nbytes // 4, dtype=torch.float32)
        rows.append((f"{nbytes >> 10} KiB" if nbytes < (1 << 20) else f"{nbytes >> 20} MiB",
                     tensor, batch_for(nbytes), {
                         "allreduce_": lambda t: hvd.allreduce_(t, op=hvd.Sum, name="inplace"),
                         "allreduce": lambda t: hvd.allreduce(t, op=hvd.Sum, name="outofplace"),
                         "gloo": lambda t: dist.all_reduce(t)}))
    step_tensors = [torch.ones(1024, dtype=torch.float32) for _ in range(args.step)]
    rows.append((f"step {args.step} x 4 KiB", step_tensors, 5,
                 {"allreduce_async_": tutti_step, "gloo": gloo_step}))
    if rank == 0:
        print(f"tutti.torch beside torch.distributed/Gloo, CPU float32 tensors, {size} ranks, "
              f"{args.reps} interleaved repetitions (median, min-max)", flush=True)
    for label, tensor, calls, runs in rows:
        for run in runs.values():  # warm-up: connections, buffers, the coordinator's cache
            per_call(run, tensor, max(5, min(calls, 20)))
        times = {name: [] for name in runs}
        for _ in range(args.reps):
            for name, run in runs.items():
                times[name].append(per_call(run, tensor, calls))
        if rank == 0:
            unit, scale = ("ms", 1e3) if min(min(t) for t in times.values()) > 1e-3 else ("us", 1e6)
            text = "  ".join(f"{name} {statistics.median(t) * scale:.1f} "
                             f"({min(t) * scale:.1f}-{max(t) * scale:.1f})"
                             for name, t in times.items())
            print(f"{label}: {text} [{unit}]", flush=True)
    # CPU per submitted tensor in the step: this rank's user+system time over the step's tensors.
    hvd.barrier()
    before = resource.getrusage(resource.RUSAGE_SELF)
    steps = max(1, args.reps)
    for _ in range(steps):
        tutti_step(step_tensors)
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if rank == 0:
        print(f"step cpu per tensor (rank 0, getrusage): {cpu / (steps * args.step) * 1e6:.1f} us",
              flush=True)
    if args.profile and rank == 0:
        import cProfile
        small = torch.ones(1024, dtype=torch.float32)
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(2000):
            hvd.allreduce_(small, op=hvd.Sum, name="profiled")
        profiler.disable()
        profiler.dump_stats(args.profile)
    elif args.profile:
        small = torch.ones(1024, dtype=torch.float32)
        for _ in range(2000):
            hvd.allreduce_(small, op=hvd.Sum, name="profiled")
    dist.destroy_process_group()
    hvd.shutdown()
    if rank == 0:
        try:
            os.unlink(store)
        except OSError:
            pass


if __name__ == "__main__":
    main()
