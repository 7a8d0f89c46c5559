"""The compiled CPU decode-attention kernel equals attention computed in float64 from the same
cache, for every head size path, grouped-query layout and dtype; the engine uses it in its
cascade; bad inputs get clear errors."""

from __future__ import annotations

import pytest
import torch

from glmcot.engine.core.model_runner import ModelRunner
from glmcot.engine.kernels import cpu_kernels, cpu_kernels_error
from glmcot.engine.layers import attention

kernels = cpu_kernels()
pytestmark = pytest.mark.skipif(kernels is None, reason=f"CPU kernel not built here: {cpu_kernels_error()}")

BLOCK = 4


def reference(q, cache, tables, first, lengths):
    """(out, lse) in float64 of each sequence over its positions [first, length)."""
    heads, kv_heads = q.shape[1], cache.shape[-2]
    outs, lses = [], []
    for i, table in enumerate(tables):
        idx = torch.tensor(table)
        k = cache[0].index_select(0, idx).flatten(0, 1)[first[i] : lengths[i]].double()  # [t, kv, d]
        v = cache[1].index_select(0, idx).flatten(0, 1)[first[i] : lengths[i]].double()
        k = k.repeat_interleave(heads // kv_heads, dim=1).transpose(0, 1)  # [heads, t, d]
        v = v.repeat_interleave(heads // kv_heads, dim=1).transpose(0, 1)
        scores = (q[i].double()[:, None, :] @ k.transpose(1, 2))[:, 0, :] / q.shape[-1] ** 0.5
        outs.append((torch.softmax(scores, -1)[:, None, :] @ v)[:, 0, :])
        lses.append(torch.logsumexp(scores, -1))
    return torch.stack(outs), torch.stack(lses)


def case(dim: int, heads: int, kv_heads: int, dtype: torch.dtype, seed: int = 0):
    torch.manual_seed(seed)
    num_blocks = 160
    cache = torch.randn(2, num_blocks, BLOCK, kv_heads, dim).to(dtype)
    order = torch.randperm(num_blocks).tolist()  # scattered blocks
    lengths = [1, 7, 2 * BLOCK, 301, 45]  # one token; a partial block; full blocks; many split-K pieces
    first = [0, 3, BLOCK, 2 * BLOCK, 0]  # positions before `first` belong to a shared prefix
    tables, at = [], 0
    for n in lengths:
        blocks = -(-n // BLOCK)
        tables.append(order[at : at + blocks])
        at += blocks
    q = torch.randn(len(lengths), heads, dim).to(dtype)
    return q, cache, tables, first, lengths


def run(q, cache, tables, first, lengths):
    width = max(map(len, tables))
    table = torch.tensor([t + [0] * (width - len(t)) for t in tables], dtype=torch.int32)
    return kernels.paged_decode_attention(q, cache[0], cache[1], table, torch.tensor(first, dtype=torch.int32),
                                          torch.tensor(lengths, dtype=torch.int32), q.shape[-1] ** -0.5)


@pytest.mark.parametrize("dim", [8, 24, 64, 128, 256])  # generic path (odd sizes, a partial vector) and unrolled ones
@pytest.mark.parametrize("heads,kv_heads", [(4, 2), (3, 1), (2, 2)])
def test_kernel_matches_float64_attention(dim, heads, kv_heads):
    q, cache, tables, first, lengths = case(dim, heads, kv_heads, torch.float32, seed=dim + heads)
    out, lse = run(q, cache, tables, first, lengths)
    want_out, want_lse = reference(q, cache, tables, first, lengths)
    assert out.dtype == torch.float32 and lse.dtype == torch.float32
    torch.testing.assert_close(out.double(), want_out, rtol=1e-5, atol=2e-6)
    torch.testing.assert_close(lse.double(), want_lse, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_kernel_reads_half_precision_caches(dtype):
    q, cache, tables, first, lengths = case(128, 4, 2, dtype)
    out, lse = run(q, cache, tables, first, lengths)
    want_out, want_lse = reference(q, cache, tables, first, lengths)
    assert out.dtype == dtype  # accumulated in float32, returned in the query's dtype
    torch.testing.assert_close(out.double(), want_out, rtol=2e-2, atol=1e-2)
    torch.testing.assert_close(lse.double(), want_lse, rtol=1e-4, atol=1e-4)


def test_results_do_not_depend_on_the_thread_count():
    q, cache, tables, first, lengths = case(64, 4, 2, torch.float32)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = run(q, cache, tables, first, lengths)
        torch.set_num_threads(max(2, threads))
        many = run(q, cache, tables, first, lengths)
    finally:
        torch.set_num_threads(threads)
    torch.testing.assert_close(one[0], many[0], rtol=1e-6, atol=1e-6)


def test_bad_inputs_get_clear_errors():
    q, cache, tables, first, lengths = case(64, 4, 2, torch.float32)
    with pytest.raises(RuntimeError, match="empty or out-of-table range"):
        run(q, cache, tables, [0, 7, 0, 0, 0], lengths)  # sequence 1: first == length
    with pytest.raises(RuntimeError, match="empty or out-of-table range"):
        run(q, cache, tables, first, [1, 7, 8, 301, 999])  # beyond its table
    with pytest.raises(RuntimeError, match="head shapes disagree"):
        run(q[:, :3], cache, tables, first, lengths)  # 3 query heads over 2 KV heads
    with pytest.raises(RuntimeError, match="must be int32"):
        kernels.paged_decode_attention(q, cache[0], cache[1], torch.zeros(5, 80, dtype=torch.long),
                                       torch.zeros(5, dtype=torch.int32), torch.ones(5, dtype=torch.int32), 1.0)


class _Model(torch.nn.Module):
    def __init__(self, kv_heads: int, head_dim: int) -> None:
        super().__init__()
        self.config = type("C", (), {"num_layers": 1, "num_kv_heads": kv_heads, "head_dim": head_dim})()


@pytest.mark.parametrize("use_kernel", [True, False])
def test_engine_cascade_with_the_kernel_equals_per_sequence_attention(use_kernel):
    torch.manual_seed(3)
    heads, kv_heads, dim = 4, 2, 32
    runner = ModelRunner(_Model(kv_heads, dim), 48, BLOCK, torch.float32, "cpu", use_cpu_kernels=use_kernel)
    runner.kv_cache.normal_()
    prefix = [7, 3, 11]
    tables = [prefix + [20, 21], prefix + [22], [prefix[0], 30, 31], [25, 26, 27], [40]]
    lengths = [3 * BLOCK + 6, 3 * BLOCK + 1, 2 * BLOCK + 3, 3 * BLOCK, 2]
    decode = runner._decode_batch(list(range(5)), tables, lengths)
    assert (decode.kernel is not None) == use_kernel and len(decode.shared) == 1
    q = torch.randn(5, heads, dim)
    got = attention.decode_attention(q, runner.kv_cache[0], decode, BLOCK)
    want, _ = reference(q, runner.kv_cache[0], tables, [0] * 5, lengths)
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_kernel_matches_the_reference(dtype):
    torch.manual_seed(5)
    x, weight = (torch.randn(7, 3, 40) * 3).to(dtype), torch.randn(40).to(dtype)
    h = x.float()
    want = weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)).to(dtype)  # Hugging Face's order
    got = kernels.rms_norm(x, weight, 1e-6)
    assert got.dtype == dtype and got.shape == x.shape
    tolerance = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(got, want, **tolerance)
    with pytest.raises(RuntimeError, match="weight must match"):
        kernels.rms_norm(x, weight[:5], 1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rotary_kernel_rotates_strided_rows_in_place(dtype):
    from glmcot.engine.layers.rotary import apply_rotary

    torch.manual_seed(6)
    tokens, heads, kv_heads, dim = 5, 4, 2, 16
    fused = torch.randn(tokens, (heads + 2 * kv_heads) * dim).to(dtype)  # like the qkv projection's output
    q = fused[:, : heads * dim].view(tokens, heads, dim)  # strided rows
    angles = torch.randn(tokens, dim // 2)
    cos, sin = angles.cos().to(dtype)[:, None], angles.sin().to(dtype)[:, None]
    want = apply_rotary(q.clone(), cos, sin)
    untouched = fused[:, heads * dim :].clone()
    kernels.rotary_(q, cos, sin)
    tolerance = dict(rtol=1e-6, atol=1e-6) if dtype == torch.float32 else dict(rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(q, want, **tolerance)
    assert torch.equal(fused[:, heads * dim :], untouched)  # k and v columns left alone
    with pytest.raises(RuntimeError, match="cos and sin must be contiguous"):
        kernels.rotary_(q, cos[:3], sin[:3])
