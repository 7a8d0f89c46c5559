"""Runs one scheduled step: packs every request's new tokens into one forward pass over the
paged KV cache and returns logits for the rows that are sampled."""

from __future__ import annotations

import torch

from glmcot.engine.cache.kv_cache_manager import KVCacheManager
from glmcot.engine.core.request import Request
from glmcot.engine.core.scheduler import ScheduledRequest
from glmcot.engine.kernels import MAX_HEAD_DIM, cpu_kernels
from glmcot.engine.layers.attention import AttentionMetadata, BlockRun, DecodeBatch, KernelPart, SequenceSlice, SharedPrefix
from glmcot.engine.models.decoder import DecoderModel


def kv_bytes_per_token(model: DecoderModel, dtype: torch.dtype) -> int:
    cfg = model.config
    return 2 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim * torch.tensor([], dtype=dtype).element_size()


MIN_RUN_BLOCKS = 8  # a run this long is attended in place; shorter ones cost less to gather than to call


class ModelRunner:
    def __init__(self, model: DecoderModel, num_blocks: int, block_size: int, dtype: torch.dtype, device: str,
                 use_cpu_kernels: bool = True) -> None:
        cfg = model.config
        self.model = model
        self.block_size = block_size
        self.device = torch.device(device)
        # One preallocated tensor; zeros touches every page once, up front.
        self.kv_cache = torch.zeros(cfg.num_layers, 2, num_blocks, block_size, cfg.num_kv_heads, cfg.head_dim,
                                    dtype=dtype, device=self.device)
        kernels = cpu_kernels() if use_cpu_kernels and self.device.type == "cpu" else None
        self.decode_kernel = None
        if kernels is not None:
            if isinstance(model, DecoderModel):
                model.bind_cpu_kernels(kernels)
            if cfg.head_dim <= MAX_HEAD_DIM:
                self.decode_kernel = kernels.paged_decode_attention

    @torch.inference_mode()
    def execute(self, scheduled: list[ScheduledRequest], kv: KVCacheManager) -> tuple[torch.Tensor | None, list[Request]]:
        """Returns (logits [n_sampled, vocab] float32, the requests they belong to)."""
        bs = self.block_size
        input_ids: list[int] = []
        positions: list[int] = []
        slots: list[int] = []
        sequences: list[SequenceSlice] = []
        sample_rows: list[int] = []
        sampled: list[Request] = []
        decode_rows: list[int] = []
        decode_tables: list[list[int]] = []
        decode_lens: list[int] = []
        for item in scheduled:
            request = item.request
            table = kv.block_ids(request)
            # Usually one range from the computed prefix. Several gaps between reused chunks form
            # one slice with explicit row positions, so the context is gathered and attended once
            # (each gap's K/V is written before any row attends, so a later gap sees an earlier one).
            ranges = item.computed_ranges()
            rows = [p for start, end in ranges for p in range(start, end)]
            n, end, q_start = len(rows), ranges[-1][1], len(input_ids)
            for start, stop in ranges:
                input_ids.extend(request.all_token_ids[start:stop])
            positions.extend(rows)
            slots.extend(table[p // bs] * bs + p % bs for p in rows)
            if n == 1 and end > 1:
                decode_rows.append(q_start)
                decode_tables.append(table[: -(-end // bs)])
                decode_lens.append(end)
            else:
                block_ids = torch.tensor(table[: -(-end // bs)], dtype=torch.long, device=self.device)
                explicit = None if item.ranges is None else torch.tensor(rows, dtype=torch.long, device=self.device)
                sequences.append(SequenceSlice(q_start, n, end, block_ids, explicit))
            if end == request.num_tokens:
                sample_rows.append(q_start + n - 1)
                sampled.append(request)
        dev = self.device
        meta = AttentionMetadata(torch.tensor(slots, dtype=torch.long, device=dev), sequences, bs,
                                 self._decode_batch(decode_rows, decode_tables, decode_lens))
        hidden = self.model(torch.tensor(input_ids, dtype=torch.long, device=dev),
                            torch.tensor(positions, dtype=torch.long, device=dev), self.kv_cache, meta)
        if not sampled:
            return None, []
        rows = torch.tensor(sample_rows, dtype=torch.long, device=dev)
        return self.model.compute_logits(hidden.index_select(0, rows)), sampled

    def _decode_batch(self, rows: list[int], tables: list[list[int]], lengths: list[int]) -> DecodeBatch | None:
        if not rows:
            return None
        bs, dev = self.block_size, self.device
        shared, skip = shared_prefixes(tables, lengths, bs)
        prefixes = [SharedPrefix(torch.tensor(m, dtype=torch.long, device=dev), _blocks(blocks, dev)) for m, blocks in shared]
        rows_tensor = torch.tensor(rows, dtype=torch.long, device=dev)
        if self.decode_kernel is not None:
            # The kernel reads every sequence's own blocks in place; shared prefixes stay cascaded.
            width = max(map(len, tables))
            table = torch.tensor([t + [0] * (width - len(t)) for t in tables], dtype=torch.int32, device=dev)
            first = torch.tensor([s * bs for s in skip], dtype=torch.int32, device=dev)
            kernel = KernelPart(self.decode_kernel, table, first, torch.tensor(lengths, dtype=torch.int32, device=dev))
            return DecodeBatch(rows_tensor, None, None, prefixes, kernel=kernel)
        runs: list[BlockRun] = []
        gathered: dict[int, tuple[list[int], list[int]]] = {}  # member -> (blocks, tokens in each)
        for i, table in enumerate(tables):
            own = table[skip[i] : -(-lengths[i] // bs)]
            own_tokens = lengths[i] - skip[i] * bs
            newest = own_tokens - (len(own) - 1) * bs  # tokens in the newest block
            if longest_run(own)[1] == len(own) and (len(own) >= MIN_RUN_BLOCKS or len(tables) == 1):
                runs.append(BlockRun(i, own[0] * bs, own_tokens))  # all of it in place
                continue
            # Otherwise the newest block is gathered and a long run before it stays in place.
            start, size = longest_run(own[:-1])
            if size >= MIN_RUN_BLOCKS:
                runs.append(BlockRun(i, own[start] * bs, size * bs))
                own = own[:start] + own[start + size :]
            gathered[i] = (own, [bs] * (len(own) - 1) + [newest])
        block_table = mask = members = None
        if gathered:
            width = max(len(blocks) for blocks, _ in gathered.values())
            padded = [blocks + [0] * (width - len(blocks)) for blocks, _ in gathered.values()]
            counts = torch.tensor([tokens + [0] * (width - len(tokens)) for _, tokens in gathered.values()], device=dev)
            real = torch.arange(bs, device=dev)[None, None, :] < counts[:, :, None]
            mask = torch.zeros(real.shape, dtype=self.kv_cache.dtype, device=dev).masked_fill_(~real, float("-inf"))
            mask = mask.view(len(gathered), 1, 1, -1)
            block_table = torch.tensor(padded, dtype=torch.long, device=dev)
            if len(gathered) < len(tables):
                members = torch.tensor(list(gathered), dtype=torch.long, device=dev)
        return DecodeBatch(rows_tensor, block_table, mask, prefixes, runs,
                           torch.tensor([r.member for r in runs], dtype=torch.long, device=dev) if runs else None, members)


def longest_run(blocks: list[int]) -> tuple[int, int]:
    """(start index, length) of the longest stretch of consecutive block ids."""
    best_start = best_size = 0
    start = 0
    for i in range(1, len(blocks) + 1):
        if i == len(blocks) or blocks[i] != blocks[i - 1] + 1:
            if i - start > best_size:
                best_start, best_size = start, i - start
            start = i
    return best_start, best_size


def shared_prefixes(tables: list[list[int]], lengths: list[int], block_size: int) -> tuple[list[tuple[list[int], list[int]]], list[int]]:
    """Group decoding sequences by the cached blocks their tables start with. Returns
    (members, prefix blocks) per group of two or more, and per sequence how many leading blocks a
    group covers. The block holding a sequence's newest token is never part of a prefix."""
    by_first: dict[int, list[int]] = {}
    for i, table in enumerate(tables):
        by_first.setdefault(table[0], []).append(i)
    groups: list[tuple[list[int], list[int]]] = []
    skip = [0] * len(tables)
    for members in by_first.values():
        if len(members) < 2:
            continue
        limit = min((lengths[i] - 1) // block_size for i in members)
        first = tables[members[0]]
        common = 0
        while common < limit and all(tables[i][common] == first[common] for i in members):
            common += 1
        if common == 0:
            continue
        groups.append((members, first[:common]))
        for i in members:
            skip[i] = common
    return groups, skip


def _blocks(blocks: list[int], device: torch.device) -> torch.Tensor | slice:
    if longest_run(blocks)[1] == len(blocks):
        return slice(blocks[0], blocks[0] + len(blocks))  # consecutive: a view, no gather
    return torch.tensor(blocks, dtype=torch.long, device=device)
