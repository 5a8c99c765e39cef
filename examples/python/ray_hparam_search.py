"""A hyperparameter search on Ray: one tutti process set per configuration, all trained at once.

The driver (this script) starts a RayExecutor of len(lrs) * ranks_per_config actors; each
configuration (a learning rate) gets a process set of ranks_per_config ranks that trains its own
copy of a model data-parallel: DistributedOptimizer and broadcast_parameters take process_set=...,
so gradients are averaged only among the set's members and the configurations never wait for
each other. run() returns every rank's result; the driver reports each configuration's loss and
the best one.

    python examples/python/ray_hparam_search.py                    # a local Ray cluster of 4 CPUs
    python examples/python/ray_hparam_search.py --address auto     # an existing Ray cluster
    python examples/python/ray_hparam_search.py --lrs 0.01 0.1 0.5 --ranks-per-config 1

(with the package on PYTHONPATH and TUTTI_LIBRARY naming libtutti.so, as in README.md; Ray's
workers inherit both from a local cluster this script starts)
"""
import argparse
import hashlib

import ray

import tutti.ray


def train(lrs, ranks_per_config, epochs, batch_size):
    """One rank: joins its configuration's set, trains, returns (config, loss, first, digest)."""
    import os

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    import tutti.torch as hvd

    # Static sets go to init, before hvd.size() can be asked: RayExecutor sets TUTTI_SIZE.
    world = int(os.environ["TUTTI_SIZE"])
    sets = [hvd.ProcessSet(range(c * ranks_per_config, (c + 1) * ranks_per_config))
            for c in range(world // ranks_per_config)]
    hvd.init(process_sets=sets)
    torch.set_num_threads(1)  # several ranks share the node's cores
    config = hvd.rank() // ranks_per_config
    mine, lr = sets[config], lrs[config]
    leader = mine.ranks[0]

    # The same data on every rank (fixed seed); within a set, each member keeps its own shard.
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(2048, 20, generator=g)
    y = (x @ torch.randn(20, 4, generator=g)).argmax(dim=1)
    x, y = x[mine.rank()::mine.size()], y[mine.rank()::mine.size()]

    torch.manual_seed(100 + hvd.rank())  # broadcast_parameters makes a set's members agree
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr * mine.size(), momentum=0.9)
    hvd.broadcast_parameters(model.state_dict(), root_rank=leader, process_set=mine)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         process_set=mine)
    shuffle = torch.Generator().manual_seed(7 + hvd.rank())
    first = None
    for _ in range(epochs):
        total, batches = 0.0, 0
        for batch in torch.randperm(len(x), generator=shuffle).split(batch_size):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x[batch]), y[batch])
            loss.backward()
            optimizer.step()
            total, batches = total + loss.item(), batches + 1
        epoch_loss = hvd.allreduce(torch.tensor(total / batches), name="epoch_loss",
                                   process_set=mine).item()
        first = epoch_loss if first is None else first
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    digest = hashlib.sha256(flat.numpy().tobytes()).hexdigest()
    # Leave the job: the next run() on these actors may bring other sets to init.
    hvd.shutdown()
    return config, epoch_loss, first, digest


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lrs", type=float, nargs="+", default=[0.002, 0.05],
                        help="one learning rate per configuration")
    parser.add_argument("--ranks-per-config", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--address", default=None,
                        help="a Ray cluster to join (default: start a local one)")
    args = parser.parse_args()

    workers = len(args.lrs) * args.ranks_per_config
    if args.address:
        ray.init(address=args.address)
    else:
        ray.init(num_cpus=workers, include_dashboard=False)
    executor = tutti.ray.RayExecutor(tutti.ray.RayExecutor.create_settings(timeout_s=120),
                                     num_workers=workers)
    executor.start()
    try:
        results = executor.run(train, args=[args.lrs, args.ranks_per_config, args.epochs,
                                            args.batch_size])
    finally:
        executor.shutdown()
        ray.shutdown()

    by_config = {}
    for rank, (config, loss, first, digest) in enumerate(results):
        by_config.setdefault(config, []).append((rank, loss, first, digest))
    for config, ranks in sorted(by_config.items()):
        _, loss, first, _ = ranks[0]
        print(f"lr {args.lrs[config]}: ranks {[r[0] for r in ranks]} final loss {loss:.4f} "
              f"(first {first:.4f})")
    # Each configuration's replicas agree, and the configurations trained different models.
    digests = {config: {r[3] for r in ranks} for config, ranks in by_config.items()}
    assert all(len(d) == 1 for d in digests.values()), f"a set's replicas diverged: {results}"
    assert len({next(iter(d)) for d in digests.values()}) == len(digests), "two sets agree"
    best = min(by_config, key=lambda c: by_config[c][0][1])
    print(f"best: lr {args.lrs[best]}, final loss {by_config[best][0][1]:.4f}")
    print("configurations independent")


if __name__ == "__main__":
    main()
