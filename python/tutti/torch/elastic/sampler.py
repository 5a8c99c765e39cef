"""ElasticSampler: a DistributedSampler that resumes an epoch where the last commit left it,
over whatever members its process set has now."""
import math
import random

import torch.utils.data

from tutti._process_sets import global_process_set


class ElasticSampler(torch.utils.data.Sampler):
    """Shards `dataset` over the members of `process_set`. record_batch() (or record_indices())
    marks samples as processed; after a reset the samples not yet processed this epoch are
    re-sharded over the members there are now, none repeated and none skipped. set_epoch()
    starts an epoch over (reshuffled with seed + epoch)."""

    def __init__(self, dataset, shuffle=True, seed=0, process_set=global_process_set):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.process_set = process_set
        self.epoch = 0
        self.processed_indices = set()
        self.num_replicas = 0
        self.rank = 0
        self.remaining_indices = []
        self.indices = []
        self.num_samples = 0
        self.total_size = 0
        self.reset()

    def set_epoch(self, epoch):
        self.epoch = epoch
        self.processed_indices = set()
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Marks the `batch_idx`-th batch of `batch_size` of this member's shard processed."""
        self.record_indices(self.get_indices(batch_idx, batch_size))

    def record_indices(self, indices):
        self.processed_indices.update(indices)

    def get_indices(self, batch_idx, batch_size):
        start = batch_idx * batch_size
        return self.indices[start:min(start + batch_size, len(self.indices))]

    def state_dict(self):
        return dict(epoch=self.epoch, processed_indices=set(self.processed_indices))

    def load_state_dict(self, state_dict):
        self.epoch = state_dict["epoch"]
        self.processed_indices = set(state_dict["processed_indices"])
        self.reset()

    def reset(self):
        self.num_replicas = self.process_set.size() or 1
        self.rank = max(self.process_set.rank() or 0, 0)
        order = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        self.remaining_indices = [i for i in order if i not in self.processed_indices]
        # Padded to a multiple of the members, as DistributedSampler does.
        self.num_samples = int(math.ceil(len(self.remaining_indices) / self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas
        padded = self.remaining_indices + self.remaining_indices[
            :self.total_size - len(self.remaining_indices)]
        self.indices = padded[self.rank:self.total_size:self.num_replicas]

    def __iter__(self):
        return iter(self.indices)

    def __len__(self):
        return self.num_samples
