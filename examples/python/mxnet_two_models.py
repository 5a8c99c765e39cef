"""Two MXNet gluon models trained side by side in two process sets, on synthetic data.

    bash scripts/setup_venv.sh mxnet
    build/tuttirun -np 4 .venv-mxnet/bin/python examples/python/mxnet_two_models.py

Ranks 0 and 1 train a linear regression with SGD, ranks 2 and 3 a small MLP with Adam on a
different problem. Each set starts from its first rank's parameters (broadcast_parameters within
the set, right after the deferred initialization at the first forward), averages every step's
gradients within its own set only (DistributedTrainer: one grouped allreduce per step), and
averages its loss as a metric within the set. Each rank prints its loss and a digest of its
parameters: the two members of a set print the same digest, bit for bit.
"""
import hashlib

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

import tutti.mxnet as hvd

hvd.init()
if hvd.size() != 4:
    raise SystemExit("run with 4 ranks: build/tuttirun -np 4 ...")
regression = hvd.add_process_set([0, 1])
classifier = hvd.add_process_set([2, 3])
mine = regression if hvd.rank() in regression.ranks else classifier
position = mine.ranks.index(hvd.rank())

# Every rank draws its own initial parameters (seeded by rank): the broadcast makes them agree.
mx.random.seed(hvd.rank())
data = np.random.RandomState(1000 + hvd.rank())  # each member has its own shard of its problem
if mine is regression:
    features, name = 8, "regression"
    net = gluon.nn.Dense(1)
    optimizer, optimizer_params = "sgd", {"learning_rate": 0.1}
    x = data.normal(size=(64, features)).astype(np.float32)
    y = x @ (np.arange(1.0, features + 1.0, dtype=np.float32).reshape(features, 1) / features)
else:
    features, name = 4, "mlp"
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(16, activation="tanh"), gluon.nn.Dense(1))
    optimizer, optimizer_params = "adam", {"learning_rate": 0.02}
    x = data.normal(size=(64, features)).astype(np.float32)
    y = np.sin(x @ np.ones((features, 1), np.float32))
net.initialize(mx.init.Normal(0.5))
hvd.broadcast_parameters(net.collect_params(), root_rank=mine.ranks[0], process_set=mine)
trainer = hvd.DistributedTrainer(net.collect_params(), optimizer, optimizer_params,
                                 process_set=mine)
x, y = mx.nd.array(x), mx.nd.array(y)

losses = []
for _ in range(60):
    with autograd.record():
        loss = ((net(x) - y) ** 2).mean()
    loss.backward()
    trainer.step(1)  # the loss is already a mean over the batch
    losses.append(hvd.allreduce(loss, process_set=mine).asscalar())  # the set's mean loss only
digest = hashlib.sha256(b"".join(p.data().asnumpy().tobytes()
                                 for p in net.collect_params().values())).hexdigest()
print(f"{name} member {position}: loss {losses[0]:.4f} -> {losses[-1]:.4f} params {digest[:16]}",
      flush=True)
hvd.shutdown()
