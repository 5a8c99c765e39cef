"""Adasum (Maleki et al., "Scaling Distributed Training with Adaptive Summation"), the reduction
behind op=hvd.Adasum, over tutti's point-to-point messages.

The result is Horovod's tree of pairwise Adasum: at level k member i (its position in the set)
combines its vector with that of member i XOR 2^k, the lower position's vector as `a`:

    adasum(a, b) = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b

with a coefficient of 1 where a squared norm is below sqrt(DBL_MIN), dot products and norms in
float64, as Horovod's CPU path computes them. Both partners compute the same combination, so
after log2(n) levels every member holds the same result. Each level exchanges whole vectors
(recursive doubling) where Horovod's CPU path halves them: the same tree, more bytes for large
tensors (docs/python.md, porting table). Sets whose size is not a power of two are refused.

Runs at submission, on the calling thread; the returned request is already complete. Messages
use tags at or above 2**30, derived from the tensor's name, so concurrent Adasum calls on
different tensors never take each other's messages.
"""
import itertools
import math
import sys
import zlib

import torch

import tutti as _tutti
from tutti.errors import InvalidArgumentError, UnsupportedError

from .process_sets import set_id
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
    """adasum(a, b) of two float64 vectors, as Horovod computes it."""
    dot = float(torch.dot(a, b))
    anormsq, bnormsq = float(torch.dot(a, a)), float(torch.dot(b, b))
    acoeff = 1.0 - dot / anormsq * 0.5 if anormsq >= _SQRT_DBL_MIN else 1.0
    bcoeff = 1.0 - dot / bnormsq * 0.5 if bnormsq >= _SQRT_DBL_MIN else 1.0
    return acoeff * a + bcoeff * b


def check(tensor, process_set):
    """The set's members, or the error Horovod gives for what Adasum cannot reduce."""
    if tensor.dtype not in _FLOATING:
        raise InvalidArgumentError(f"Adasum reduces floating tensors only, not {tensor.dtype}")
    if tensor.device.type != "cpu":
        raise UnsupportedError("Adasum on CUDA tensors is not supported by tutti yet: reduce a "
                               "CPU copy")
    members = _tutti.process_set_ranks(set_id(process_set))
    n = len(members)
    if n & (n - 1):
        raise UnsupportedError(f"Running Adasum with non-power of 2 ranks is not supported yet "
                               f"(the process set has {n} ranks)")
    return members


def _tag(name, level):
    return _TAG_BASE | ((zlib.crc32(name.encode()) & 0xFFFFFF) << 5) | level


def allreduce(source, output, name, prescale, postscale, process_set):
    """Adasum of `source` over the set into `output` (may be `source`); returns Done."""
    members = check(source, process_set)
    if name is None:
        name = f"adasum.noname.{next(_unnamed)}"
    rt, sid = _tutti._rt(), set_id(process_set)
    position = members.index(_tutti.rank())
    mine = contiguous(source.detach()).reshape(-1).to(torch.float64)
    if prescale != 1.0:
        mine = mine * prescale
    theirs = torch.empty_like(mine)
    distance, level = 1, 0
    while distance < len(members):
        peer_position = position ^ distance
        peer, tag = members[peer_position], _tag(name, level)
        outgoing = mine.clone()
        send = rt.send(buffer(outgoing), peer, tag, sid)
        rt.recv(buffer(theirs), peer, tag, sid).wait()
        send.wait()
        lower, upper = (mine, theirs) if position < peer_position else (theirs, mine)
        mine = combine(lower, upper)
        distance, level = distance * 2, level + 1
    if postscale != 1.0:
        mine = mine * postscale
    output.copy_(mine.reshape(output.shape).to(output.dtype))
    return Done(output)


def tree(vectors):
    """The Adasum tree evaluated directly on a list of 2^k float64 vectors (tests use it)."""
    level = [v.to(torch.float64) for v in vectors]
    while len(level) > 1:
        level = [combine(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]
