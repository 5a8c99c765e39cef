"""tutti.keras on Keras 3's JAX backend (the JAX environment, python/constraints-jax.txt, which
pins Keras too): model.fit with DistributedOptimizer inside Keras' jitted step (one ordered
io_callback per step) and every callback, on 2 ranks; the same worker as the TensorFlow backend's
test. Run with the JAX environment's Python:

    .venv-jax/bin/python -m pytest -q tests/frameworks/test_jax.py tests/frameworks/test_keras_jax.py
"""
import os
import tempfile


from conftest import assert_ok, engine_missing, lines_of, run_job

os.environ.setdefault("KERAS_BACKEND", "jax")  # Keras picks its backend at import
try:
    import jax  # noqa: F401 - only probed: the ranks import it
    import keras  # noqa: F401
except ImportError:
    keras = None


def test_keras_fit_on_jax_converges_with_identical_replicas():
    if keras is None:
        engine_missing("jax and keras are not installed in this Python "
                       "(python/constraints-jax.txt)")
    with tempfile.TemporaryDirectory() as folder:
        result = run_job(2, "keras_train.py", folder, env={"KERAS_BACKEND": "jax"})
        assert_ok(result, "keras ok", 2)
        assert sorted(os.listdir(folder)) == ["best-0.keras"]
    mine, theirs = lines_of(result, 0), lines_of(result, 1)
    assert [l for l in mine if not l.startswith("checkpoint")] == \
        [l for l in theirs if not l.startswith("checkpoint")]
    losses = [float(v) for v in next(l for l in mine if l.startswith("loss")).split()[1:]]
    assert losses[-1] < 0.01 * losses[0], losses
    assert next(l for l in mine if l.startswith("rates")).split()[1:] == [
        "0.0375", "0.05", "0.05", "0.05", "0.003125", "0.0015625"]
