"""A Python rank of the mixed-language job (tests/bindings/mixed_job.py): the same steps as
mixed_rank.c, the Rust and the Go rank, through the ctypes package. Python takes ranks 0 and 4;
rank 4 is the one rank outside the set."""
import sys

import numpy as np

import tutti

PYTHON = 1  # each language's code: python 1, c 2, rust 3, go 4


def main():
    tutti.init()  # coordinator, job, token, rank and size from TUTTI_*
    rank, size = tutti.rank(), tutti.size()
    members = [0, 1, 2, 3]
    set_id = tutti.add_process_set(members)  # every rank adds it; rank 4 returns at once
    failures = []
    if rank in members:
        values = np.array([rank + 1, 0.5 * (rank + 1), PYTHON], dtype=np.float32)
        summed = tutti.allreduce(values, name="mixed.values", process_set=set_id)
        if summed.tolist() != [10.0, 5.0, 10.0]:
            failures.append(f"set allreduce {summed.tolist()}")
        languages = tutti.allgather(np.array([PYTHON], dtype=np.int32), name="mixed.languages",
                                    process_set=set_id)
        if languages.tolist() != [1, 2, 3, 4]:
            failures.append(f"set allgather {languages.tolist()}")
    else:
        try:
            tutti.allreduce(np.zeros(3, np.float32), name="mixed.values", process_set=set_id)
            failures.append("a non-member's allreduce succeeded")
        except tutti.NotAMemberError as e:
            if str(e) != f"rank {rank} is not a member of process set {set_id}":
                failures.append(f"non-member message {str(e)!r}")
    world = tutti.allreduce(np.array([1], dtype=np.int64), name="mixed.world")
    if world.tolist() != [size]:
        failures.append(f"world allreduce {world.tolist()}")
    tutti.shutdown()
    for f in failures:
        print(f"rank {rank} (python): {f}", file=sys.stderr)
    print(f"rank {rank} (python): mixed {'ok' if not failures else 'WRONG'}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
