"""TorchState and ObjectState for PyTorch, bound to a process set: save() copies, restore() goes
back to the copy, sync() broadcasts within the set from its lowest (surviving) member."""
import copy

from tutti import _world
from tutti import elastic as _elastic
from tutti._process_sets import global_process_set, set_id

from ..ops import forget_settled
from ..state import (allgather_object, broadcast_object, broadcast_optimizer_state,
                     broadcast_parameters)
from .sampler import ElasticSampler


def _root(process_set):
    return min(process_set.ranks)


def _bcast_within(process_set):
    def bcast(obj):
        return broadcast_object(obj, _root(process_set), name="elastic.state",
                                process_set=process_set)
    return bcast


class ObjectState(_elastic.ObjectState):
    """Picklable attributes, synced within `process_set`."""

    def __init__(self, process_set=global_process_set, **kwargs):
        self.process_set = process_set
        super().__init__(bcast_object=_bcast_within(process_set), get_rank=_world.rank, **kwargs)

    def restore(self):
        forget_settled({0, set_id(self.process_set)})
        super().restore()


class _SamplerHandler:
    """An ElasticSampler's progress: committed as the union of what every member of the set
    processed, so that the samples a lost member processed before the commit are not repeated
    and those after it are not skipped (its model updates since the commit are gone too)."""

    def __init__(self, sampler, process_set):
        self.sampler = sampler
        self.process_set = process_set
        self.saved = copy.deepcopy(sampler.state_dict())

    def save(self):
        processed = allgather_object(self.sampler.processed_indices, name="elastic.sampler",
                                     process_set=self.process_set)
        state = self.sampler.state_dict()
        state["processed_indices"] = set().union(*processed)
        self.saved = copy.deepcopy(state)

    def restore(self):
        self.sampler.load_state_dict(copy.deepcopy(self.saved))

    def sync(self):
        self.saved = broadcast_object(self.saved, _root(self.process_set), name="elastic.sampler",
                                      process_set=self.process_set)
        self.restore()


class TorchState(_elastic.ObjectState):
    """A model, an optimizer, ElasticSamplers and picklable scalars (`epoch=0`), synced within
    `process_set` from its lowest surviving member."""

    def __init__(self, model=None, optimizer=None, process_set=global_process_set, **kwargs):
        self.process_set = process_set
        self.model = model
        self.optimizer = optimizer
        self._samplers = {name: _SamplerHandler(value, process_set)
                          for name, value in kwargs.items() if isinstance(value, ElasticSampler)}
        scalars = {k: v for k, v in kwargs.items() if k not in self._samplers}
        for name, handler in self._samplers.items():
            setattr(self, name, handler.sampler)
        self._saved_model = self._copy(model)
        self._saved_optimizer = self._copy(optimizer)
        super().__init__(bcast_object=_bcast_within(process_set), get_rank=_world.rank, **scalars)

    @staticmethod
    def _copy(module):
        return None if module is None else copy.deepcopy(module.state_dict())

    def save(self):
        self._saved_model = self._copy(self.model)
        self._saved_optimizer = self._copy(self.optimizer)
        for handler in self._samplers.values():
            handler.save()
        super().save()

    def restore(self):
        # What the failed attempt left in flight on this set (and the world) is over.
        forget_settled({0, set_id(self.process_set)})
        if self.model is not None:
            self.model.load_state_dict(self._saved_model)
        if self.optimizer is not None:
            self.optimizer.load_state_dict(self._saved_optimizer)
        for handler in self._samplers.values():
            handler.restore()
        super().restore()

    def sync(self):
        root = _root(self.process_set)
        if self.model is not None:
            broadcast_parameters(self.model.state_dict(), root_rank=root,
                                 process_set=self.process_set)
        if self.optimizer is not None:
            broadcast_optimizer_state(self.optimizer, root_rank=root, model=self.model,
                                      process_set=self.process_set)
        for handler in self._samplers.values():
            handler.sync()
        super().sync()

    def reset(self):
        for handler in self._samplers.values():
            handler.sampler.reset()
