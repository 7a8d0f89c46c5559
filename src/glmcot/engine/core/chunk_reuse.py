"""Vertex-chunk KV reuse at any prompt position (chunk_reuse = pic | pic0).

A keyed segment (a vertex chunk) is cached by content in whole blocks of its own in the block
pool, indexed by key (cache/chunk_index.py), its keys stored as if the chunk started at
position 0. When a prompt holds the chunk at position p, the cached rows are copied into the
request's own blocks with the keys re-rotated by p (RoPE depends only on relative positions);
values are copied as they are. The copy keeps attention, the model and the prefix cache
untouched, at a price in memory: a reused chunk can be cached twice (indexed, and in the
request's prefix chain).

Where the cached KV comes from (`chunk_source`):
- `context` (GLM's Fig. 7): the first prompt that holds a chunk computes it in context, as any
  prompt token; right after, its rows are copied out, rotated back to position 0, and indexed.
  No extra compute; the reused KV carries the attention to that first prompt's context.
- `isolated`: a miss starts an internal prefill-only request (a "chunk job") that computes the
  chunk alone in the same step as the request's first tokens; the request copies it in the next
  step. Every keyed chunk then always gets its isolated KV: outputs do not depend on the cache
  state, but a chunk seen once costs its length twice.

Admission (`admission` = n): a missed chunk is indexed (captured, or computed by a job) only
once n questions have held it outside a prefix hit (a session counts once; a request without a
session always counts); before that it is computed in context and not indexed. With a
heavy-tailed popularity most chunks are read by one question, and indexing them costs a copy in
the pool (context) or a second computation (isolated) that nothing repays; n = 2 keeps those out
at the price of one more in-context computation per chunk that does recur (a doorkeeper, as in
TinyLFU). Sightings are counted per key in a bounded table.

`pic` recomputes the first k tokens of each chunk in the context of the prompt (EPIC's
LegoLink: the isolated chunk's first tokens act as a spurious attention sink); `pic0` reuses the
whole chunk. The prompt's last token is always computed (it gives the logits).

A step may compute several gaps between reused ranges of one request (`step_ranges`): the
reused ranges up to the last gap are copied before the forward pass, the gaps' rows form one
sequence slice with explicit positions (the context is gathered and attended once; new K/V is
written before any row attends, so a later gap sees an earlier one), and the computed prefix
ends after the last gap.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from dataclasses import dataclass

import torch

from glmcot.contract import Level
from glmcot.engine.cache.chunk_index import ChunkEntry
from glmcot.engine.cache.kv_cache_manager import KVCacheManager
from glmcot.engine.cache.sessions import SessionLevels
from glmcot.engine.core.request import Request, SegmentSpan
from glmcot.engine.layers.rotary import apply_rotary
from glmcot.engine.sampling_params import SamplingParams


STATS = ("chunk_queries_tokens", "chunk_hits_tokens", "chunk_computed_tokens", "chunk_captured_tokens",
         "chunk_fallbacks", "chunk_capture_skips", "chunk_admission_skips")
SIGHTINGS_KEPT = 1 << 16  # keys whose sightings are remembered (least recently seen forgotten first)


@dataclass(eq=False)
class ChunkUse:
    key: str
    level: Level
    session: str | None
    start: int  # prompt position of the chunk's first token
    reuse_start: int  # first position copied from the cache (start + tokens recomputed in context)
    end: int  # end of the copied range (exclusive)
    token_ids: tuple[int, ...]
    entry: ChunkEntry | None = None  # set once the isolated KV exists
    hit: bool = False  # found in the index (not computed for this request)
    holding: bool = False  # holds one reference on each of the entry's blocks
    done: bool = False

    @property
    def num_reused(self) -> int:
        return self.end - self.reuse_start


def shift_keys(keys: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate post-RoPE keys by a further angle (full-dimension cos/sin of it), in float32."""
    half = keys.shape[-1] // 2
    return apply_rotary(keys.float(), cos[..., :half], sin[..., :half]).to(keys.dtype)


