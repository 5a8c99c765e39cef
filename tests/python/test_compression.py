"""Library compression (docs/compression.md) in real jobs under tuttirun: fp16 and bf16 rings and
top-k with error feedback equal bit for bit to NumPy versions of the same algorithms with the same
seeds, identical results and adaptive decisions on every rank, error feedback converging on a
toy problem, the counters, and the errors a user can cause, on every rank. Then tutti.torch:
the Compression names, and a DistributedOptimizer training with them alike on every rank."""
import re

import pytest

from conftest import lines_of, run_job


def _values(lines, prefix):
    return [line[len(prefix):] for line in lines if line.startswith(prefix)]


@pytest.mark.parametrize("np_, transport", [(2, "auto"), (3, "auto"), (4, "tcp")])
def test_compressed_allreduce_matches_the_numpy_reference_on_every_rank(np_, transport,
                                                                       tmp_path):
    result = run_job(np_, "compression.py", tmp_path / "timeline",
                     env={"TUTTI_TRANSPORT": transport})
    assert result.returncode == 0, result.stdout + result.stderr
    hashes, decisions, counters = {}, [], []
    for rank in range(np_):
        lines = lines_of(result, rank)
        assert not [line for line in lines if line.startswith("fail")], lines
        assert [v.split()[0] for v in _values(lines, "cast ")] == ["fp16", "bf16"]
        assert all(v.split()[1] == "ok" for v in _values(lines, "cast "))
        assert "topk ok" in lines
        assert float(_values(lines, "converged ")[0]) < 1e-4
        for value in _values(lines, "hash "):
            name, digest = value.split()
            hashes.setdefault(name, set()).add(digest)
        decisions.append(_values(lines, "decisions "))
        counters.append(_values(lines, "counters "))
        errors = dict(v.split(" ", 1) for v in _values(lines, "error "))
        assert errors == {
            "dtype": "InvalidArgumentError allreduce 'wide': compression needs a float32 tensor, "
                     "not float64",
            "ratio": "InvalidArgumentError allreduce 'ratio': the top-k ratio must be in (0, 1], "
                     "not 0",
            "op": "InvalidArgumentError allreduce 'max': compression applies to sum and average "
                  "only",
            "mixed": "MismatchError mismatched 'mixed' on process set 0: rank 0 sent allreduce "
                     "float32[10] op=sum compression=fp16, rank 1 sent allreduce float32[10] "
                     "op=sum",
        }
        assert lines[-1] == "compression ok"
    assert {name: len(d) for name, d in hashes.items()} == {
        "fp16": 1, "bf16": 1, "topk": 1, "toy": 1, "adaptive": 1}
    # The policy's revisits, alike on every rank: the large stable tensor is compressed from its
    # first revisit on; the one whose norm swings and the small one stay exact.
    assert decisions == [["moving none@4 none@8 none@12", "small none@4 none@8 none@12",
                          "stable bf16@4 bf16@8 bf16@12"]] * np_
    # 2 fp16/bf16 sums + 2 averages, 3 top-k steps, 400 toy steps, 12 adaptive compressions.
    assert counters == [["tensors_compressed 419 adaptive_revisits 9 "
                         "adaptive_compress_choices 3"]] * np_


def test_torch_compression_names_and_the_optimizer_agree_on_every_rank():
    result = run_job(3, "torch_compression.py")
    assert result.returncode == 0, result.stdout + result.stderr
    losses = []
    for rank in range(3):
        lines = lines_of(result, rank)
        assert "names Compression.wire_fp16 Compression.wire_bf16 Compression.topk(0.1) " \
               "Compression.adaptive(Compression.wire_bf16, interval=5, min_bytes=1024, " \
               "max_change=0.5)" in lines
        assert "functions ok" in lines, lines
        params = _values(lines, "params ")
        assert len(params) == 4
        losses.append(_values(lines, "loss "))
        assert lines[-1] == "torch compression ok"
    # Every rank ends with the same parameters for each compressor.
    for rank in range(1, 3):
        assert _values(lines_of(result, rank), "params ") == \
            _values(lines_of(result, 0), "params ")
    for run in losses[0]:
        name, first, last = run.split()
        assert float(last) < float(first), run
