"""What every framework's gradient compression shares (horovod's Compression): the compressor
protocol and the one that sends tensors as they are. Each binding adds its own fp16 compressor,
since casting is the framework's business."""


class Compressor:
    @staticmethod
    def compress(tensor):
        """Returns the tensor to send and what decompress needs."""
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


# The library's compressors (docs/compression.md): the tensor goes to the allreduce as it is, and
# libtutti compresses it on the wire, reduces in float32 and hands back float32. Every binding
# passes the same settings through tutti_allreduce_options_t, so every language gets them.
_KINDS = {"fp16": 1, "bf16": 2, "topk": 3, "adaptive": 4}


class WireCompressor(Compressor):
    """A compressor the library runs (float32 host tensors; others are reduced exactly, as
    Horovod's fp16 leaves non-floating tensors alone). compress/decompress pass the tensor
    through, so it fits wherever a Horovod compressor does."""

    def __init__(self, kind, ratio=0.01, compressor=None, interval=10, min_bytes=65536,
                 max_change=0.2):
        from .errors import InvalidArgumentError
        if kind not in _KINDS:
            raise InvalidArgumentError(f"unknown library compressor {kind!r}")
        if compressor is not None and not (isinstance(compressor, WireCompressor) and
                                           compressor.kind in ("fp16", "bf16", "topk")):
            raise InvalidArgumentError("adaptive compression needs Compression.wire_fp16, "
                                       "wire_bf16 or topk(...) as its compressor")
        self.kind, self.ratio = kind, ratio
        self.compressor = compressor
        self.interval, self.min_bytes, self.max_change = interval, min_bytes, max_change

    def compress(self, tensor):
        return tensor, None

    def decompress(self, tensor, ctx):
        return tensor

    def fill(self, options):
        """Writes these settings into a tutti_allreduce_options_t."""
        options.compression = _KINDS[self.kind]
        inner = self.compressor or self
        options.compression_ratio = inner.ratio
        if self.kind == "adaptive":
            options.adaptive_compressor = _KINDS[(self.compressor or bf16).kind]
            options.adaptive_interval = self.interval
            options.adaptive_min_bytes = self.min_bytes
            options.adaptive_max_change = self.max_change

    def __repr__(self):
        if self.kind == "topk":
            return f"Compression.topk({self.ratio})"
        if self.kind == "adaptive":
            return (f"Compression.adaptive({self.compressor or bf16!r}, interval={self.interval}, "
                    f"min_bytes={self.min_bytes}, max_change={self.max_change})")
        return f"Compression.wire_{self.kind}"


fp16 = WireCompressor("fp16")
bf16 = WireCompressor("bf16")


def topk(ratio=0.01):
    """Sends each member's `ratio` largest-magnitude elements (plus the error kept from earlier
    steps of the same tensor name); the rest waits for later steps (error feedback)."""
    return WireCompressor("topk", ratio=ratio)


def adaptive(compressor=None, interval=10, min_bytes=65536, max_change=0.2):
    """Per tensor, every `interval` allreduces: compress with `compressor` (default bf16) the
    tensors of at least `min_bytes` whose reduced gradient's norm spread by at most
    `max_change` ((max - min) / max) over the last interval; keep the others exact. Every member decides
    alike, from the reduced results they share."""
    return WireCompressor("adaptive", compressor=compressor, interval=interval,
                          min_bytes=min_bytes, max_change=max_change)


def wire_settings(compression, tensor_is_float32_host=True):
    """The library settings `compression` asks for on one tensor: None for Horovod-style
    (framework-side) compressors, and for tensors the library does not compress."""
    if isinstance(compression, WireCompressor) and tensor_is_float32_host:
        return compression
    return None
