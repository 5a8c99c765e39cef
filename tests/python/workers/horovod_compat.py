"""horovod.torch behaviour, check by check, in one job (tests/python/test_horovod_compat.py).

Each check prints "ok NAME" or "fail NAME: <error>" and the job goes on, so one failure does not
hide the others; the exit status is 1 if any check failed. Checks that compare with a
single-process reference build every rank's inputs locally from per-rank seeds.
"""
import os
import sys
import traceback
import warnings

import torch

import tutti
import tutti.torch as hvd
from tutti.torch import adasum

failed = []
ONLY = set(sys.argv[1:])  # check names to run (default: all)


def check(function):
    name = function.__name__
    if ONLY and name not in ONLY:
        return function
    try:
        function()
        print(f"ok {name}", flush=True)
    except Exception as e:  # noqa: BLE001 - reported, and the job goes on
        failed.append(name)
        last = traceback.format_exc().strip().splitlines()[-3:]
        print(f"fail {name}: {type(e).__name__}: {e} | {' / '.join(last)}", flush=True)
    if not hvd.is_initialized():
        hvd.init()
    hvd.barrier()  # the next check starts together
    return function


def expect(exception, function, message=None):
    """Runs `function`, which must raise `exception` (with `message` when given)."""
    try:
        function()
    except exception as e:
        if message is not None and str(e) != message:
            raise AssertionError(f"message {str(e)!r} != {message!r}") from e
        return e
    raise AssertionError(f"no {exception.__name__} raised")


def inputs(seed, shape, dtype=torch.float64):
    generator = torch.Generator().manual_seed(1000 + seed)
    return torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype)


hvd.init()
rank, size = hvd.rank(), hvd.size()
hvd.init()  # a second init is a no-op
assert hvd.is_initialized()


# ---- lifecycle ----------------------------------------------------------------------------------
@check
def reinit_with_other_process_sets():
    first = hvd.ProcessSet([0])
    world_twin = hvd.ProcessSet(range(size))
    hvd.shutdown()
    assert not hvd.is_initialized()
    hvd.init(process_sets=[world_twin, first])
    assert world_twin.process_set_id is None  # the global set's ranks, as Horovod
    assert first.process_set_id == 1 and first.size() == 1
    if first.included():
        assert float(hvd.allreduce(torch.ones(1), op=hvd.Sum, process_set=first)) == 1
    hvd.shutdown()
    assert first.process_set_id is None  # invalidated with its runtime
    evens = hvd.ProcessSet(range(0, size, 2))
    again = hvd.ProcessSet([size - 1])
    hvd.init(process_sets=[evens, again])
    assert (evens.process_set_id, again.process_set_id) == (1, 2)  # ids restart
    if evens.included():
        total = hvd.allreduce(torch.ones(1), op=hvd.Sum, process_set=evens)
        assert float(total) == len(evens.ranks)
    hvd.shutdown()
    hvd.init()
    assert evens.process_set_id is None and hvd.size() == size


# ---- process sets called by every rank ----------------------------------------------------------
@check
def every_rank_adds_and_removes_overlapping_sets():
    ps = hvd.ProcessSet
    for round_ in range(3):
        # Proper subsets (the world's ranks are the global set's: adding them is a duplicate).
        lists = [[0], [size - 1]] + ([list(range(1, size))] if size > 2 else [])
        added = [hvd.add_process_set(ps(ranks)) for ranks in lists]
        for s in added:
            assert s.process_set_id is not None
            if s.included():
                got = hvd.allreduce(torch.ones(2), op=hvd.Sum, process_set=s,
                                    name=f"over.{round_}")
                assert float(got[0]) == len(s.ranks), (s, got)
        # Removed by every rank, in another order than added.
        a = added[0]
        for s in added[::-1]:
            assert hvd.remove_process_set(s) is True and s.process_set_id is None
        assert hvd.remove_process_set(a) is False  # no longer registered
    assert hvd.remove_process_set(hvd.global_process_set) is False
    assert hvd.remove_process_set(ps([0])) is False  # never registered


