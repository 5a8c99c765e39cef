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
