"""Recycled host memory for large results (out-of-place allreduce outputs, gathered results):
memory whose pages were touched once, handed out again instead of a fresh allocation.

Why: a fresh allocation of many MiB comes from mmap, and its first write faults in and zeroes
every page; on an out-of-place 64 MiB allreduce that costs more than the collective itself
(docs/python.md, "Where the time goes"). A training loop asks for the same sizes every step, so
the blocks are kept by exact byte size.

A block goes back to the pool when the last tensor or array made from it is gone (the DLPack
deleter or the NumPy base drops the last reference to the _Block). Blocks below `MIN_BYTES` are
not pooled (the allocator serves them well); the free blocks kept are bounded by
`MAX_FREE_BYTES` in all, the oldest size dropped first.

Threads: any thread may take and give back blocks (a framework may free a tensor on its own
threads); one lock guards the free lists.
"""
import collections
import threading

import numpy as np

MIN_BYTES = 1 << 20
MAX_FREE_BYTES = 1 << 30


class _Block:
    """One pooled allocation: `array`, uint8 of the block's size. It returns to the pool when
    collected."""

    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    @property
    def pointer(self):
        return self.array.ctypes.data

    def __del__(self):
        if _pool is not None:  # None while the interpreter shuts down
            _pool.give_back(self.array)


class _Pool:
    def __init__(self):
        self._lock = threading.Lock()
        self._free = collections.OrderedDict()  # byte size -> [uint8 arrays], oldest size first
        self._free_bytes = 0

    def take(self, nbytes):
        with self._lock:
            arrays = self._free.get(nbytes)
            if arrays:
                self._free_bytes -= nbytes
                array = arrays.pop()
                if not arrays:
                    del self._free[nbytes]
                return _Block(array)
        return _Block(np.empty(nbytes, np.uint8))

    def give_back(self, array):
        nbytes = array.nbytes
        if nbytes > MAX_FREE_BYTES:
            return
        with self._lock:
            while self._free_bytes + nbytes > MAX_FREE_BYTES and self._free:
                size, arrays = next(iter(self._free.items()))
                arrays.pop()
                self._free_bytes -= size
                if not arrays:
                    del self._free[size]
            self._free.setdefault(nbytes, []).append(array)
            self._free.move_to_end(nbytes)
            self._free_bytes += nbytes

    def free_bytes(self):
        with self._lock:
            return self._free_bytes

    def clear(self):
        with self._lock:
            self._free.clear()
            self._free_bytes = 0


_pool = _Pool()


def take(nbytes):
    """A block of `nbytes` (recycled where one of that size is free), or None below MIN_BYTES."""
    if nbytes < MIN_BYTES:
        return None
    return _pool.take(nbytes)


free_bytes = _pool.free_bytes
clear = _pool.clear