@check
def duplicate_live_set_raises_value_error():
    s = hvd.add_process_set([0])
    try:
        e = expect(ValueError, lambda: hvd.add_process_set([0]))
        assert str(e) == f"Attempted to add a duplicate process set: {hvd.ProcessSet([0])}", e
        e = expect(ValueError, lambda: hvd.add_process_set(range(size)))  # the global set's
        assert str(e).startswith("Attempted to add a duplicate process set"), e
    finally:
        # Duplicates exist while the set is live: a non-member's second add after its members
        # removed the set would add a new one (docs/python.md, porting table).
        hvd.barrier()
        hvd.remove_process_set(s)


@check
def process_set_queries_before_registration():
    s = hvd.ProcessSet([0])
    assert s.size() is None and s.rank() is None and s.included() == (rank == 0)
    expect(ValueError, lambda: hvd.ProcessSet([0.5]))


@check
def horovod_environment_is_read_or_refused():
    # Read at init: test_horovod_compat.py starts this job with HOROVOD_FUSION_THRESHOLD=12345
    # and HOROVOD_CYCLE_TIME=2.5.
    assert os.environ["TUTTI_FUSION_THRESHOLD"] == "12345"
    assert os.environ["TUTTI_CYCLE_TIME_MS"] == "2.5"
    # HOROVOD_AUTOTUNE turns tutti's per-set autotuning on (read, not refused), and
    # HOROVOD_AUTOTUNE_LOG names its CSV of trials.
    os.environ["HOROVOD_AUTOTUNE"] = "1"
    os.environ["HOROVOD_AUTOTUNE_LOG"] = "/tmp/trials.csv"
    try:
        hvd._horovod_env.read()
        assert os.environ["TUTTI_AUTOTUNE"] == "1"
        assert os.environ["TUTTI_AUTOTUNE_LOG"] == "/tmp/trials.csv"
    finally:
        for name in ("HOROVOD_AUTOTUNE", "HOROVOD_AUTOTUNE_LOG", "TUTTI_AUTOTUNE",
                     "TUTTI_AUTOTUNE_LOG"):
            os.environ.pop(name, None)
    # The Bayesian optimiser's knobs have no counterpart: their defaults pass, others are refused.
    os.environ["HOROVOD_AUTOTUNE_WARMUP_SAMPLES"] = "3"
    try:
        hvd._horovod_env.read()
        os.environ["HOROVOD_AUTOTUNE_WARMUP_SAMPLES"] = "5"
        expect(NotImplementedError, hvd._horovod_env.read,
               "HOROVOD_AUTOTUNE_WARMUP_SAMPLES=5 is not supported: tuttid sets the autotuner's "
               "trial lengths (--autotune-trial-tensors, --autotune-trial-ms, "
               "--autotune-warmup-tensors; docs/autotune.md)")
    finally:
        del os.environ["HOROVOD_AUTOTUNE_WARMUP_SAMPLES"]
    os.environ["HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES"] = "40"
    try:
        expect(NotImplementedError, hvd._horovod_env.read,
               "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES=40 is not supported: tutti's autotuner is "
               "a coordinate search with a confirmation round, not Bayesian optimisation "
               "(docs/autotune.md)")
    finally:
        del os.environ["HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES"]
    hvd.shutdown()
    os.environ["HOROVOD_TIMELINE_MARK_CYCLES"] = "1"
    try:
        expect(NotImplementedError, hvd.init,
               "HOROVOD_TIMELINE_MARK_CYCLES=1 is not supported: tutti's timeline has no cycle "
               "markers")
        assert not hvd.is_initialized()
    finally:
        del os.environ["HOROVOD_TIMELINE_MARK_CYCLES"]
        hvd.init()


