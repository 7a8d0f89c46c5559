"""Continuous batching under one token budget (vLLM v1 style).

Each step first gives the running requests their next tokens (one for decode, a chunk for a
prefill in progress), most important first; when the pool is full it preempts the least
important running request by recompute (its blocks are freed, its hashes kept, so it re-hits
its own prefix when it returns). The rest of the budget admits waiting requests in
(priority, arrival) order, each starting from its longest cached prefix.

With vertex-chunk reuse on (core/chunk_reuse.py), a request's keyed chunks past its prefix hit
are copied from the chunk index (no compute, no budget) and the gaps between them are computed,
several in one step when the budget allows; with the isolated source, chunks not yet cached are
computed alone by chunk jobs scheduled beside it.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass

from glmcot.engine.cache.kv_cache_manager import KVCacheManager
from glmcot.engine.config import EngineConfig
from glmcot.engine.core.chunk_reuse import ChunkReuse
from glmcot.engine.core.request import Request, RequestStatus


@dataclass
class ScheduledRequest:
    request: Request
    num_new_tokens: int
    # Positions computed this step when they are not one range from the computed prefix:
    # gaps between reused chunks, [start, end) each, in order (core/chunk_reuse.py).
    ranges: list[tuple[int, int]] | None = None
    reach: int | None = None  # the computed prefix after this step, when reused chunks follow the last range

    def computed_ranges(self) -> list[tuple[int, int]]:
        if self.ranges is not None:
            return self.ranges
        start = self.request.num_computed_tokens
        return [(start, start + self.num_new_tokens)]


@dataclass
class SchedulerOutput:
    scheduled: list[ScheduledRequest]
    preempted: list[Request]

    @property
    def num_tokens(self) -> int:
        return sum(s.num_new_tokens for s in self.scheduled)


class Scheduler:
    def __init__(self, config: EngineConfig, kv: KVCacheManager, chunks: ChunkReuse | None = None) -> None:
        self.config = config
        self.kv = kv
        self.chunks = chunks
        self.waiting: list[tuple[tuple[int, int], Request]] = []  # heap on (priority, arrival)
        self.running: list[Request] = []
        self.num_preemptions = 0

    def add(self, request: Request) -> None:
        request.status = RequestStatus.WAITING
        heapq.heappush(self.waiting, (request.sort_key, request))

    def has_work(self) -> bool:
        return bool(self.running) or any(not r.finished for _, r in self.waiting)

    @property
    def num_waiting(self) -> int:
        return sum(1 for _, r in self.waiting if not r.finished)

    def schedule(self) -> SchedulerOutput:
        budget = self.config.max_num_batched_tokens
        scheduled: list[ScheduledRequest] = []
        preempted: list[Request] = []
        self.running.sort(key=lambda r: r.sort_key)
        i = 0
        while i < len(self.running) and budget > 0:
            request = self.running[i]
            if self.chunks:
                reach, ranges = self.chunks.step_ranges(request, budget)
                num_new, span = sum(end - start for start, end in ranges), reach - request.num_computed_tokens
            else:
                num_new = span = min(request.num_tokens - request.num_computed_tokens, budget)
            while not self.kv.allocate_slots(request, span):
                victim = self.running.pop()  # the least important not yet scheduled (or itself)
                self._preempt(victim)
                preempted.append(victim)
                if victim is request:
                    break
            if request.status != RequestStatus.RUNNING:
                break
            item = self._with_copies(request, num_new, reach, ranges) if self.chunks else ScheduledRequest(request, num_new)
            if num_new > 0:
                scheduled.append(item)
            budget -= num_new
            i += 1

        # Admit new work only when nothing had to be preempted (the pool is not under pressure).
        while not preempted and self.waiting and budget > 0 and len(self.running) < self.config.max_num_seqs:
            request = self.waiting[0][1]
            if request.finished:  # aborted while waiting
                heapq.heappop(self.waiting)
                continue
            computed, num_hit = self.kv.get_computed_blocks(request)
            chunked = self.config.enable_chunked_prefill
            if self.chunks:
                request.num_computed_tokens = num_hit
                self.chunks.plan(request, num_hit)
                reach, ranges = self.chunks.step_ranges(request, budget if chunked else request.num_tokens)
                request.num_computed_tokens = 0
                remaining, span = sum(end - start for start, end in ranges), reach - num_hit
            else:
                remaining = span = request.num_tokens - num_hit
            if remaining > budget and not chunked:
                if scheduled or remaining <= self.config.max_num_batched_tokens:
                    if self.chunks:
                        self.chunks.release(request)
                    break
                # A prompt longer than the whole budget still has to run: give it one step alone.
            num_new = remaining
            if chunked and not self.chunks:
                num_new = span = min(remaining, budget)
            if not self.kv.allocate_slots(request, span, computed):
                if self.chunks:
                    self.chunks.release(request)
                break
            heapq.heappop(self.waiting)
            self.kv.record_lookup(request.num_tokens, num_hit)
            request.num_computed_tokens = num_hit
            if request.num_cached_tokens < 0:
                request.num_cached_tokens = num_hit
                request.cached_ranges = [(0, num_hit)] if num_hit else []
            if request.metrics.first_scheduled_time is None:
                request.metrics.first_scheduled_time = time.monotonic()
                request.metrics.queue_time = request.metrics.first_scheduled_time - request.metrics.arrival_time
            request.status = RequestStatus.RUNNING
            self.running.append(request)
            scheduled_request = ScheduledRequest(request, num_new)
            if self.chunks:
                for job in self.chunks.start_jobs(request):
                    scheduled.append(ScheduledRequest(job, job.num_tokens))
                    budget -= job.num_tokens
                scheduled_request = self._with_copies(request, num_new, reach, ranges)
            if num_new > 0:
                scheduled.append(scheduled_request)
            budget -= num_new
        return SchedulerOutput(scheduled, preempted)

    def _with_copies(self, request: Request, num_new: int, reach: int, ranges: list[tuple[int, int]]) -> ScheduledRequest:
        """Copy the reused chunks this step passes, then schedule its computed ranges."""
        self.chunks.copy(request, reach, ranges)
        several = len(ranges) > 1
        return ScheduledRequest(request, num_new, ranges if several else None, reach)

    def _preempt(self, request: Request) -> None:
        if self.chunks:
            self.chunks.release(request)
        self.kv.free(request)
        request.num_computed_tokens = 0
        request.levels_tagged = 0  # its blocks may differ when it returns: claim their levels again
        request.num_preemptions += 1
        self.num_preemptions += 1
        self.add(request)

    def finish(self, request: Request, reason: str) -> None:
        request.status = RequestStatus.FINISHED
        request.finish_reason = reason
        if request in self.running:
            self.running.remove(request)
        if self.chunks:
            self.chunks.release(request)
        self.kv.free(request)

    def abort(self, request: Request) -> None:
        self.finish(request, "abort")  # a waiting entry is skipped lazily by schedule()
