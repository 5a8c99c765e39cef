"""Data-parallel gluon training with tutti.mxnet against one process training on every rank's
data: DistributedTrainer (with and without gradient_predivide_factor) and gluon.Trainer with a
DistributedOptimizer, a linear model whose shape is inferred at the first forward (deferred
initialization broadcast from rank 0). Checks the averaged gradients of one step, then trains;
prints each run's first and last loss and a digest of its parameters, misuse as "error KEY Class
message" lines, then "train ok"."""
import hashlib
import os
import warnings

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

import tutti.mxnet as hvd

launched = int(os.environ["TUTTI_SIZE"])
first_half = hvd.ProcessSet(range(launched // 2))
hvd.init(process_sets=[first_half])
rank, size = hvd.rank(), hvd.size()
mx.random.seed(1000 + rank)  # different initial values on every rank: broadcast must fix them
truth = np.array([[1.0], [-2.0], [0.5]], np.float32)
shards = [np.random.RandomState(r).normal(size=(16, 3)).astype(np.float32) for r in range(size)]
targets = [x @ truth + 0.3 for x in shards]
everything = (np.concatenate(shards), np.concatenate(targets))


def new_model(initial=None):
    net = gluon.nn.Dense(1)  # in_units inferred at the first forward
    net.initialize(mx.init.Normal(1.0))
    if initial is not None:
        net(mx.nd.zeros((1, 3)))
        for param, value in zip(net.collect_params().values(), initial):
            param.set_data(value)
    return net


def step(net, trainer, x, y):
    with autograd.record():
        loss = ((net(mx.nd.array(x)) - mx.nd.array(y)) ** 2).sum()
    loss.backward()
    trainer.step(x.shape[0])
    return float(loss.asscalar()) / x.shape[0]


def digest(net):
    return hashlib.sha256(b"".join(p.data().asnumpy().tobytes()
                                   for p in net.collect_params().values())).hexdigest()


def distributed(kind):
    net = new_model()
    hvd.broadcast_parameters(net.collect_params(), root_rank=0)  # deferred: at the first forward
    if kind == "trainer":
        trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    elif kind == "predivide":
        trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", {"learning_rate": 0.1},
                                         gradient_predivide_factor=2.0, prefix="predivide.")
    else:
        trainer = gluon.Trainer(net.collect_params(), hvd.DistributedOptimizer(
            mx.optimizer.SGD(learning_rate=0.1)), kvstore=None)
    return net, trainer


# ---- one step's gradients against the single process's ----------------------------------------
net, trainer = distributed("trainer")
net(mx.nd.zeros((1, 3)))  # the deferred initialization, then rank 0's values broadcast
initial = [p.data().copy() for p in net.collect_params().values()]
with autograd.record():
    loss = ((net(mx.nd.array(shards[rank])) - mx.nd.array(targets[rank])) ** 2).sum()
loss.backward()
trainer.allreduce_grads()
reference = new_model(initial)
with autograd.record():
    total = ((reference(mx.nd.array(everything[0])) - mx.nd.array(everything[1])) ** 2).sum()
total.backward()
for mine, theirs in zip(net.collect_params().values(), reference.collect_params().values()):
    np.testing.assert_allclose(mine.grad().asnumpy(), theirs.grad().asnumpy() / size, rtol=1e-5,
                               atol=1e-5)

# ---- training: every rank's replica against one process on all the data ------------------------
for kind in ("trainer", "predivide", "optimizer"):
    net, trainer = distributed(kind)
    net(mx.nd.zeros((1, 3)))
    reference = new_model([p.data().copy() for p in net.collect_params().values()])
    reference_trainer = gluon.Trainer(reference.collect_params(), "sgd", {"learning_rate": 0.1},
                                      kvstore=None)
    losses = [step(net, trainer, shards[rank], targets[rank]) for _ in range(30)]
    for _ in range(30):
        step(reference, reference_trainer, *everything)
    for mine, theirs in zip(net.collect_params().values(), reference.collect_params().values()):
        np.testing.assert_allclose(mine.data().asnumpy(), theirs.data().asnumpy(), rtol=1e-5,
                                   atol=1e-6)
    print(f"run {kind} loss {losses[0]:.4f} {losses[-1]:.6f} params {digest(net)}", flush=True)

# ---- a set of one member, or one this rank is not in: local training, as Horovod ---------------
alone = hvd.add_process_set([size - 1])
for the_set in (alone, first_half):
    if size > 2 and the_set is first_half and rank in first_half.ranks:
        continue  # its members reduce: the runs above cover that
    net, local = new_model(initial), new_model(initial)
    trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", {"learning_rate": 0.1},
                                     process_set=the_set)
    local_trainer = gluon.Trainer(local.collect_params(), "sgd", {"learning_rate": 0.1},
                                  kvstore=None)
    step(net, trainer, shards[rank], targets[rank])
    step(local, local_trainer, shards[rank], targets[rank])
    assert digest(net) == digest(local), the_set


# ---- misuse: exact classes and messages --------------------------------------------------------
def report(key, function):
    try:
        function()
    except Exception as error:  # noqa: BLE001 - the test compares class and message
        print(f"error {key} {type(error).__name__} {error}", flush=True)
    else:
        print(f"error {key} none", flush=True)


def mismatched_models():
    net = gluon.nn.Dense(1 + rank, in_units=3)  # each rank a different model
    net.initialize()
    trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", prefix="mismatch.")
    step(net, trainer, shards[rank], np.zeros((16, 1 + rank), np.float32))


def two_contexts():
    net = gluon.nn.Dense(1, in_units=3, prefix="replicated_")
    net.initialize(ctx=[mx.cpu(0), mx.cpu(1)])
    trainer = hvd.DistributedTrainer(net.collect_params(), "sgd")
    with autograd.record():
        loss = net(mx.nd.ones((2, 3))).sum()
    loss.backward()
    trainer.step(2)


report("mismatch", mismatched_models)
report("contexts", two_contexts)
report("broadcast-prefix", lambda: hvd.broadcast_parameters({"w": mx.nd.ones(2 + rank)},
                                                            prefix="init."))
report("optimizer", lambda: hvd.DistributedOptimizer("sgd"))
report("params", lambda: hvd.broadcast_parameters([mx.nd.ones(2)]))
report("param-type", lambda: hvd.broadcast_parameters({"w": np.ones(2)}))
report("prefix", lambda: hvd.DistributedTrainer(new_model(initial).collect_params(), "sgd",
                                                prefix=3))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    wrapped = hvd.DistributedTrainer(new_model(initial).collect_params(),
                                     hvd.DistributedOptimizer(mx.optimizer.SGD()))
assert type(wrapped._optimizer) is mx.optimizer.SGD
assert [str(w.message) for w in caught] == [
    "DistributedTrainer does not take DistributedOptimizer as its optimizer. We have unwrapped "
    "it for you."]
print("train ok", flush=True)
hvd.shutdown()
