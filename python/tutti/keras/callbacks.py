"""horovod.keras.callbacks for Keras 3, each aware of its process set.

They run in `model.fit`'s Python loop on the calling thread and move NumPy copies of the values
through the framework-neutral array core (tutti._arrays), whatever the backend. On the JAX
backend the ordered callbacks of the jitted steps already dispatched are waited for first
(jax.effects_barrier), so that this process submits its requests in program order.
"""
import numpy as np

import keras

from tutti import _arrays, _dtypes, _world
from tutti._process_sets import global_process_set, members, set_id
from tutti.errors import InvalidArgumentError


def _in_program_order():
    if keras.backend.backend() == "jax":
        import jax
        jax.effects_barrier()


class BroadcastGlobalVariablesCallback(keras.callbacks.Callback):
    """At the start of training, gives every member of the set global rank `root_rank`'s model
    and optimizer variables (the optimizer is built first, so its slots exist and agree from the
    first step on), in one request per variable submitted together."""

    def __init__(self, root_rank, process_set=global_process_set):
        super().__init__()
        self.root_rank = root_rank
        self.process_set = process_set

    def on_train_begin(self, logs=None):
        the_set = set_id(self.process_set)
        if self.root_rank not in members(the_set):
            raise InvalidArgumentError(f"root_rank {self.root_rank} is not a member of process "
                                       f"set {members(the_set)}")
        optimizer = self.model.optimizer
        if optimizer is not None and not optimizer.built:
            optimizer.build(self.model.trainable_variables)
        variables = list(self.model.variables)
        if optimizer is not None:
            variables += list(optimizer.variables)
        _in_program_order()
        values = [keras.ops.convert_to_numpy(v) for v in variables]
        for variable, value in zip(variables, _arrays.grouped_broadcast(
                values, self.root_rank, "BroadcastGlobalVariablesCallback", the_set)):
            variable.assign(value)


class MetricAverageCallback(keras.callbacks.Callback):
    """At each epoch's end, replaces every metric in `logs` by its average over the set, in one
    grouped allreduce (sorted by name, so every member sends the same list). Put it before the
    callbacks that read the metrics (checkpoints, schedules) so that they see the averages."""

    def __init__(self, process_set=global_process_set):
        super().__init__()
        self.process_set = process_set

    def on_epoch_end(self, epoch, logs=None):
        if not logs:
            return
        _in_program_order()
        names = sorted(logs)
        values = [np.asarray(float(logs[n]), np.float64) for n in names]
        for n, value in zip(names, _arrays.grouped_allreduce(
                values, _dtypes.Average, None, set_id(self.process_set))):
            logs[n] = float(value)


class LearningRateScheduleCallback(keras.callbacks.Callback):
    """Sets the learning rate to `initial_lr * multiplier(epoch)` between start_epoch and
    end_epoch: at each epoch's first batch (staircase) or at every batch with a fractional epoch
    (epoch + batch / steps_per_epoch; steps_per_epoch from fit's params when not given). A number
    as `multiplier` means multiplier ** epoch. Purely local: every member computes the same."""

    def __init__(self, initial_lr, multiplier, start_epoch=0, end_epoch=None, staircase=True,
                 steps_per_epoch=None):
        super().__init__()
        if initial_lr is None:
            raise ValueError("Parameter `initial_lr` is required")
        self.initial_lr = initial_lr
        self.multiplier = multiplier if callable(multiplier) else (lambda e: multiplier ** e)
        self.start_epoch, self.end_epoch = start_epoch, end_epoch
        self.staircase = staircase
        self.steps_per_epoch = steps_per_epoch
        self.current_epoch = None

    def on_train_begin(self, logs=None):
        if not self.staircase and not self.steps_per_epoch:
            self.steps_per_epoch = self.params.get("steps")
            if not self.steps_per_epoch:
                raise ValueError(f"Could not autodetect the number of steps per epoch: pass "
                                 f"steps_per_epoch to {type(self).__name__}()")

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch

    def _in_scope(self):
        return (self.current_epoch >= self.start_epoch
                and (self.end_epoch is None or self.current_epoch < self.end_epoch))

    def on_train_batch_begin(self, batch, logs=None):
        if not self._in_scope():
            return
        if self.staircase and batch == 0:
            self.model.optimizer.learning_rate = self.initial_lr * self.multiplier(
                self.current_epoch)
        elif not self.staircase:
            epoch = self.current_epoch + batch / self.steps_per_epoch
            self.model.optimizer.learning_rate = self.initial_lr * self.multiplier(epoch)

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["learning_rate"] = float(keras.ops.convert_to_numpy(
                self.model.optimizer.learning_rate))


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Raises the learning rate gradually from initial_lr / size to initial_lr over
    `warmup_epochs` (Goyal et al.), size being the process set's: the rate a set of that size
    trains with once warm. verbose > 0: the set's first member prints when warmup ends."""

    def __init__(self, initial_lr, warmup_epochs=5, steps_per_epoch=None, verbose=0,
                 process_set=global_process_set):
        self.process_set = process_set

        def multiplier(epoch):
            count = len(members(self.process_set))
            epoch += 1.0 / self.steps_per_epoch  # round numbers at each epoch's end
            return 1.0 / count * (epoch * (count - 1) / warmup_epochs + 1)
        super().__init__(initial_lr, multiplier, start_epoch=0, end_epoch=warmup_epochs,
                         staircase=False, steps_per_epoch=steps_per_epoch)
        self.verbose = verbose

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        if (epoch == self.end_epoch - 1 and self.verbose > 0
                and _world.rank() == members(self.process_set)[0]):
            rate = float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate))
            print(f"\nEpoch {epoch + 1}: finished gradual learning rate warmup to {rate:g}.")


class BestModelCheckpoint(keras.callbacks.ModelCheckpoint):
    """Saves the model to `filepath` whenever the monitored metric improves, on the set's first
    member only (the members hold the same model; put MetricAverageCallback before it so that
    they also agree on the metric)."""

    def __init__(self, filepath, monitor="val_loss", verbose=0, mode="auto", save_freq="epoch",
                 process_set=global_process_set):
        super().__init__(filepath, monitor=monitor, verbose=verbose, save_best_only=True,
                         mode=mode, save_freq=save_freq)
        self.process_set = process_set

    def _save_model(self, *args, **kwargs):
        if _world.rank() == members(self.process_set)[0]:
            return super()._save_model(*args, **kwargs)
        return None