class ChunkReuse:
    def __init__(self, mode: str, recompute_tokens: int, kv: KVCacheManager, levels: SessionLevels,
                 source: str = "context", admission: int = 1) -> None:
        if mode not in ("pic", "pic0"):
            raise ValueError(f"chunk reuse mode must be pic or pic0, got {mode!r}")
        if source not in ("context", "isolated"):
            raise ValueError(f"chunk source must be context or isolated, got {source!r}")
        if admission < 1:
            raise ValueError(f"chunk admission must be >= 1, got {admission!r}")
        self.mode, self.source, self.admission = mode, source, admission
        self._sightings: OrderedDict[str, tuple[int, str | None]] = OrderedDict()  # key -> (count, last session)
        self.recompute = recompute_tokens if mode == "pic" else 0
        self.kv, self.pool, self.levels = kv, kv.pool, levels
        self.kv_cache: torch.Tensor | None = None
        self.cos: torch.Tensor | None = None
        self.sin: torch.Tensor | None = None
        self._jobs: dict[str, Request] = {}  # key -> job computing it in this step
        self._waiters: dict[str, list[ChunkUse]] = {}
        self._ids = itertools.count()
        self.queries_tokens = 0  # tokens of keyed chunks that were to be reused
        self.hits_tokens = 0  # ... and were found in the index
        self.computed_tokens = 0  # tokens computed by chunk jobs
        self.captured_tokens = 0  # tokens indexed from a prompt that computed them in context
        self.fallbacks = 0  # chunks computed in context because the pool had no room for a job
        self.capture_skips = 0  # chunks not indexed because the pool had no room for the copy
        self.admission_skips = 0  # misses computed in context and not indexed: seen too few times yet

    def bind(self, kv_cache: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> None:
        """The engine's KV tensor [layers, 2, blocks, block_size, kv_heads, dim] and rotary tables."""
        self.kv_cache, self.cos, self.sin = kv_cache, cos, sin

    # ---- admission ----------------------------------------------------------------------------
    def plan(self, request: Request, num_hit: int) -> list[ChunkUse]:
        """The request's keyed chunks past its prefix hit; hits take a reference at once."""
        uses = []
        last = request.num_prompt_tokens - 1
        for span in sorted(request.spans, key=lambda s: s.start):
            if span.key is None or span.start < num_hit:
                continue
            reuse_start = span.start + min(self.recompute, span.end - span.start)
            end = min(span.end, last)
            if end <= reuse_start:
                continue
            tokens = tuple(request.all_token_ids[span.start : span.end])
            use = ChunkUse(span.key, span.level, request.session, span.start, reuse_start, end, tokens)
            entry = self.pool.chunks.lookup(span.key, tokens)
            if entry is not None:
                self.pool.touch(entry.blocks, request.session)
                use.entry, use.hit, use.holding = entry, True, True
            uses.append(use)
        request.chunk_uses = uses
        request.chunk_captures = []
        return uses

    def step_ranges(self, request: Request, budget: int) -> tuple[int, list[tuple[int, int]]]:
        """This step's work past the request's computed prefix: reused ranges are copied (no
        budget), the gaps between them computed, as many gaps as `budget` tokens allow, all in
        one forward pass. Returns (the position the step reaches, the computed ranges
        [start, end) in order). A chunk that a job is still computing (isolated source) stops
        the walk: the request waits for it there."""
        pos = request.num_computed_tokens
        ranges: list[tuple[int, int]] = []
        pending = [u for u in request.chunk_uses if not u.done and u.reuse_start >= pos]
        for use in [*pending, None]:
            if use is not None and use.entry is None and self.source == "context":
                continue  # a miss computed in context: part of the gap
            stop = request.num_tokens if use is None else use.reuse_start
            if stop > pos:
                count = min(stop - pos, budget)
                if count:
                    ranges.append((pos, pos + count))
                    budget -= count
                    pos += count
                if pos < stop:
                    break
            if use is None or use.entry is None:
                break
            pos = use.end
        return pos, ranges

    def start_jobs(self, request: Request) -> list[Request]:
        """Chunk jobs for the request's misses (computed this step); a miss that finds no room
        in the pool is dropped and computed in context instead."""
        jobs = []
        bs = self.kv.block_size
        for use in list(request.chunk_uses):
            self.queries_tokens += use.num_reused
            if use.hit:
                use.entry.hits += 1
                self.hits_tokens += use.num_reused
                self.levels.claim_blocks(use.entry.blocks, use.level, use.session)
                continue
            if use.key in self._jobs:
                self._waiters[use.key].append(use)
                continue
            if not self._admit(use.key, use.session):
                request.chunk_uses.remove(use)
                self.admission_skips += 1
                continue
            if self.source == "context":
                request.chunk_uses.remove(use)
                request.chunk_captures.append(use)
                continue
            need = -(-len(use.token_ids) // bs)
            if need > self.pool.num_free_blocks:
                request.chunk_uses.remove(use)
                self.fallbacks += 1
                continue
            job = Request(f"chunk-{next(self._ids)}", list(use.token_ids), SamplingParams(max_tokens=0),
                          [SegmentSpan(0, len(use.token_ids), use.level, use.key)], request.priority, request.session)
            job.is_chunk_job = True
            self.kv.req_blocks[job.request_id] = self.pool.get_new_blocks(need)
            self._jobs[use.key], self._waiters[use.key] = job, [use]
            self.computed_tokens += len(use.token_ids)
            jobs.append(job)
        return jobs

    def after_step(self, scheduled: list[Request]) -> None:
        """Index the chunks computed in this step (by jobs, or in context by the scheduled
        requests) and hand job results to the requests waiting on them."""
        for request in scheduled:
            if request.chunk_captures:
                pending = []
                for use in request.chunk_captures:
                    if use.start + len(use.token_ids) <= request.num_computed_tokens:
                        self._capture(request, use)
                    else:
                        pending.append(use)
                request.chunk_captures = pending
        for key, job in self._jobs.items():
            blocks = self.kv.req_blocks.pop(job.request_id)
            entry = ChunkEntry(key, tuple(job.all_token_ids[: job.num_prompt_tokens]), blocks)
            for stale in self.pool.chunks.register(entry, job.session):
                self.pool.drop_content(stale)
            waiters = [u for u in self._waiters.get(key, []) if not u.done]
            for i, use in enumerate(waiters):
                if i:  # the job's own allocation is the first waiter's reference
                    self.pool.touch(blocks, use.session)
                use.entry, use.holding = entry, True
                self.levels.claim_blocks(blocks, use.level, use.session)
            if not waiters:
                self.levels.claim_blocks(blocks, job.spans[0].level, job.session)
                self.pool.free(reversed(blocks))
        self._jobs.clear()
        self._waiters.clear()

    def _admit(self, key: str, session: str | None) -> bool:
        """Counts one more sighting of `key`; True once it has been seen `admission` times. A
        session sending the chunk again (its prefix was evicted) is not a new sighting: the
        count is of the questions that read the chunk."""
        if self.admission == 1:
            return True
        count, last = self._sightings.pop(key, (0, None))
        if session is None or session != last:
            count += 1
        self._sightings[key] = (count, session)
        if len(self._sightings) > SIGHTINGS_KEPT:
            self._sightings.popitem(last=False)
        return count >= self.admission

    # ---- progress -----------------------------------------------------------------------------
    def copy(self, request: Request, reach: int, ranges: list[tuple[int, int]]) -> None:
        """Copy the reused ranges up to `reach` (as `step_ranges` planned them) into the
        request's blocks. The computed prefix then ends where the step's first computed range
        starts (the engine moves it past the last one after the forward pass)."""
        start = request.num_computed_tokens
        for use in request.chunk_uses:
            if not use.done and use.entry is not None and start <= use.reuse_start < reach:
                self._copy(request, use)
                use.done = True
                if use.hit and request.num_preemptions == 0:
                    request.num_cached_tokens += use.num_reused
                    request.cached_ranges.append((use.reuse_start, use.end))
                self._release(use)
        request.chunk_uses = [u for u in request.chunk_uses if not u.done]
        request.num_computed_tokens = ranges[0][0] if ranges else reach

    def release(self, request: Request) -> None:
        """The request stops (finished, aborted, preempted): drop its references."""
        for use in request.chunk_uses:
            use.done = True
            self._release(use)
        request.chunk_uses = []
        request.chunk_captures = []

    def _release(self, use: ChunkUse) -> None:
        if use.holding:
            self.pool.free(reversed(use.entry.blocks))
            use.holding = False

    def _copy(self, request: Request, use: ChunkUse) -> None:
        first = use.reuse_start - use.start
        source = self._slots([b.block_id for b in use.entry.blocks], torch.arange(first, first + use.num_reused))
        target = self._slots(self.kv.block_ids(request), torch.arange(use.reuse_start, use.end))
        self._move(source, target, use.start, forward=True)

    def _capture(self, request: Request, use: ChunkUse) -> None:
        """Index the chunk as the request computed it, keys rotated back to position 0."""
        if self.pool.chunks.lookup(use.key, use.token_ids) is not None:
            return  # another prompt indexed it first
        n = len(use.token_ids)
        need = -(-n // self.kv.block_size)
        if need > self.pool.num_free_blocks:
            self.capture_skips += 1
            return
        blocks = self.pool.get_new_blocks(need)
        source = self._slots(self.kv.block_ids(request), torch.arange(use.start, use.start + n))
        self._move(source, self._slots([b.block_id for b in blocks], torch.arange(n)), use.start, forward=False)
        entry = ChunkEntry(use.key, use.token_ids, blocks)
        for stale in self.pool.chunks.register(entry, use.session):
            self.pool.drop_content(stale)
        self.levels.claim_blocks(blocks, use.level, use.session)
        self.pool.free(reversed(blocks))
        self.captured_tokens += n

    def _slots(self, block_ids: list[int], positions: torch.Tensor) -> torch.Tensor:
        """Flat cache slots of `positions` in a sequence laid out over `block_ids`."""
        bs = self.kv.block_size
        return torch.tensor(block_ids)[positions // bs] * bs + positions % bs

    @torch.inference_mode()
    def _move(self, source: torch.Tensor, target: torch.Tensor, position: int, forward: bool) -> None:
        """Copy KV rows between flat cache slots (every layer), rotating the keys by +position
        (forward) or -position."""
        if self.kv_cache is None:
            raise RuntimeError("ChunkReuse.bind() was not called")
        dev = self.kv_cache.device
        source, target = source.to(dev), target.to(dev)
        layers, _, num_blocks, block_size, heads, dim = self.kv_cache.shape
        flat = self.kv_cache.view(layers, 2, num_blocks * block_size, heads, dim)
        # Advanced indexing, not index_select: on this strided view index_select first copies
        # the whole cache (210 ms against 7 ms for a 0.6B-shaped pool).
        keys = flat[:, 0, source]
        values = flat[:, 1, source]
        sin = self.sin[position] if forward else -self.sin[position]
        flat[:, 0, target] = shift_keys(keys, self.cos[position], sin)
        flat[:, 1, target] = values

    def stats(self) -> dict[str, int]:
        values = (self.queries_tokens, self.hits_tokens, self.computed_tokens, self.captured_tokens, self.fallbacks,
                  self.capture_skips, self.admission_skips)
        return dict(zip(STATS, values))

    @staticmethod
    def empty_stats() -> dict[str, int]:
        return dict.fromkeys(STATS, 0)
