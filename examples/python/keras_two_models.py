"""Two Keras 3 models trained side by side with model.fit in two process sets, on synthetic data.

    build/tuttirun -np 4 .venv-tensorflow/bin/python examples/python/keras_two_models.py

Ranks 0 and 1 train a linear regression, ranks 2 and 3 a small classifier. Each set starts from
its first rank's weights (BroadcastGlobalVariablesCallback), averages every step's gradients
within its own set only (DistributedOptimizer, one grouped allreduce per step) and averages its
metrics within the set (MetricAverageCallback). Each rank prints its model, its first and last
set-averaged loss and a digest of its weights: the members of a set print the same line.
"""
import hashlib

import numpy as np

import keras
import tutti.keras as hvd

hvd.init()
if hvd.size() != 4:
    raise SystemExit("run with 4 ranks: build/tuttirun -np 4 ...")
regression = hvd.add_process_set([0, 1])
classifier = hvd.add_process_set([2, 3])
mine = regression if hvd.rank() in regression.ranks else classifier

keras.utils.set_random_seed(hvd.rank())  # own initial weights: the broadcast makes them agree
data = np.random.default_rng(hvd.rank()).normal(size=(128, 4)).astype(np.float32)
if mine is regression:
    labels = data @ np.array([[1.0], [-2.0], [0.5], [0.0]], np.float32) + 0.3
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    loss, rate = "mse", 0.1
else:
    labels = (data[:, :1] * data[:, 1:2] > 0).astype(np.float32)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(16, activation="tanh"),
                              keras.layers.Dense(1, activation="sigmoid")])
    loss, rate = "binary_crossentropy", 0.5
model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(rate), process_set=mine),
              loss=loss, jit_compile=False)  # XLA runs no Python: tutti's py_function needs it
history = model.fit(data, labels, batch_size=32, epochs=20, verbose=0, callbacks=[
    hvd.callbacks.BroadcastGlobalVariablesCallback(mine.ranks[0], process_set=mine),
    hvd.callbacks.MetricAverageCallback(process_set=mine)])
losses = history.history["loss"]
digest = hashlib.sha256(b"".join(w.tobytes() for w in model.get_weights())).hexdigest()[:16]
name = "regression" if mine is regression else "classifier"
print(f"{name} set {mine.ranks} loss {losses[0]:.4f} -> {losses[-1]:.4f} weights {digest}",
      flush=True)
hvd.shutdown()
