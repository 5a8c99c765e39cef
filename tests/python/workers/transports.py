"""Allreduce over the transport named in argv[1] ("auto", "tcp" or "shm"), then prints
"link <peer> <transport> <connected>" from tutti.peer_stats and "transports ok"."""
import sys

import numpy as np

import tutti

tutti.init(transport=sys.argv[1])
rank, size = tutti.rank(), tutti.size()
values = np.arange(1 << 18, dtype=np.float32) + rank
np.testing.assert_array_equal(tutti.allreduce(values),
                              sum(np.arange(1 << 18, dtype=np.float32) + r for r in range(size)))
for peer in range(size):
    if peer != rank:
        stats = tutti.peer_stats(peer)
        assert stats["bytes_sent"] > 0 and stats["bytes_received"] > 0, stats
        print("link", peer, stats["transport"], stats["connected"], flush=True)
try:
    tutti.peer_stats(rank)
except tutti.InvalidArgumentError as e:
    print("self", e, flush=True)
print("transports ok", flush=True)
