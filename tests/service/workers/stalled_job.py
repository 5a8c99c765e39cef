"""Rank of a job the status-page test watches: after a warm-up allreduce, ranks 0 and 1 submit
'grad/stuck' while rank 2 waits for a line on stdin, then submits it with another shape, so that
the negotiation fails with a mismatch on every rank. Prints "warm", then "mismatch <message>"."""
import sys

import numpy as np

import tutti

tutti.init()
rank = tutti.rank()
tutti.allreduce(np.ones(4, np.float32), name="warmup")
print("warm", flush=True)
if rank == 2:
    sys.stdin.readline()
    shape = 3
else:
    shape = 4
try:
    tutti.allreduce(np.ones(shape, np.float32), name="grad/stuck")
    print("no error", flush=True)
except tutti.MismatchError as e:
    print(f"mismatch {e}", flush=True)
tutti.shutdown()
