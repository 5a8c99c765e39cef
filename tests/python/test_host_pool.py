"""Recycled host memory for large results (tutti/_host_pool.py) and tutti.torch's out-of-place
results on it: a block comes back once the last tensor made from it is gone, and is handed out
again for the same size; live results never share memory; small ones are not pooled; the free
blocks stay within their bound."""
import os
import sys

import torch

from conftest import BUILD, ROOT

os.environ.setdefault("TUTTI_LIBRARY", os.path.join(BUILD, "libtutti.so"))
sys.path.insert(0, os.path.join(ROOT, "python"))
from tutti import _host_pool  # noqa: E402 - after the path above
from tutti.torch import tensors  # noqa: E402

MIB = 1 << 20


def setup_function():
    _host_pool.clear()


def test_a_block_returns_with_its_last_tensor_and_is_handed_out_again():
    like = torch.ones(MIB // 4)  # 1 MiB of float32: pooled
    first = tensors.empty_like(like)
    address = first.data_ptr()
    second = tensors.empty_like(like)
    assert second.data_ptr() != address  # both alive: never the same memory
    first.fill_(1.0)
    second.fill_(2.0)
    assert first.sum().item() == like.numel() and second.sum().item() == 2 * like.numel()
    view = first[10:]  # a view keeps the block alive
    del first
    assert _host_pool.free_bytes() == 0
    del view
    assert _host_pool.free_bytes() == MIB
    third = tensors.empty_like(like)
    assert third.data_ptr() == address and _host_pool.free_bytes() == 0
    assert third.shape == like.shape and third.dtype == like.dtype


def test_results_of_every_pooled_dtype_and_shape_come_back_as_asked():
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8,
                  torch.uint8, torch.int16, torch.int32, torch.int64):
        like = torch.zeros((2, MIB // 2), dtype=dtype)
        got = tensors.empty_like(like)
        assert got.dtype == dtype and got.shape == like.shape and got.is_contiguous()


def test_small_and_bool_results_are_not_pooled():
    small = tensors.empty_like(torch.ones(1024))
    flags = tensors.empty_like(torch.ones(2 * MIB, dtype=torch.bool))
    del small, flags
    assert _host_pool.free_bytes() == 0


def test_the_free_blocks_stay_within_their_bound(monkeypatch):
    monkeypatch.setattr(_host_pool, "MAX_FREE_BYTES", 3 * MIB)
    held = [tensors.empty_like(torch.ones(MIB // 4)) for _ in range(5)]
    del held
    assert _host_pool.free_bytes() == 3 * MIB
    bigger = tensors.empty_like(torch.ones(MIB // 2))  # 2 MiB: the oldest free size gives way
    del bigger
    assert _host_pool.free_bytes() <= 3 * MIB
