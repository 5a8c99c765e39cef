"""Two JAX models trained side by side in two process sets, with optax, on synthetic data.

    build/tuttirun -np 4 .venv-jax/bin/python examples/python/jax_two_models.py

Ranks 0 and 1 train a linear regression, ranks 2 and 3 a small MLP on a different problem; each
set starts from its first rank's parameters (broadcast_variables), averages every step's
gradients within its own set only (distributed_gradients chained before the optimizer, one
grouped allreduce per step inside the jitted step), and averages its loss as a metric within the
set. Each rank prints its final loss and a digest of its parameters: the two members of a set
print the same digest, bit for bit.
"""
import hashlib

import jax
import jax.numpy as jnp
import numpy as np
import optax

import tutti.jax as hvd

hvd.init()
if hvd.size() != 4:
    raise SystemExit("run with 4 ranks: build/tuttirun -np 4 ...")
regression = hvd.add_process_set([0, 1])
classifier = hvd.add_process_set([2, 3])
mine = regression if hvd.rank() in regression.ranks else classifier
position = mine.ranks.index(hvd.rank())


def linear(params, x):
    return x @ params["w"] + params["b"]


def mlp(params, x):
    return jnp.tanh(x @ params["w1"] + params["b1"]) @ params["w2"] + params["b2"]


# Every rank draws its own initial parameters (seeded by rank): the broadcast makes them agree.
key = jax.random.PRNGKey(hvd.rank())
if mine is regression:
    model, features = linear, 8
    params = {"w": jax.random.normal(key, (features, 1)), "b": jnp.zeros(1)}
    optimizer = optax.chain(hvd.distributed_gradients(process_set=regression), optax.sgd(0.1))
    truth = jnp.arange(1.0, features + 1.0).reshape(features, 1) / features
else:
    model, features = mlp, 4
    k1, k2 = jax.random.split(key)
    params = {"w1": jax.random.normal(k1, (features, 16)) * 0.5, "b1": jnp.zeros(16),
              "w2": jax.random.normal(k2, (16, 1)) * 0.5, "b2": jnp.zeros(1)}
    optimizer = hvd.DistributedOptimizer(optax.adam(0.02), process_set=classifier)
    truth = jnp.ones((features, 1))
params = hvd.broadcast_variables(params, root_rank=mine.ranks[0], process_set=mine)
state = optimizer.init(params)

# Synthetic data: each member of a set has its own shard of the set's problem.
data_key = jax.random.PRNGKey(1000 + hvd.rank())
x = jax.random.normal(data_key, (64, features))
y = x @ truth if mine is regression else jnp.sin(x @ truth)


def loss_of(params, x, y):
    return jnp.mean((model(params, x) - y) ** 2)


@jax.jit
def step(params, state, x, y):
    loss, grads = jax.value_and_grad(loss_of)(params, x, y)
    updates, state = optimizer.update(grads, state, params)  # averaged within the set
    return optax.apply_updates(params, updates), state, loss


losses = []
for _ in range(60):
    params, state, loss = step(params, state, x, y)
    losses.append(hvd.allreduce(loss, process_set=mine))  # the set's mean loss, nobody else's
digest = hashlib.sha256(b"".join(np.asarray(leaf).tobytes()
                                 for leaf in jax.tree_util.tree_leaves(params))).hexdigest()
name = "regression" if mine is regression else "mlp"
print(f"{name} member {position}: loss {float(losses[0]):.4f} -> {float(losses[-1]):.4f} "
      f"params {digest[:16]}", flush=True)
hvd.shutdown()
