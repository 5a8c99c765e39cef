"""Allreduce of CUDA tensors: tutti.torch beside torch.distributed with Gloo, in one job (the same
ranks, tensors and launch), interleaved repetitions, medians with min-max, and Gloo's time over
tutti's. On one GPU shared by the ranks, tutti takes its staged path (NCCL refuses two ranks on
one GPU); with a GPU per rank, NCCL.

    tuttirun -np 2 --bind-to none python3 bench/gpu_allreduce.py [--device cuda|cpu]
        [--sizes-mib 1,16,64] [--reps 7]

--device cpu runs the same script on host tensors (to check it on machines without a GPU).
Rank 0 prints one line per size; the store for torch.distributed is a file in a directory every
rank can reach (--store, default: beside the job's coordinator address in /tmp)."""
import argparse
import os
import statistics
import tempfile
import time

import torch
import torch.distributed as dist

import tutti.torch as hvd


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--sizes-mib", default="1,16,64")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--store", default=None)
    args = parser.parse_args()

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    if args.device == "cuda":
        device = torch.device("cuda", hvd.local_rank() % torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    # One store file per job: rank 0 names it and every rank learns it through tutti.
    store = args.store or os.path.join(tempfile.gettempdir(), f"tutti-gpu-bench-{os.getppid()}")
    store = hvd.broadcast_object(store, root_rank=0)
    dist.init_process_group("gloo", store=dist.FileStore(store, size), rank=rank, world_size=size)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def timed(run, tensor):
        sync()
        hvd.barrier()
        start = time.perf_counter()
        run(tensor)
        sync()
        return time.perf_counter() - start

    runs = {
        "tutti": lambda t: hvd.allreduce_(t, op=hvd.Sum, name=f"bench.{t.numel()}"),
        "gloo": lambda t: dist.all_reduce(t),
    }
    if rank == 0:
        print(f"allreduce float32 on {device.type}, {size} ranks"
              + (f" sharing {torch.cuda.get_device_name(device)}" if device.type == "cuda" else "")
              + f", {args.reps} interleaved repetitions (medians, min-max in ms)", flush=True)
    for mib in (float(s) for s in args.sizes_mib.split(",")):
        tensor = torch.ones(int(mib * (1 << 20)) // 4, dtype=torch.float32, device=device)
        for run in runs.values():  # warm-up: connections, buffers, the GPU module
            timed(run, tensor)
        times = {name: [] for name in runs}
        for _ in range(args.reps):
            for name, run in runs.items():
                times[name].append(timed(run, tensor) * 1e3)
        if rank == 0:
            median = {name: statistics.median(t) for name, t in times.items()}
            text = "  ".join(f"{name} {median[name]:.2f} ({min(t):.2f}-{max(t):.2f})"
                             for name, t in times.items())
            print(f"{mib:g} MiB: {text}  gloo/tutti {median['gloo'] / median['tutti']:.2f}x",
                  flush=True)
    dist.destroy_process_group()
    hvd.shutdown()
    if rank == 0 and not args.store:
        try:
            os.unlink(store)
        except OSError:
            pass


if __name__ == "__main__":
    main()
