"""Keras 3 model.fit with tutti.keras' DistributedOptimizer and callbacks, on whichever backend
KERAS_BACKEND names: each rank starts from its own random weights and trains on its own shard;
BroadcastGlobalVariablesCallback makes them agree, MetricAverageCallback averages the loss,
warmup then a schedule move the rate, BestModelCheckpoint writes on rank 0 only. Prints the loss
history, the rates, a digest of the weights, then "keras ok". argv[1]: checkpoint folder."""
import hashlib
import os
import sys

import numpy as np

import keras
import tutti.keras as hvd

hvd.init()
rank, size = hvd.rank(), hvd.size()
keras.utils.set_random_seed(100 + rank)  # different initial weights on every rank
truth = np.array([[1.0], [-2.0], [0.5]], np.float32)
x = np.random.default_rng(rank).normal(size=(64, 3)).astype(np.float32)
y = x @ truth + 0.3

model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4), keras.layers.Dense(1)])
optimizer = hvd.DistributedOptimizer(keras.optimizers.SGD(0.05, momentum=0.5), name="grads")
model.compile(optimizer=optimizer, loss="mse", jit_compile=keras.backend.backend() == "jax")
checkpoint = os.path.join(sys.argv[1], f"best-{rank}.keras")
history = model.fit(x, y, batch_size=16, epochs=6, verbose=0, shuffle=False,
                    validation_data=(x[:16], y[:16]), callbacks=[
                        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                        hvd.callbacks.MetricAverageCallback(),
                        hvd.callbacks.LearningRateWarmupCallback(0.05, warmup_epochs=2),
                        hvd.callbacks.LearningRateScheduleCallback(0.05, 0.5, start_epoch=4),
                        hvd.callbacks.BestModelCheckpoint(checkpoint, monitor="val_loss")])
losses = history.history["loss"]
rates = history.history["learning_rate"]
digest = hashlib.sha256(b"".join(np.asarray(w).tobytes() for w in model.get_weights())
                        ).hexdigest()
print("loss " + " ".join(f"{v!r}" for v in losses), flush=True)
print("rates " + " ".join(f"{v:.6g}" for v in rates), flush=True)
print(f"weights {digest}", flush=True)
print(f"checkpoint {os.path.exists(checkpoint)}", flush=True)
print("keras ok", flush=True)
hvd.shutdown()
