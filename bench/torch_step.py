"""A comm-bound PyTorch training step: a model with ResNet-50's parameters (161 tensors, 25.6 M
parameters, bench/models/resnet50.tsv) and almost no compute, one backward and one optimizer step
per iteration, the gradients averaged across the ranks by

    --binding tutti     tutti.torch's DistributedOptimizer       (tuttirun -np N python3 ...)
    --binding horovod   horovod.torch's DistributedOptimizer     (horovodrun / mpirun ...)
    --binding ddp       torch DistributedDataParallel with Gloo  (torchrun, or any launcher that
                        sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT)

and the step of many small tensors a Python user submits: --small tensors of 4 KiB through
allreduce_async_ then synchronize (tutti, horovod; DDP has no such call: all_reduce(async_op=True)
then wait). Rank 0 prints `STEP <binding> resnet50 <ranks> median_ms min_ms max_ms` and
`SMALL <binding> <count>x4KiB <ranks> median_ms min_ms max_ms` (bench/torch_step.sh runs them
side by side, interleaved)."""
import argparse
import os
import statistics
import time

import torch


def load_shapes(path):
    shapes = []
    with open(path) as f:
        for line in f:
            name, dims = line.split("\t")
            shapes.append((name, tuple(int(d) for d in dims.split(","))))
    return shapes


class Parameters(torch.nn.Module):
    """The model's parameters and a loss that touches each once (the gradient of every parameter
    is a tensor of ones: nothing else to compute)."""

    def __init__(self, shapes):
        super().__init__()
        self.weights = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.zeros(shape)) for _, shape in shapes])

    def forward(self):
        return sum(p.sum() for p in self.weights)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binding", choices=["tutti", "horovod", "ddp"], required=True)
    parser.add_argument("--model", default=os.path.join(os.path.dirname(__file__), "models",
                                                        "resnet50.tsv"))
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--small", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(1)

    shapes = load_shapes(args.model)
    model = Parameters(shapes)
    if args.binding == "ddp":
        import torch.distributed as dist
        dist.init_process_group("gloo")
        rank, size = dist.get_rank(), dist.get_world_size()
        model = torch.nn.parallel.DistributedDataParallel(model)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.0)

        def barrier():
            dist.barrier()

        def small_step(tensors):
            for work in [dist.all_reduce(t, async_op=True) for t in tensors]:
                work.wait()
    else:
        if args.binding == "tutti":
            import tutti.torch as hvd
        else:
            import horovod.torch as hvd
        hvd.init()
        rank, size = hvd.rank(), hvd.size()
        optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.0),
                                             named_parameters=model.named_parameters())
        names = [f"small.{i}" for i in range(args.small)]

        def barrier():
            hvd.allreduce(torch.zeros(1), name="barrier")

        def small_step(tensors):
            handles = [hvd.allreduce_async_(t, name=n, op=hvd.Sum)
                       for t, n in zip(tensors, names)]
            for handle in handles:
                hvd.synchronize(handle)

    def train_step():
        optimizer.zero_grad()
        model().backward()
        optimizer.step()

    small = [torch.ones(1024) for _ in range(args.small)]
    for label, run, arg in (("STEP", train_step, None), ("SMALL", small_step, small)):
        times = []
        for i in range(args.warmup + args.steps):
            barrier()
            start = time.perf_counter()
            run(arg) if arg is not None else run()
            if i >= args.warmup:
                times.append((time.perf_counter() - start) * 1e3)
        if rank == 0:
            what = "resnet50" if label == "STEP" else f"{args.small}x4KiB"
            print(f"{label} {args.binding} {what} {size} {statistics.median(times):.2f} "
                  f"{min(times):.2f} {max(times):.2f}", flush=True)


if __name__ == "__main__":
    main()
