"""Attention over the paged KV cache.

The cache of one layer is `[2, num_blocks, block_size, kv_heads, head_dim]`. New K/V rows are
scattered into it through `slot_mapping`; each sequence then attends over its own blocks,
gathered in block-table order, with a causal mask aligned bottom-right (its queries are the
last `q_len` of its `ctx_len` positions: a prefix hit or a chunked prefill).

Decode is cascaded: sequences whose block tables start with the same cached blocks (a shared
agent prompt) attend over that prefix in one call, all their queries together, so the prefix
is read once per step instead of once per sequence. A long run of consecutive blocks of one
sequence (its prompt, usually) is attended in place, as a view of the cache, with no gather.
The remaining blocks of all sequences are gathered and attended in one padded call. The partial
results are merged exactly through their log-sum-exp. Query heads of one KV group are folded
into the query length, so K/V are never repeated. On the CPU a compiled kernel
(kernels/cpu_attention.cpp) replaces the runs and the gather: it reads every sequence's own
blocks in place through its block table; shared prefixes stay cascaded and merge with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F


@dataclass
class SequenceSlice:
    q_start: int  # first row of this sequence in the packed batch
    q_len: int
    ctx_len: int  # tokens this sequence attends over (cached + new)
    block_ids: torch.Tensor  # the blocks holding positions [0, ctx_len)
    # Positions of the rows when they are not the last q_len of the context (several gaps between
    # reused chunks computed in one step): row i attends positions <= positions[i].
    positions: torch.Tensor | None = None


@dataclass
class SharedPrefix:
    """Cached blocks that several decoding sequences start with."""

    members: torch.Tensor  # [m] indices into the decode batch
    blocks: torch.Tensor | slice  # the prefix's block ids; a slice when they are consecutive


@dataclass
class BlockRun:
    """Consecutive cache slots of one decoding sequence, attended in place."""

    member: int  # index into the decode batch
    start: int  # first flat cache slot (block id * block size)
    num_tokens: int


@dataclass
class KernelPart:
    """Every decoding sequence's own positions [first, length), attended by a compiled kernel
    straight from the block pool (kernels/cpu_attention.cpp)."""

    attend: Callable[..., list[torch.Tensor]]  # (q, key_cache, value_cache, tables, first, lengths, scale) -> (out, lse)
    block_table: torch.Tensor  # [n, width] int32
    first: torch.Tensor  # [n] int32: positions before it lie in a shared prefix
    lengths: torch.Tensor  # [n] int32


@dataclass
class DecodeBatch:
    """Sequences with one new token each: shared prefixes in one call per prefix, long block runs
    in one call per run, every other block in one padded call. Every sequence attends its
    newest token in the padded call or in a run."""

    rows: torch.Tensor  # [n] their rows in the packed batch
    block_table: torch.Tensor | None  # [g, max_blocks] the gathered blocks, padded with block 0; None: g = 0
    mask: torch.Tensor | None  # [g, 1, 1, max_blocks * block_size] additive: 0 where a position is real, -inf else
    shared: list[SharedPrefix]
    runs: list[BlockRun] = field(default_factory=list)
    run_members: torch.Tensor | None = None  # [len(runs)] the runs' members, in order
    gathered_members: torch.Tensor | None = None  # [g] members of the padded call; None: all n
    kernel: KernelPart | None = None  # set: the kernel attends every sequence's non-shared positions (no runs, no gather)


@dataclass
class AttentionMetadata:
    slot_mapping: torch.Tensor  # [tokens] flat cache slot of each new token
    sequences: list[SequenceSlice]  # attended one by one (prefills)
    block_size: int
    decode: DecodeBatch | None = None


def store_kv(cache: torch.Tensor, slot_mapping: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    kv_heads, head_dim = k.shape[1], k.shape[2]
    cache[0].view(-1, kv_heads, head_dim).index_copy_(0, slot_mapping, k)
    cache[1].view(-1, kv_heads, head_dim).index_copy_(0, slot_mapping, v)


def paged_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache: torch.Tensor, meta: AttentionMetadata
) -> torch.Tensor:
    """q: [tokens, heads, dim], k/v: [tokens, kv_heads, dim] (already rotated). Returns
    [tokens, heads * dim]. Writes k/v into the cache first."""
    store_kv(cache, meta.slot_mapping, k, v)
    heads, head_dim = q.shape[1], q.shape[2]
    kv_heads = k.shape[1]
    out = torch.empty(q.shape[0], heads, head_dim, dtype=q.dtype, device=q.device)
    if meta.decode is not None:
        out.index_copy_(0, meta.decode.rows, decode_attention(q, cache, meta.decode, meta.block_size))
    for s in meta.sequences:
        rows = slice(s.q_start, s.q_start + s.q_len)
        # 4-D inputs: torch's CPU flash kernel (GQA included) only takes batched tensors; 3-D
        # ones fall back to the unfused math path, about 4x slower.
        qs = q[rows].transpose(0, 1)[None]  # [1, heads, q_len, dim]
        if s.q_len == s.ctx_len and s.positions is None:
            # Fresh prefill: the keys are exactly this step's rows, no gather needed.
            ks, vs = k[rows].transpose(0, 1)[None], v[rows].transpose(0, 1)[None]
            o = F.scaled_dot_product_attention(qs, ks, vs, is_causal=s.q_len > 1, enable_gqa=heads != kv_heads)
        else:
            ks = cache[0].index_select(0, s.block_ids).view(-1, kv_heads, head_dim)[: s.ctx_len].transpose(0, 1)[None]
            vs = cache[1].index_select(0, s.block_ids).view(-1, kv_heads, head_dim)[: s.ctx_len].transpose(0, 1)[None]
            mask = None
            if s.positions is not None:
                mask = torch.arange(s.ctx_len, device=q.device)[None, :] <= s.positions[:, None]
            elif s.q_len > 1:
                offset = s.ctx_len - s.q_len
                mask = torch.arange(s.ctx_len, device=q.device)[None, :] <= (
                    torch.arange(s.q_len, device=q.device)[:, None] + offset
                )
            o = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=mask, enable_gqa=heads != kv_heads)
        out[rows] = o[0].transpose(0, 1)
    return out.view(q.shape[0], heads * head_dim)


def decode_attention(q: torch.Tensor, cache: torch.Tensor, d: DecodeBatch, block_size: int) -> torch.Tensor:
    """[n, heads, dim] outputs of the decode rows (see the module docstring)."""
    heads, head_dim = q.shape[1], q.shape[2]
    kv_heads = cache.shape[-2]
    group = heads // kv_heads
    n = d.rows.numel()
    qs = q.index_select(0, d.rows).view(n, kv_heads, group, head_dim)
    parts: list[tuple[torch.Tensor, torch.Tensor]] = []
    if d.kernel is not None:
        k = d.kernel
        out, lse = k.attend(qs.view(n, heads, head_dim), cache[0], cache[1], k.block_table, k.first, k.lengths,
                            head_dim**-0.5)
        if not d.shared:
            return out
        parts.append((out.view(n, kv_heads, group, head_dim), lse.view(n, kv_heads, group)))
    if d.block_table is not None:
        g, width = d.block_table.shape
        flat = d.block_table.view(-1)
        ks = cache[0].index_select(0, flat).view(g, width * block_size, kv_heads, head_dim).transpose(1, 2)
        vs = cache[1].index_select(0, flat).view(g, width * block_size, kv_heads, head_dim).transpose(1, 2)
        members = d.gathered_members
        out, lse = attention_with_lse(qs if members is None else qs.index_select(0, members), ks, vs, d.mask)
        if members is None and not d.shared and not d.runs:
            return out.view(n, heads, head_dim)
        parts.append((out, lse) if members is None else _scatter(out, lse, members, n))
    if d.shared:
        outs, lses = [], []
        for prefix in d.shared:
            m = prefix.members.numel()
            if isinstance(prefix.blocks, slice):
                keys, values = cache[0][prefix.blocks], cache[1][prefix.blocks]
            else:
                keys, values = cache[0].index_select(0, prefix.blocks), cache[1].index_select(0, prefix.blocks)
            keys = keys.reshape(1, -1, kv_heads, head_dim).transpose(1, 2)
            values = values.reshape(1, -1, kv_heads, head_dim).transpose(1, 2)
            # All members' query heads of a KV group become one query sequence over the prefix.
            member_q = qs.index_select(0, prefix.members).transpose(0, 1).reshape(1, kv_heads, m * group, head_dim)
            o, l = attention_with_lse(member_q, keys, values, None)
            outs.append(o.view(kv_heads, m, group, head_dim).transpose(0, 1))
            lses.append(l.view(kv_heads, m, group).transpose(0, 1))
        members = torch.cat([prefix.members for prefix in d.shared])
        parts.append(_scatter(torch.cat(outs), torch.cat(lses), members, n))
    if d.runs:
        outs, lses = [], []
        queries = qs.split(1)
        keys_base, values_base = cache[0], cache[1]
        row = kv_heads * head_dim
        for run in d.runs:
            # One strided view per run: [1, kv_heads, tokens, dim] straight over the cache.
            shape, strides = (1, kv_heads, run.num_tokens, head_dim), (run.num_tokens * row, head_dim, row, 1)
            keys = keys_base.as_strided(shape, strides, keys_base.storage_offset() + run.start * row)
            values = values_base.as_strided(shape, strides, values_base.storage_offset() + run.start * row)
            o, l = attention_with_lse(queries[run.member], keys, values, None)
            outs.append(o)
            lses.append(l)
        if len(d.runs) == n and not parts:  # every sequence lies in one run: nothing to merge
            return torch.cat(outs).index_select(0, torch.argsort(d.run_members)).view(n, heads, head_dim)
        parts.append(_scatter(torch.cat(outs), torch.cat(lses), d.run_members, n))
    return merge_partial_attention(parts).view(n, heads, head_dim)


def _scatter(out: torch.Tensor, lse: torch.Tensor, members: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Partial results of some members, spread over all n (zeros and -inf elsewhere)."""
    full_out = out.new_zeros((n, *out.shape[1:])).index_copy_(0, members, out)
    full_lse = lse.new_full((n, *lse.shape[1:]), float("-inf")).index_copy_(0, members, lse)
    return full_out, full_lse


