"""NumPy versions of the library's compressed allreduces (docs/compression.md), step for step, to
compare with what the ranks computed: the same chunks, the same order of additions, the same
roundings, so results must match bit for bit."""
import numpy as np


def even_chunks(count, n):
    """(begin, size) per member: the first count % n chunks get one element more."""
    base, extra = divmod(count, n)
    sizes = [base + (1 if c < extra else 0) for c in range(n)]
    begins = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
    return list(zip(begins, sizes))


def to_bf16(values):
    """float32 -> bfloat16 bits (uint16), round to nearest even (finite inputs)."""
    bits = np.asarray(values, np.float32).view(np.uint32).astype(np.uint64)
    bits = bits + 0x7FFF + ((bits >> 16) & 1)
    return ((bits >> 16) & 0xFFFF).astype(np.uint16)


def from_bf16(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def codec(kind):
    if kind == "fp16":
        return (lambda v: np.asarray(v, np.float32).astype(np.float16),
                lambda e: e.astype(np.float32))
    return to_bf16, from_bf16


def cast_ring_allreduce(inputs, kind):
    """The fp16/bf16 ring: reduce-scatter sending 16 bits and adding in float32, then each chunk's
    owner encodes it once and everyone decodes those bits."""
    encode, decode = codec(kind)
    n = len(inputs)
    data = [np.array(x, np.float32) for x in inputs]
    chunks = even_chunks(len(data[0]), n)
    piece = lambda i, c: data[i][chunks[c][0]:chunks[c][0] + chunks[c][1]]
    for s in range(n - 1):
        sent = [encode(piece(i, (i - s) % n)) for i in range(n)]
        for i in range(n):
            piece(i, (i - s - 1) % n)[...] += decode(sent[(i - 1) % n])
    result = np.empty_like(data[0])
    for i in range(n):
        owned = (i + 1) % n
        b, size = chunks[owned]
        result[b:b + size] = decode(encode(piece(i, owned)))
    return result


class TopK:
    """Top-k with error feedback over n members, one tensor."""

    def __init__(self, n, count, ratio):
        self.k = min(count, max(1, int(np.ceil(ratio * count))))
        self.errors = [np.zeros(count, np.float32) for _ in range(n)]

    def step(self, inputs):
        selected = []
        for m, x in enumerate(inputs):
            corrected = np.asarray(x, np.float32) + self.errors[m]
            magnitude = np.abs(corrected)
            # Larger magnitude first, then the lower index.
            order = np.lexsort((np.arange(len(corrected)), -magnitude))[:self.k]
            index = np.sort(order)
            selected.append((index, corrected[index].copy()))
            corrected[index] = 0
            self.errors[m] = corrected
        total = np.zeros(len(inputs[0]), np.float32)
        for index, values in selected:  # member by member, in set order
            total[index] += values
        return total
