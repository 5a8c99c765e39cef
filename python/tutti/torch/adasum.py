"""Adasum (Maleki et al., "Scaling Distributed Training with Adaptive Summation"), the reduction
behind op=hvd.Adasum, over tutti's point-to-point messages.

The result is Horovod's tree of pairwise Adasum: at level k member i (its position in the set)
combines its vector with that of member i XOR 2^k, the lower position's vector as `a`:

    adasum(a, b) = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b

with a coefficient of 1 where a squared norm is below sqrt(DBL_MIN), dot products and norms in
float64, as Horovod's CPU path computes them. The algorithm is Horovod's recursive vector
halving: at level k the two partners split the segment they hold, each keeps one half and gets
the partner's copy of it, the 2^(k+1) members of the block sum their partial dot products and
norms (a butterfly over the block, so every member gets the same sums), and each combines its
half; after the last level every member holds 1/n of the result, and the levels are undone in
reverse to gather it (distance doubling). Sets whose size is not a power of two are refused.

CUDA tensors take the same algorithm on their device, their messages staged through host memory
by the library (docs/gpu.md, "Send and recv"); Horovod's GPU Adasum sums within a node with NCCL
first, so where ranks share a host its results differ from this (and from Horovod's CPU Adasum).

Runs at submission, on the calling thread; the returned request is already complete. Messages
use tags at or above 2**30, derived from the tensor's name, so concurrent Adasum calls on
different tensors never take each other's messages.
"""
import itertools
import math
import sys
import zlib

import torch

from tutti import _runtime, _world
from tutti.errors import InvalidArgumentError, UnsupportedError

from tutti._process_sets import set_id
from .tensors import buffer, contiguous

_TAG_BASE = 1 << 30
_FLOATING = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_SQRT_DBL_MIN = math.sqrt(sys.float_info.min)
_unnamed = itertools.count()


class Done:
    """A completed request (what the handles wait on)."""

    def __init__(self, result=None):
        self.result = result

    def wait(self, timeout_ms=None):
        return self.result

    def poll(self):
        return True


class Group:
    """Several completed requests as one."""

    def __init__(self, requests):
        self.requests = requests

    def wait(self, timeout_ms=None):
        return [r.wait() for r in self.requests]

    def poll(self):
        return True


def combine(a, b):
    """adasum(a, b) of two whole float64 vectors (the formula; tree() uses it)."""
    dot = float(torch.dot(a, b))
    anormsq, bnormsq = float(torch.dot(a, a)), float(torch.dot(b, b))
    acoeff = 1.0 - dot / anormsq * 0.5 if anormsq >= _SQRT_DBL_MIN else 1.0
    bcoeff = 1.0 - dot / bnormsq * 0.5 if bnormsq >= _SQRT_DBL_MIN else 1.0
    return acoeff * a + bcoeff * b


def check(tensor, process_set):
    """The set's members, or the error Horovod gives for what Adasum cannot reduce."""
    if tensor.dtype not in _FLOATING:
        raise InvalidArgumentError(f"Adasum reduces floating tensors only, not {tensor.dtype}")
    members = _world.process_set_ranks(set_id(process_set))
    n = len(members)
    if n & (n - 1):
        raise UnsupportedError(f"Running Adasum with non-power of 2 ranks is not supported yet "
                               f"(the process set has {n} ranks)")
    return members


def _tag(name, step):
    return _TAG_BASE | ((zlib.crc32(name.encode()) & 0x3FFFFF) << 7) | step


class _Exchange:
    """Swaps tensors with peers of the set, one tag per step of one Adasum call."""

    def __init__(self, name, set_id):
        self.rt, self.name, self.set_id, self.step = _runtime.get(), name, set_id, 0

    def swap(self, peer, outgoing, incoming):
        if self.step >= 128:
            raise UnsupportedError("Adasum supports process sets of up to 1024 ranks")
        tag = _tag(self.name, self.step)
        self.step += 1
        send = self.rt.send(buffer(outgoing), peer, tag, self.set_id)
        self.rt.recv(buffer(incoming), peer, tag, self.set_id).wait()
        send.wait()


def allreduce(source, output, name, prescale, postscale, process_set):
    """Adasum of `source` over the set into `output` (may be `source`); returns Done."""
    members = check(source, process_set)
    if name is None:
        name = f"adasum.noname.{next(_unnamed)}"
    exchange = _Exchange(name, set_id(process_set))
    position, n = members.index(_world.rank()), len(members)
    vector = contiguous(source.detach()).reshape(-1).to(torch.float64)
    if prescale != 1.0:
        vector = vector * prescale
    lo, hi = 0, vector.numel()
    segments = []  # (lo, hi) held before each level, to undo them in reverse
    distance = 1
    while distance < n:
        peer_position = position ^ distance
        lower = position < peer_position
        mid = lo + (hi - lo) // 2
        keep = (lo, mid) if lower else (mid, hi)
        give = (mid, hi) if lower else (lo, mid)
        theirs = torch.empty(keep[1] - keep[0], dtype=torch.float64, device=vector.device)
        exchange.swap(members[peer_position], vector[give[0]:give[1]].contiguous(), theirs)
        mine = vector[keep[0]:keep[1]]
        a, b = (mine, theirs) if lower else (theirs, mine)
        # Partial sums over this half; the block of 2 * distance members holds the whole vectors.
        sums = torch.stack([torch.dot(a, b), torch.dot(a, a), torch.dot(b, b)])
        step = 1
        while step <= distance:
            other = torch.empty(3, dtype=torch.float64, device=vector.device)
            exchange.swap(members[position ^ step], sums, other)
            sums = sums + other  # commutative: both sides get the same bits
            step *= 2
        dot, anormsq, bnormsq = sums.tolist()
        acoeff = 1.0 - dot / anormsq * 0.5 if anormsq >= _SQRT_DBL_MIN else 1.0
        bcoeff = 1.0 - dot / bnormsq * 0.5 if bnormsq >= _SQRT_DBL_MIN else 1.0
        vector[keep[0]:keep[1]] = acoeff * a + bcoeff * b
        segments.append((lo, hi, keep, give))
        lo, hi = keep
        distance *= 2
    # Undo the halving: each level's partners swap the halves they computed.
    while segments:
        distance //= 2
        lo, hi, keep, give = segments.pop()
        received = torch.empty(give[1] - give[0], dtype=torch.float64, device=vector.device)
        exchange.swap(members[position ^ distance], vector[keep[0]:keep[1]].contiguous(),
                      received)
        vector[give[0]:give[1]] = received
    if postscale != 1.0:
        vector = vector * postscale
    output.copy_(vector.reshape(output.shape).to(output.dtype))
    return Done(output)


def tree(vectors):
    """The Adasum tree evaluated directly on a list of 2^k float64 vectors (tests use it)."""
    level = [v.to(torch.float64) for v in vectors]
    while len(level) > 1:
        level = [combine(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]
