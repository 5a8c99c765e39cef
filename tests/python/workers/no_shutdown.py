"""Rank 1 exits without calling shutdown(); the atexit hook still says goodbye, so rank 0, waiting
for it, learns at once that it finalized (not 5 s later, from the lease). Rank 0 prints
"peer lost after <seconds> s: <message>"."""
import time

import torch

import tutti
import tutti.torch as hvd

hvd.init()
assert float(hvd.allreduce(torch.ones(2), op=hvd.Sum)[0]) == hvd.size()
if hvd.rank() == 0:
    start = time.monotonic()
    try:
        hvd.allreduce(torch.ones(2), name="never")
    except tutti.PeerLostError as e:
        print(f"peer lost after {time.monotonic() - start:.1f} s: {e}", flush=True)
    hvd.shutdown()
print("exiting", flush=True)
