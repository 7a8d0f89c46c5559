"""Attention over the paged KV cache.

The cache of one layer is `[2, num_blocks, block_size, kv_heads, head_dim]`. New K/V rows are
scattered into it through `slot_mapping`; each sequence then attends over its own blocks,
gathered in block-table order, with a causal mask aligned bottom-right (its queries are the
last `q_len` of its `ctx_len` positions: a prefix hit or a chunked prefill).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class SequenceSlice:
    q_start: int  # first row of this sequence in the packed batch
    q_len: int
    ctx_len: int  # tokens this sequence attends over (cached + new)
    block_ids: torch.Tensor  # the blocks holding positions [0, ctx_len)


@dataclass
class DecodeBatch:
    """Sequences with one new token each, attended in one padded call."""

    rows: torch.Tensor  # [n] their rows in the packed batch
    block_table: torch.Tensor  # [n, max_blocks], padded with block 0
    mask: torch.Tensor  # [n, 1, 1, max_blocks * block_size], True where a position is real


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
        d = meta.decode
        n, width = d.block_table.shape
        flat = d.block_table.view(-1)
        ks = cache[0].index_select(0, flat).view(n, width * meta.block_size, kv_heads, head_dim).transpose(1, 2)
        vs = cache[1].index_select(0, flat).view(n, width * meta.block_size, kv_heads, head_dim).transpose(1, 2)
        qs = q.index_select(0, d.rows).unsqueeze(2)  # [n, heads, 1, dim]
        o = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=d.mask, enable_gqa=heads != kv_heads)
        out.index_copy_(0, d.rows, o.squeeze(2))
    for s in meta.sequences:
        rows = slice(s.q_start, s.q_start + s.q_len)
        qs = q[rows].transpose(0, 1)  # [heads, q_len, dim]
        if s.q_len == s.ctx_len:
            # Fresh prefill: the keys are exactly this step's rows, no gather needed.
            ks, vs = k[rows].transpose(0, 1), v[rows].transpose(0, 1)
            o = F.scaled_dot_product_attention(qs, ks, vs, is_causal=s.q_len > 1, enable_gqa=heads != kv_heads)
        else:
            ks = cache[0].index_select(0, s.block_ids).view(-1, kv_heads, head_dim)[: s.ctx_len].transpose(0, 1)
            vs = cache[1].index_select(0, s.block_ids).view(-1, kv_heads, head_dim)[: s.ctx_len].transpose(0, 1)
            mask = None
            if s.q_len > 1:
                offset = s.ctx_len - s.q_len
                mask = torch.arange(s.ctx_len, device=q.device)[None, :] <= (
                    torch.arange(s.q_len, device=q.device)[:, None] + offset
                )
            o = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=mask, enable_gqa=heads != kv_heads)
        out[rows] = o.transpose(0, 1)
    return out.view(q.shape[0], heads * head_dim)