# ---- exceptions ---------------------------------------------------------------------------------
@check
def failed_collective_is_horovod_internal_error():
    shape = (3,) if rank == 0 else (4,)
    e = expect(hvd.HorovodInternalError, lambda: hvd.allreduce(torch.ones(shape), name="mm"))
    assert isinstance(e, RuntimeError) and type(e).__name__ == "MismatchError", type(e)
    assert str(e).startswith("mismatched 'mm' on process set 0: rank 0 sent allreduce "
                             "float32[3] op=average, rank 1 sent allreduce float32[4]"), str(e)


@check
def duplicate_name_is_value_error():
    # Rank 0's first request stays pending until the others submit theirs, after the barrier.
    if rank == 0:
        first = hvd.allreduce_async(torch.ones(2), name="dup")
        e = expect(ValueError, lambda: hvd.allreduce_async(torch.ones(2), name="dup"),
                   "a request named 'dup' is already pending on process set 0")
        assert type(e).__name__ == "DuplicateNameError"
        hvd.barrier()
    else:
        hvd.barrier()
        first = hvd.allreduce_async(torch.ones(2), name="dup")
    assert float(hvd.synchronize(first)[0]) == 1.0


@check
def non_member_call_is_value_error():
    only_zero = hvd.add_process_set([0])
    try:
        if rank != 0:
            expect(ValueError, lambda: hvd.allreduce(torch.ones(1), process_set=only_zero),
                   f"rank {rank} is not a member of process set {only_zero.process_set_id}")
    finally:
        hvd.remove_process_set(only_zero)


@check
def unsupported_parameters_raise_not_implemented():
    expect(NotImplementedError, lambda: hvd.start_timeline("/tmp/unused.json", mark_cycles=True),
           "start_timeline(mark_cycles=True) is not supported: tutti's timeline has no cycle "
           "markers")
    expect(NotImplementedError, lambda: hvd.reducescatter(torch.ones(size), op=hvd.Adasum),
           "reducescatter does not support Adasum: use hvd.Average or hvd.Sum")
    expect(ValueError, lambda: hvd.allreduce(torch.ones(1), average=True, op=hvd.Sum),
           "The op parameter supersedes average. Please provide only one of them.")


@check
def build_queries_keep_horovods_types():
    assert isinstance(hvd.nccl_built(), int) and isinstance(hvd.cuda_built(), bool)
    for query in (hvd.gloo_built, hvd.ccl_built, hvd.ddl_built, hvd.rocm_built,
                  hvd.mpi_threads_supported, hvd.mpi_enabled, hvd.gloo_enabled):
        assert query() is False, query
    # MPI mode's library beside libtutti (built wherever CMake found an MPI); not in use here.
    here = os.path.dirname(tutti._capi.library_path)
    assert hvd.mpi_built() is os.path.exists(os.path.join(here, "libtutti_mpi.so"))
    assert hvd.is_homogeneous() is True
    assert hvd.synchronize(123456) is None  # an unknown handle, as in Horovod