def merge_partial_attention(parts: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """Combine softmax attention over disjoint key sets from each one's output and log-sum-exp.
    A part holds zeros and -inf where a sequence has nothing in it; every sequence has
    something in at least one part (its newest token)."""
    top = parts[0][1]
    for _, l in parts[1:]:
        top = torch.maximum(top, l)
    total = weights = None
    for o, l in parts:
        w = torch.exp(l - top).unsqueeze(-1)
        total = o.float() * w if total is None else total + o.float() * w
        weights = w if weights is None else weights + w
    return (total / weights).to(parts[0][0].dtype)


def attention_with_lse(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax attention [b, h, lq, d] x [b, h, lk, d] with an optional additive mask, returning
    the output and the float32 log-sum-exp of each query's scores ([b, h, lq])."""
    if q.device.type == "cpu":
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, attn_mask=mask)
        return out, lse.float()
    return _attention_with_lse_math(q, k, v, mask)


def _attention_with_lse_math(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    scores = torch.matmul(q.float(), k.float().transpose(-1, -2)) * (q.shape[-1] ** -0.5)
    if mask is not None:
        scores = scores + mask.float()
    lse = torch.logsumexp(scores, dim=-1)
    return torch.matmul(torch.exp(scores - lse.unsqueeze(-1)), v.float()).to(q.dtype), lse
