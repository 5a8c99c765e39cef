"""Prints "identity <rank> <size> <local_rank> <local_size>" as tutti.torch sees them."""
import tutti.torch as hvd

hvd.init()
print(f"identity {hvd.rank()} {hvd.size()} {hvd.local_rank()} {hvd.local_size()}", flush=True)
hvd.barrier()
hvd.shutdown()