# ---- dtypes -------------------------------------------------------------------------------------
@check
def every_dtype_on_every_collective():
    dtypes = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
              torch.bfloat16, torch.float32, torch.float64, torch.bool]
    for dtype in dtypes:
        one = torch.ones(size * 2, dtype=dtype)
        if dtype == torch.bool:
            mine = torch.tensor([rank == 0, True, False, rank % 2 == 1] * (size // 2 or 1))
            everyone = [torch.tensor([r == 0, True, False, r % 2 == 1] * (size // 2 or 1))
                        for r in range(size)]
            anyone = torch.stack(everyone).any(0)
            allof = torch.stack(everyone).all(0)
            for op, want in ((hvd.Sum, anyone), (hvd.Max, anyone), (hvd.Min, allof),
                             (hvd.Product, allof)):
                got = hvd.allreduce(mine, op=op, name=f"bool.{op}")
                assert got.dtype == torch.bool and torch.equal(got, want), (op, got, want)
            expect(ValueError, lambda: hvd.allreduce(mine, op=hvd.Average, name="bool.avg"))
        else:
            got = hvd.allreduce(one, op=hvd.Sum, name=f"sum.{dtype}")
            assert got.dtype == dtype and torch.equal(got, torch.full_like(one, size)), got
            got = hvd.allreduce(torch.full((3,), rank + 1, dtype=dtype), op=hvd.Max,
                                name=f"max.{dtype}")
            assert float(got[0]) == size
        gathered = hvd.allgather(torch.full((rank + 1, 2), rank % 2, dtype=dtype),
                                 name=f"ag.{dtype}")
        assert gathered.shape == (size * (size + 1) // 2, 2) and gathered.dtype == dtype
        b = hvd.broadcast(torch.full((2,), rank % 2 == 0, dtype=dtype), root_rank=0,
                          name=f"bc.{dtype}")
        assert bool(b[0]) and b.dtype == dtype
        out = hvd.alltoall(torch.full((size,), rank % 2, dtype=dtype), name=f"a2a.{dtype}")
        assert out.dtype == dtype and out.tolist() == [type(out.tolist()[0])(r % 2)
                                                      for r in range(size)]
        if dtype != torch.bool:
            rs = hvd.reducescatter(one.reshape(size, 2), op=hvd.Sum, name=f"rs.{dtype}")
            assert rs.dtype == dtype and torch.equal(rs, torch.full((1, 2), size, dtype=dtype))


@check
def integer_scaling_as_horovod():
    # Horovod scales integers in float64 and casts back (truncating) before the sum.
    x = torch.tensor([1, 2, 3, 7], dtype=torch.int32)
    got = hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.5, name="int.pre")
    assert got.tolist() == [size * int(v * 0.5) for v in x.tolist()], got
    got = hvd.allreduce(x, op=hvd.Sum, postscale_factor=1.5, name="int.post")
    assert got.tolist() == [int(size * v * 1.5) for v in x.tolist()], got


# ---- gradients against one process computing the whole job --------------------------------------
def _reference(make_loss, shapes):
    """Gradients of sum over ranks of each rank's loss, computed locally for every rank."""
    xs = [inputs(r, shapes(r)).requires_grad_() for r in range(size)]
    sum(make_loss(xs, r) for r in range(size)).backward()
    return xs[rank].grad


def _weights(r, shape):
    return inputs(100 + r, shape)


@check
def gradients_match_a_single_process_reference():
    n = size
    # allreduce (Sum): the gradient of the summed losses.
    x = inputs(rank, (3,)).requires_grad_()
    (hvd.allreduce(x, op=hvd.Sum, name="g.ar") * _weights(rank, (3,))).sum().backward()
    ref = _reference(lambda xs, r: (sum(xs) * _weights(r, (3,))).sum(), lambda r: (3,))
    torch.testing.assert_close(x.grad, ref)
    # grouped allreduce (Average): each tensor as its own allreduce.
    xs = [inputs(rank, (2,)).requires_grad_(), inputs(rank + 50, (4,)).requires_grad_()]
    outs = hvd.grouped_allreduce(xs, name="g.gar")
    (outs[0].sum() * 2 + (outs[1] * _weights(rank, (4,))).sum()).backward()
    ref_w = sum(_weights(r, (4,)) for r in range(n)) / n
    torch.testing.assert_close(xs[0].grad, torch.full((2,), 2.0, dtype=torch.float64))
    torch.testing.assert_close(xs[1].grad, ref_w)
    # allgather: Horovod averages the gradient over the set.
    rows = lambda r: (r + 1, 2)  # noqa: E731
    x = inputs(rank, rows(rank)).requires_grad_()
    w = lambda r: _weights(r, (n * (n + 1) // 2, 2))  # noqa: E731
    (hvd.allgather(x, name="g.ag") * w(rank)).sum().backward()
    ref = _reference(lambda xs, r: (torch.cat(xs) * w(r)).sum(), rows)
    torch.testing.assert_close(x.grad, ref / n)
    # grouped allgather, likewise.
    xs = [inputs(rank, rows(rank)).requires_grad_(), inputs(rank, (1, 3)).requires_grad_()]
    outs = hvd.grouped_allgather(xs, name="g.gag")
    ((outs[0] * w(rank)).sum() + outs[1].sum()).backward()
    torch.testing.assert_close(xs[0].grad, ref / n)
    torch.testing.assert_close(xs[1].grad, torch.ones(1, 3, dtype=torch.float64))
    # broadcast: the root gets the averaged gradient, the others zero.
    x = inputs(rank, (3,)).requires_grad_()
    (hvd.broadcast(x, root_rank=0, name="g.bc") * _weights(rank, (3,))).sum().backward()
    want = sum(_weights(r, (3,)) for r in range(n)) / n if rank == 0 else torch.zeros(3)
    torch.testing.assert_close(x.grad, want.to(torch.float64))
    # alltoall with splits: the gradient travels back.
    splits = [1 + (rank + r) % 2 for r in range(n)]
    x = inputs(rank, (sum(splits), 2)).requires_grad_()
    out, received = hvd.alltoall(x, splits=splits, name="g.a2a")
    (out * _weights(rank, tuple(out.shape))).sum().backward()
    pieces = []
    for r in range(n):  # the rows I sent to rank r get back the weights r applied to them
        got_rows = [1 + (q + r) % 2 for q in range(n)]  # what r received from each rank q
        start = sum(got_rows[:rank])
        pieces.append(_weights(r, (sum(got_rows), 2))[start:start + got_rows[rank]])
    torch.testing.assert_close(x.grad, torch.cat(pieces))
    # reducescatter (Average and Sum): Horovod's gradient is the allgathered output gradient,
    # times the set size for Sum (n times the gradient of the summed losses either way).
    for op in (hvd.Average, hvd.Sum):
        x = inputs(rank, (n * 2, 3)).requires_grad_()
        hvd.reducescatter(x, op=op, name=f"g.rs.{op}").sum().backward()
        want = torch.ones(n * 2, 3, dtype=torch.float64) * (n if op == hvd.Sum else 1)
        torch.testing.assert_close(x.grad, want)
    xs = [inputs(rank, (n, 2)).requires_grad_(), inputs(rank, (n * 2,)).requires_grad_()]
    outs = hvd.grouped_reducescatter(xs, op=hvd.Sum, name="g.grs")
    (outs[0].sum() + outs[1].sum() * 3).backward()
    torch.testing.assert_close(xs[0].grad, torch.full((n, 2), float(n), dtype=torch.float64))
    torch.testing.assert_close(xs[1].grad, torch.full((n * 2,), 3.0 * n, dtype=torch.float64))


# ---- Adasum -------------------------------------------------------------------------------------
@check
def adasum_matches_its_formula():
    if size & (size - 1):
        e = expect(NotImplementedError, lambda: hvd.allreduce(torch.ones(4), op=hvd.Adasum))
        assert str(e).startswith("Running Adasum with non-power of 2 ranks is not supported yet")
        return
    for dtype in (torch.float32, torch.float64):
        x = inputs(rank, (257,), dtype)
        got = hvd.allreduce(x, op=hvd.Adasum, name=f"adasum.{dtype}")
        want = adasum.tree([inputs(r, (257,), dtype) for r in range(size)]).to(dtype)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    # Parallel vectors add as an average would, orthogonal ones add as a sum.
    same = hvd.allreduce(torch.ones(8), op=hvd.Adasum, name="adasum.same")
    torch.testing.assert_close(same, torch.ones(8))
    if size >= 2:
        pair = hvd.add_process_set([0, 1]) if size > 2 else hvd.global_process_set
        if pair.included():
            basis = torch.zeros(2)
            basis[rank] = 1.0
            got = hvd.allreduce(basis, op=hvd.Adasum, process_set=pair, name="adasum.ortho")
            torch.testing.assert_close(got, torch.ones(2))
        hvd.remove_process_set(pair)


@check
def adasum_optimizer_steps_from_a_delta():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(), op=hvd.Adasum)
    before = model.weight.detach().clone()
    model(inputs(rank, (8, 4), torch.float32)).pow(2).mean().backward()
    opt.step()
    weights = hvd.allgather(model.weight.detach())
    assert all(torch.equal(weights[0], weights[r]) for r in range(size))
    assert not torch.equal(before, model.weight.detach())


# ---- SyncBatchNorm ------------------------------------------------------------------------------
@check
def sync_batch_norm_matches_batch_norm_of_the_whole_batch():
    batches = [inputs(r, (3, 4, 5)).float() for r in range(size)]
    weight_grad_scale = inputs(99, (3, 4, 5)).float()
    sync = hvd.SyncBatchNorm(4)
    plain = torch.nn.BatchNorm1d(4)
    with torch.no_grad():
        sync.weight.uniform_(0.5, 1.5, generator=torch.Generator().manual_seed(3))
        plain.weight.copy_(sync.weight)
    mine = batches[rank].clone().requires_grad_()
    out = sync(mine)
    (out * weight_grad_scale).sum().backward()
    whole = torch.cat(batches).requires_grad_()
    ref = plain(whole)
    (ref * weight_grad_scale.repeat(size, 1, 1)).sum().backward()
    torch.testing.assert_close(out, ref[rank * 3:(rank + 1) * 3], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(mine.grad, whole.grad[rank * 3:(rank + 1) * 3], rtol=1e-4,
                               atol=1e-5)
    total_weight_grad = hvd.allreduce(sync.weight.grad, op=hvd.Sum)
    torch.testing.assert_close(total_weight_grad, plain.weight.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(sync.running_mean, plain.running_mean, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(sync.running_var, plain.running_var, rtol=1e-4, atol=1e-5)


# ---- DistributedOptimizer -----------------------------------------------------------------------
@check
def optimizer_groups_sparse_and_warnings():
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                       named_parameters=model.named_parameters(), num_groups=2)
    assert any("`num_groups` has been replaced by `groups`" in str(w.message) for w in caught)
    model(inputs(rank, (2, 4), torch.float32)).sum().backward()
    opt.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt.step()
    assert any("optimizer.step() called without optimizer.skip_synchronize()" in str(w.message)
               for w in caught)
    weights = hvd.allgather(model[0].weight.detach())
    assert all(torch.equal(weights[0:4], weights[4 * r:4 * r + 4]) for r in range(size))
    # Sparse embedding gradients, as sparse allreduce and as dense.
    for dense in (False, True):
        embedding = torch.nn.Embedding(10, 3, sparse=True)
        hvd.broadcast_parameters(embedding.state_dict(), root_rank=0)
        opt = hvd.DistributedOptimizer(torch.optim.SGD(embedding.parameters(), lr=1.0),
                                       named_parameters=embedding.named_parameters(),
                                       sparse_as_dense=dense)
        embedding(torch.tensor([rank % 10])).sum().backward()
        opt.step()
        table = hvd.allgather(embedding.weight.detach().unsqueeze(0))
        assert all(torch.equal(table[0], table[r]) for r in range(size)), dense


@check
def broadcast_optimizer_state_initializes_empty_state():
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.Adam(model.parameters(), lr=0.001 * (rank + 1))
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert all(p.grad is not None for p in model.parameters())
    assert opt.param_groups[0]["lr"] == 0.001


hvd.shutdown()
sys.exit(1 if failed else 0)
