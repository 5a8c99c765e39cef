"""The NCCL path with several ranks, on the simulated GPU (tests/gpu_sim/sim_nccl.h: a
communicator between processes made from the id tuttid relays), through the array core's device
path: what a multi-GPU job does that a one-GPU machine cannot show. Each rank puts its arrays on
simulated GPU `rank` (own GPUs: NCCL) unless a scenario says otherwise. Prints "ok <name>".

Scenarios (argv[1]): "collectives" (every collective and dtype on NCCL, communicators per set and
device combination, a set mixing shared and own GPUs); "lost_peer" (the last rank leaves without a
word while the others run an NCCL allreduce: they fail with PeerLostError, no hang); "reformed"
(an elastic job loses a rank and goes on with device arrays on NCCL in the next epoch)."""
import os
import sys

import numpy as np
from sim_device import SimArray, SimHooks, check, sim

import tutti
from tutti import _arrays

tutti.init()
rank, size = tutti.rank(), tutti.size()
hooks = SimHooks()
values = hooks.values


def communicators():
    return sim.tutti_sim_communicators_created()


def collectives():
    total = sum(np.arange(12, dtype=np.float32) + r for r in range(size))
    got = _arrays.allreduce(SimArray(np.arange(12, dtype=np.float32) + rank, rank), name="sum",
                            hooks=hooks)
    check("allreduce", np.array_equal(values(got), total) and got.device == rank, values(got))
    check("one_communicator_made", communicators() == 1, communicators())
    for dtype in (np.float16, np.float64, np.int8, np.uint8, np.int32, np.int64):
        mine = SimArray((np.arange(6) % 3 + rank).astype(dtype), rank)
        got = _arrays.allreduce(mine, op=tutti.Max, name=f"max.{np.dtype(dtype).name}", hooks=hooks)
        check(f"max_{np.dtype(dtype).name}", np.array_equal(values(got), (np.arange(6) % 3 + size - 1)
                                                           .astype(dtype)), values(got))
    got = _arrays.allreduce(SimArray(np.array([True, False, rank == 0]), rank), op=tutti.Sum,
                            name="bool or", hooks=hooks)
    check("bool_or", values(got).tolist() == [True, False, True], values(got))
    got = _arrays.allreduce(SimArray(np.full(5, 7 + rank, np.int32), rank), op=tutti.Average,
                            postscale_factor=2.0, name="int average", hooks=hooks)
    average = int(sum(7 + r for r in range(size)) / size) * 2  # divides (truncating), then scales
    check("int_average_postscale", np.array_equal(values(got), np.full(5, average, np.int32)),
          values(got))
    got = _arrays.allreduce(SimArray(np.full(4, 3, np.float16), rank), prescale_factor=0.1,
                            name="half prescale", hooks=hooks)
    one = np.float16(np.float16(3) * np.float16(0.1))  # float16 in float16, as Horovod's kernel
    expected = np.float16(0)
    for _ in range(size):
        expected = np.float16(np.float32(expected) + np.float32(one))
    check("float16_prescale_in_float16", np.array_equal(values(got), np.full(4, expected)),
          (values(got), expected))
    a, b, c = _arrays.grouped_allreduce([SimArray(np.ones(3, np.float32), rank),
                                         SimArray(np.full(1000, rank, np.float32), rank),
                                         SimArray(np.arange(7, dtype=np.float32), rank)],
                                        op=tutti.Average, name="fused", hooks=hooks)
    check("fused_allreduce", np.array_equal(values(a), np.ones(3)) and
          np.array_equal(values(b), np.full(1000, (size - 1) / 2, np.float32)) and
          np.array_equal(values(c), np.arange(7, dtype=np.float32)), (values(a), values(b)[:3]))
    got = _arrays.broadcast(SimArray(np.full(9, rank, np.int64), rank), size - 1, name="broadcast",
                            hooks=hooks)
    check("broadcast", np.array_equal(values(got), np.full(9, size - 1)), values(got))
    got = _arrays.allgather(SimArray(np.full((rank + 1, 2), rank, np.int32), rank), name="ragged",
                            hooks=hooks)
    rows = np.concatenate([np.full((r + 1, 2), r, np.int32) for r in range(size)])
    check("allgather_uneven", np.array_equal(values(got), rows), values(got))
    got = _arrays.allgather(SimArray(np.full((2, 3), rank, np.float64), rank), name="even",
                            hooks=hooks)
    check("allgather_even", np.array_equal(values(got), np.repeat(np.arange(size), 2)[:, None]
                                           * np.ones((1, 3))), values(got))
    x, y = _arrays.grouped_allgather([SimArray(np.array([rank], np.int64), rank),
                                      SimArray(np.full(rank + 1, rank, np.uint8), rank)],
                                     name="grouped gather", hooks=hooks)
    check("grouped_allgather", np.array_equal(values(x), np.arange(size)) and
          len(values(y)) == size * (size + 1) // 2, (values(x), values(y)))
    got = _arrays.reducescatter(SimArray(np.ones((2 * size, 3), np.float32) * (rank + 1), rank),
                                name="scatter even", hooks=hooks)
    check("reducescatter_even", np.array_equal(values(got), np.full((2, 3), size * (size + 1) / 2,
                                                                     np.float32)), values(got))
    got = _arrays.reducescatter(SimArray(np.arange(size + 1, dtype=np.int64), rank),
                                name="scatter uneven", hooks=hooks)
    first = 0 if rank == 0 else 2 + (rank - 1)  # member 0 gets 2 rows, the others 1
    count = 2 if rank == 0 else 1
    check("reducescatter_uneven", values(got).tolist() == [size * i for i in
                                                            range(first, first + count)],
          values(got))
    splits = [r + 1 for r in range(size)]
    got, received = _arrays.alltoall(SimArray(np.full(sum(splits), rank, np.int32), rank),
                                     splits=splits, name="alltoall", hooks=hooks)
    check("alltoall_splits", np.array_equal(values(got), np.repeat(np.arange(size), rank + 1)) and
          list(received) == [rank + 1] * size, (values(got), received))
    check("still_one_communicator", communicators() == 1, communicators())

    # Another device combination of the world (every rank on the next GPU): a communicator of
    # its own; the first one still serves its combination.
    got = _arrays.allreduce(SimArray(np.ones(3, np.float32), (rank + 1) % size), name="rotated",
                            hooks=hooks)
    check("second_device_combination", np.array_equal(values(got), np.full(3, float(size))) and
          communicators() == 2, communicators())
    got = _arrays.allreduce(SimArray(np.ones(3, np.float32), rank), name="own again", hooks=hooks)
    check("first_combination_reused", np.array_equal(values(got), np.full(3, float(size))) and
          communicators() == 2, communicators())

    # A set of its own (ranks 0, 2, 3 when size is 4): a communicator of its own on its members.
    members = [r for r in range(size) if r != 1]
    the_set = tutti.add_process_set(members)  # its id
    if rank in members:
        got = _arrays.allreduce(SimArray(np.full(2, rank, np.float32), rank), name="subset",
                                set_id=the_set, hooks=hooks)
        check("subset_on_nccl", np.array_equal(values(got), np.full(2, float(sum(members)))) and
              communicators() == 3, (values(got), communicators()))
    else:  # not a member: it made no communicator for the set
        check("subset_on_nccl", communicators() == 2, communicators())
    # The world with ranks 0 and 1 sharing GPU 0 and the others on their own: staged for every
    # member alike, and correct; no communicator for it.
    device = 0 if rank <= 1 else rank
    got = _arrays.allreduce(SimArray(np.full(4, rank + 1, np.int64), device), name="shared and own",
                            hooks=hooks)
    made = 3 if rank in members else 2
    check("shared_and_own_staged", np.array_equal(values(got), np.full(4, size * (size + 1) // 2))
          and communicators() == made, (values(got), communicators()))
    tutti.remove_process_set(the_set)


def lost_peer():
    # One NCCL allreduce to make the communicator, then the last rank leaves.
    got = _arrays.allreduce(SimArray(np.ones(4, np.float32), rank), name="before", hooks=hooks)
    check("before_the_loss", np.array_equal(values(got), np.full(4, float(size))))
    if rank == size - 1:
        os._exit(0)  # gone without a word: its peers' collective would wait for it forever
    try:
        _arrays.allreduce(SimArray(np.ones(1 << 16, np.float32), rank), name="after", hooks=hooks)
    except tutti.PeerLostError as e:
        check("peer_lost", f"rank {size - 1}" in str(e), e)
    except Exception as e:  # noqa: BLE001 - the class is what the check is about
        check("peer_lost", False, f"{type(e).__name__}: {e}")
    else:
        check("peer_lost", False, "no error")


def reformed():
    """Elastic (tuttirun --min-np): the last rank dies after an NCCL allreduce; the survivors see
    the loss on their next one, join the next membership epoch and go on with device arrays on
    the NCCL path of the smaller world, with a communicator made for it."""
    got = _arrays.allreduce(SimArray(np.ones(4, np.float32), rank), name="epoch 0", hooks=hooks)
    check("before_the_reformation", np.array_equal(values(got), np.full(4, float(size))))
    if rank == size - 1:
        os._exit(3)
    try:
        while True:  # until the loss reaches this rank's collectives
            _arrays.allreduce(SimArray(np.ones(4, np.float32), rank), name="tick", hooks=hooks)
    except tutti.TuttiError as e:
        check("loss_seen", isinstance(e, (tutti.PeerLostError, tutti.ReformedError)), e)
    tutti.await_membership_epoch(1, 60000)
    new_rank, new_size = tutti.rank(), tutti.size()
    made = communicators()
    ok = True
    for step in range(3):
        got = _arrays.allreduce(SimArray(np.full(4, new_rank + 1, np.float32), new_rank),
                                name=f"epoch 1.{step}", hooks=hooks)
        ok = ok and np.array_equal(values(got), np.full(4, float(new_size * (new_size + 1) // 2)))
    check("nccl_after_the_reformation", ok and new_size == size - 1 and communicators() == made + 1,
          (values(got), new_size, communicators(), made))


{"collectives": collectives, "lost_peer": lost_peer, "reformed": reformed}[sys.argv[1]]()
if sys.argv[1] != "lost_peer":
    tutti.shutdown()
