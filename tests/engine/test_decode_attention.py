"""Cascaded decode attention in PyTorch (shared prefix once + own blocks, merged by log-sum-exp) equals
plain attention of each sequence over its whole context."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from glmcot.engine.core import model_runner
from glmcot.engine.core.model_runner import ModelRunner, shared_prefixes
from glmcot.engine.layers import attention
from glmcot.engine.layers.attention import AttentionMetadata, paged_attention

BLOCK = 4


def reference(q: torch.Tensor, cache: torch.Tensor, tables: list[list[int]], lengths: list[int]) -> torch.Tensor:
    outs = []
    for i, (table, length) in enumerate(zip(tables, lengths)):
        idx = torch.tensor(table)
        k = cache[0].index_select(0, idx).flatten(0, 1)[:length].transpose(0, 1)
        v = cache[1].index_select(0, idx).flatten(0, 1)[:length].transpose(0, 1)
        o = F.scaled_dot_product_attention(q[i][:, None, :], k, v, enable_gqa=True)
        outs.append(o[:, 0, :])
    return torch.stack(outs)


class _FakeModel(torch.nn.Module):
    def __init__(self, kv_heads: int, head_dim: int) -> None:
        super().__init__()
        self.config = type("C", (), {"num_layers": 1, "num_kv_heads": kv_heads, "head_dim": head_dim})()


@pytest.mark.parametrize("heads,kv_heads", [(4, 2), (3, 1), (2, 2)])
@pytest.mark.parametrize("consecutive", [True, False])
def test_cascade_equals_per_sequence_attention(heads: int, kv_heads: int, consecutive: bool) -> None:
    torch.manual_seed(heads * 10 + kv_heads)
    dim, num_blocks = 8, 40
    runner = ModelRunner(_FakeModel(kv_heads, dim), num_blocks, BLOCK, torch.float32, "cpu", use_cpu_kernels=False)
    runner.kv_cache.normal_()
    prefix = [0, 1, 2] if consecutive else [7, 3, 11]
    # three sequences share the prefix (one diverges after its first block), one stands alone
    tables = [prefix + [20, 21], prefix + [22], [prefix[0], 30, 31], [25, 26, 27]]
    lengths = [3 * BLOCK + 6, 3 * BLOCK + 1, 2 * BLOCK + 3, 3 * BLOCK]
    groups, skip = shared_prefixes(tables, lengths, BLOCK)
    # the common prefix of a group is what all its members share: one block here
    assert groups == [([0, 1, 2], prefix[:1])] and skip == [1, 1, 1, 0]
    decode = runner._decode_batch(list(range(4)), tables, lengths)
    q = torch.randn(4, heads, dim)
    got = attention.decode_attention(q, runner.kv_cache[0], decode, BLOCK)
    want = reference(q, runner.kv_cache[0], tables, lengths)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_prefix_never_covers_the_newest_token_block() -> None:
    tables = [[0, 1, 2], [0, 1, 2]]
    # both hold exactly 2 full blocks plus one token in block 2: only blocks 0-1 may be shared
    groups, skip = shared_prefixes(tables, [2 * BLOCK + 1, 2 * BLOCK + 1], BLOCK)
    assert groups == [([0, 1], [0, 1])] and skip == [2, 2]
    groups, skip = shared_prefixes([[5, 6], [5, 6]], [2 * BLOCK, 2 * BLOCK], BLOCK)
    assert groups == [([0, 1], [5])] and skip == [1, 1]
    assert shared_prefixes([[5, 6], [7, 6]], [8, 8], BLOCK) == ([], [0, 0])


def test_fallback_math_matches_the_cpu_kernel() -> None:
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 2, 5, 8), torch.randn(3, 2, 9, 8), torch.randn(3, 2, 9, 8)
    mask = torch.zeros(3, 1, 1, 9)
    mask[1, ..., 6:] = float("-inf")
    out, lse = attention.attention_with_lse(q, k, v, mask)
    scores = q @ k.transpose(-1, -2) / 8**0.5 + mask
    torch.testing.assert_close(lse, torch.logsumexp(scores, -1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out, torch.softmax(scores, -1) @ v, rtol=1e-5, atol=1e-5)
    ref_out, ref_lse = attention._attention_with_lse_math(q, k, v, mask)
    torch.testing.assert_close(out, ref_out, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lse, ref_lse, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("use_kernel", [False, True])  # True: the compiled kernel where it builds
def test_paged_attention_mixes_decode_and_prefill_rows(use_kernel: bool) -> None:
    torch.manual_seed(1)
    heads, kv_heads, dim = 4, 2, 8
    runner = ModelRunner(_FakeModel(kv_heads, dim), 16, BLOCK, torch.float32, "cpu", use_cpu_kernels=use_kernel)
    runner.kv_cache.normal_()
    cache = runner.kv_cache[0]
    tables, lengths = [[0, 1, 2], [0, 1, 3]], [2 * BLOCK + 2, 2 * BLOCK + 3]
    decode = runner._decode_batch([0, 1], tables, lengths)
    # the new token of each sequence is written through the slot mapping, then attended
    slots = torch.tensor([2 * BLOCK + 1, 3 * BLOCK + 2])
    q, k, v = torch.randn(2, heads, dim), torch.randn(2, kv_heads, dim), torch.randn(2, kv_heads, dim)
    out = paged_attention(q, k, v, cache, AttentionMetadata(slots, [], BLOCK, decode))
    want = reference(q, cache, tables, lengths)
    torch.testing.assert_close(out.view(2, heads, dim), want, rtol=1e-5, atol=1e-5)


def test_long_block_runs_are_attended_in_place_and_merge_exactly(monkeypatch) -> None:
    torch.manual_seed(2)
    heads, kv_heads, dim = 4, 2, 8
    runner = ModelRunner(_FakeModel(kv_heads, dim), 64, BLOCK, torch.float32, "cpu", use_cpu_kernels=False)
    runner.kv_cache.normal_()
    monkeypatch.setattr(model_runner, "MIN_RUN_BLOCKS", 4)
    tables = [
        [10, 11, 12, 13, 14, 15, 40],  # a 6-block run, then its newest block elsewhere
        [20, 21, 22, 23, 24],  # all consecutive: the newest block still goes to the gathered part
        [30, 50, 31, 32, 33, 34, 35, 51],  # the run sits in the middle
        [0, 1, 2, 3, 4, 5, 6, 7],  # shares a prefix with the next one, then runs on
        [0, 1, 2, 3, 60, 61, 62, 63, 58],
        [45, 46],  # too short for a run
    ]
    lengths = [6 * BLOCK + 1, 5 * BLOCK, 7 * BLOCK + 2, 8 * BLOCK, 8 * BLOCK + 3, BLOCK + 1]
    decode = runner._decode_batch(list(range(len(tables))), tables, lengths)
    runs = {run.member: (run.start // BLOCK, run.num_tokens) for run in decode.runs}
    # seq 1 and seq 3 (after its shared prefix) are consecutive to the end: attended wholly in
    # place; seq 5 is too short for a run; the others keep their newest block for the gather.
    assert runs == {0: (10, 24), 1: (20, 20), 2: (31, 20), 3: (4, 16), 4: (60, 16)}
    assert decode.gathered_members.tolist() == [0, 2, 4, 5]
    q = torch.randn(len(tables), heads, dim)
    got = attention.decode_attention(q, runner.kv_cache[0], decode, BLOCK)
    torch.testing.assert_close(got, reference(q, runner.kv_cache[0], tables, lengths), rtol=1e-5, atol=1e-5)


def test_longest_run() -> None:
    from glmcot.engine.core.model_runner import longest_run

    assert longest_run([]) == (0, 0)
    assert longest_run([5]) == (0, 1)
    assert longest_run([3, 4, 9, 10, 11, 2]) == (2, 3)
    assert longest_run([1, 2, 3, 7, 8, 9]) == (0, 3)  # the first of equal runs


@pytest.mark.parametrize("tables,lengths", [
    ([[7, 8, 9]], [2 * BLOCK + 3]),  # one sequence, consecutive: a single call on a view
    ([[7, 8, 9, 10], [20, 21, 22, 23, 24]], [3 * BLOCK + 1, 5 * BLOCK]),  # every sequence in place
])
def test_sequences_wholly_in_place_need_no_gather(tables, lengths, monkeypatch) -> None:
    torch.manual_seed(3)
    monkeypatch.setattr(model_runner, "MIN_RUN_BLOCKS", 4)
    runner = ModelRunner(_FakeModel(2, 8), 32, BLOCK, torch.float32, "cpu", use_cpu_kernels=False)
    runner.kv_cache.normal_()
    decode = runner._decode_batch(list(range(len(tables))), tables, lengths)
    assert decode.block_table is None and len(decode.runs) == len(tables)
    q = torch.randn(len(tables), 4, 8)
    got = attention.decode_attention(q, runner.kv_cache[0], decode, BLOCK)
    torch.testing.assert_close(got, reference(q, runner.kv_cache[0], tables, lengths), rtol=1e-5, atol=1e-5)
