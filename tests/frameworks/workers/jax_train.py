"""Data-parallel training with tutti.jax's optax transformation against one process training on
every rank's data: a linear model, jitted steps, op Average (and Sum: the reference's gradient
times the size). Prints the loss and a digest of the parameters, then "train ok"."""
import hashlib

import jax
import jax.numpy as jnp
import numpy as np
import optax

import tutti.jax as hvd

hvd.init()
rank, size = hvd.rank(), hvd.size()
truth = jnp.array([[1.0], [-2.0], [0.5]])
shards = [jax.random.normal(jax.random.PRNGKey(r), (16, 3)) for r in range(size)]
targets = [x @ truth + 0.3 for x in shards]


def loss_of(params, x, y):
    return jnp.mean((x @ params["w"] + params["b"] - y) ** 2)


def train(optimizer, x, y, steps=40):
    params = {"w": jnp.zeros((3, 1)), "b": jnp.zeros(1)}
    state = optimizer.init(params)

    @jax.jit
    def step(params, state):
        loss, grads = jax.value_and_grad(loss_of)(params, x, y)
        updates, state = optimizer.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss
    losses = []
    for _ in range(steps):
        params, state, loss = step(params, state)
        losses.append(float(loss))
    return params, losses


everything = (jnp.concatenate(shards), jnp.concatenate(targets))
for op, reference_optimizer in ((hvd.Average, optax.sgd(0.1)),
                                (hvd.Sum, optax.chain(optax.scale(size), optax.sgd(0.1 / size)))):
    params, losses = train(optax.chain(hvd.distributed_gradients(op=op), optax.sgd(0.1 / (
        size if op == hvd.Sum else 1))), shards[rank], targets[rank])
    reference, _ = train(reference_optimizer, *everything)
    jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6),
                           params, reference)
    digest = hashlib.sha256(b"".join(np.asarray(leaf).tobytes()
                                     for leaf in jax.tree_util.tree_leaves(params))).hexdigest()
    print(f"op {op} loss {losses[0]:.4f} {losses[-1]:.6f} params {digest}", flush=True)
print("train ok", flush=True)
hvd.shutdown()
