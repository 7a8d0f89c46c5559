"""Request: one sequence's tokens, progress, cache bookkeeping and streaming state."""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass

from glmcot.contract import Level
from glmcot.engine.outputs import RequestMetrics
from glmcot.engine.sampling_params import SamplingParams


class RequestStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(frozen=True)
class SegmentSpan:
    """Token range [start, end) of one prompt segment."""

    start: int
    end: int
    level: Level
    key: str | None


class Request:
    def __init__(self, request_id: str, prompt_token_ids: list[int], sampling: SamplingParams,
                 spans: list[SegmentSpan] | None = None, priority: int = 0, session: str | None = None,
                 arrival_seq: int = 0, forced_token_ids: list[int] | None = None,
                 on_delta: Callable[[str], None] | None = None, on_line: Callable[[str], None] | None = None) -> None:
        self.request_id = request_id
        self.all_token_ids = list(prompt_token_ids)
        self.num_prompt_tokens = len(prompt_token_ids)
        self.sampling = sampling
        self.spans = spans or [SegmentSpan(0, len(prompt_token_ids), 4, None)]
        self.priority = priority
        self.session = session
        self.arrival_seq = arrival_seq
        self.forced_token_ids = forced_token_ids
        self.on_delta, self.on_line = on_delta, on_line
        self.status = RequestStatus.WAITING
        self.num_computed_tokens = 0
        self.block_hashes: list[int] = []
        self.num_cached_tokens = -1  # prefix-cache hit at first scheduling
        self.cached_ranges: list[tuple[int, int]] = []  # prompt positions served from cache (prefix, chunks)
        self.num_preemptions = 0
        self.finish_reason: str | None = None
        self.metrics = RequestMetrics(arrival_time=time.monotonic())
        self.generator = None  # a torch.Generator for seeded sampling, set by the engine
        self.stream = None  # TextStream, set by the engine
        self.chunk_uses: list = []  # ChunkUse records while vertex chunks are being reused
        self.chunk_captures: list = []  # ChunkUse records of chunks to index once computed in context
        self.is_chunk_job = False  # an internal request computing one vertex chunk in isolation
        self.levels_tagged = 0  # blocks whose priority level has been claimed
        self.logprobs: list | None = [] if sampling.logprobs is not None else None  # TokenLogprob per output token
        self.grammar = None  # GrammarState when the request is decoded under a grammar, set by the engine

    @property
    def num_tokens(self) -> int:
        return len(self.all_token_ids)

    @property
    def output_token_ids(self) -> list[int]:
        return self.all_token_ids[self.num_prompt_tokens :]

    @property
    def num_output_tokens(self) -> int:
        return len(self.all_token_ids) - self.num_prompt_tokens

    @property
    def sort_key(self) -> tuple[int, int]:
        """Lower runs first: (priority, arrival)."""
        return (self.priority, self.arrival_seq)

    def level_of(self, start: int, end: int) -> Level:
        """The most important (lowest) level among segments overlapping [start, end); generated
        tokens are transient."""
        levels = [s.level for s in self.spans if s.start < end and s.end > start]
        if end > self.num_prompt_tokens:
            levels.append(Level.TRANSIENT)
        return min(levels) if levels else Level.TRANSIENT

    def level_tokens(self) -> dict[int, tuple[int, int]]:
        """Prompt tokens by priority level: (tokens, of them served from the cache). Positions
        no segment covers count as transient."""
        counts: dict[int, list[int]] = {}
        covered = 0
        for span in self.spans:
            start, end = max(0, span.start), min(span.end, self.num_prompt_tokens)
            if end <= start:
                continue
            covered += end - start
            cached = sum(max(0, min(end, hi) - max(start, lo)) for lo, hi in self.cached_ranges)
            entry = counts.setdefault(int(span.level), [0, 0])
            entry[0] += end - start
            entry[1] += cached
        if covered < self.num_prompt_tokens:
            counts.setdefault(int(Level.TRANSIENT), [0, 0])[0] += self.num_prompt_tokens - covered
        return {level: (total, cached) for level, (total, cached) in sorted(counts.items())}

    @property
    def finished(self) -> bool:
        return self.status == RequestStatus.FINISHED
