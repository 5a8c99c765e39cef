"""Each user error maps to its exception class with the library's message, on every rank.
Prints "error <label> <ExceptionClass> <message>" lines, then "errors ok"."""
import numpy as np

import tutti


def expect(label, exception, function):
    try:
        function()
    except exception as e:
        print(f"error {label} {type(e).__name__} {e}", flush=True)
        return e
    raise AssertionError(f"{label}: no {exception.__name__}")


tutti.init()
rank = tutti.rank()
expect("mismatch", tutti.MismatchError,
       lambda: tutti.allreduce(np.ones(4 if rank == 0 else 3, np.float32), name="shape"))
expect("unknown-set", tutti.UnknownSetError, lambda: tutti.allreduce(np.ones(1, np.float32), process_set=99))
only_zero = tutti.add_process_set([0])
if rank != 0:
    expect("not-a-member", tutti.NotAMemberError,
           lambda: tutti.allreduce(np.ones(1, np.float32), process_set=only_zero))
expect("dtype", tutti.InvalidArgumentError, lambda: tutti.allreduce(np.ones(2, np.complex64)))
expect("root", tutti.InvalidArgumentError, lambda: tutti.broadcast(np.ones(2, np.float32), root=7))
# A wait that expires leaves the request pending; it then completes once the peer submits.
if rank == 0:
    handle = tutti.allreduce_async(np.ones(2, np.float32), name="late")
    expect("wait-timeout", tutti.TimeoutError, lambda: handle.wait(timeout_ms=200))
    assert isinstance(tutti.TimeoutError("x"), TimeoutError)
    tutti.barrier()
    assert handle.wait()[0] == 2
else:
    tutti.barrier()
    tutti.allreduce(np.ones(2, np.float32), name="late")
tutti.shutdown()
expect("not-initialized", tutti.InvalidArgumentError, lambda: tutti.rank())
print("errors ok")
