"""The caches the simulator drives: the native engine's and vLLM's, both their own code.

One scheduler serves every arm: the native engine's `Scheduler` (engine/core/scheduler.py;
vLLM v1's batching: running requests first, then admissions in arrival order under one token
budget with chunked prefill, preemption by recompute when the pool is full). Underneath it:

- `NativeBackend`: the native `KVCacheManager`, block pool, `SessionLevels` and, for the
  vertex-chunk arm, `ChunkReuse` (its KV copies run on a one-number-per-row stand-in tensor: the
  bookkeeping is the engine's, the KV content is irrelevant here), with any registered eviction
  policy or one of kvsim's alternative policies (policies.py).
- `VllmBackend`: vLLM 0.32's own `KVCacheManager` and block pool (in vLLM's environment), with
  glmcot's plugin attached in `enforce` or `observe` mode or not at all, driven through a thin
  adapter that speaks the native scheduler's cache interface (lookup, allocate, record, free).

No model runs: a step's computed tokens are counted, the sampled tokens are forced, unique ids.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from glmcot.contract import Level
from glmcot.engine.cache.block import KVBlock
from glmcot.engine.cache.kv_cache_manager import KVCacheManager
from glmcot.engine.cache.policies import make_eviction_policy
from glmcot.engine.cache.sessions import SessionLevels
from glmcot.engine.config import EngineConfig
from glmcot.engine.core.request import Request, RequestStatus, SegmentSpan
from glmcot.engine.core.scheduler import Scheduler
from glmcot.engine.sampling_params import SamplingParams


@dataclass(frozen=True)
class Limits:
    """vLLM's batching limits (defaults as `vllm serve` on a data-centre GPU; overridable)."""

    block_size: int = 16  # vLLM's default KV block size
    max_num_seqs: int = 256  # vLLM's default --max-num-seqs
    max_num_batched_tokens: int = 8192  # vLLM v1's default for the OpenAI server with chunked prefill


@dataclass
class Finished:
    handle: Any
    blocks: list  # the request's blocks (native KVBlock), before they were freed
    prompt_computed: int  # prompt tokens computed for it (recomputation after preemption included)


@dataclass
class StepResult:
    computed: list[tuple[int, int]]  # (tokens computed, context end) per scheduled sequence
    prompt_tokens_computed: int
    finished: list[Finished] = field(default_factory=list)
    first_tokens: list[Any] = field(default_factory=list)  # handles that produced their first token
    preempted: int = 0


class Backend:
    """A scheduler over one cache; subclasses give the cache."""

    name = "backend"

    def __init__(self, kv: Any, limits: Limits, chunks: Any = None, levels: SessionLevels | None = None) -> None:
        self.kv = kv
        self.limits = limits
        self.levels = levels
        self.chunks = chunks
        config = EngineConfig(block_size=limits.block_size, max_num_seqs=limits.max_num_seqs,
                              max_num_batched_tokens=limits.max_num_batched_tokens, enable_chunked_prefill=True)
        self.scheduler = Scheduler(config, kv, chunks)
        self.handles: dict[str, Any] = {}
        self._arrivals = 0
        self._token = 1 << 28  # generated token ids: unique, never a prompt's (prompt ids < 2^28)
        self.prompt_tokens_computed = 0
        self.prompt_tokens_queried = 0
        self.requests_finished = 0
        self._computed: dict[str, int] = {}

    # ---- requests
    def add(self, handle: Any, request_id: str, token_ids: list[int], spans: list[tuple[int, int, str | None]],
            output_tokens: int, session: str, end_session: bool) -> None:
        """`spans`: (level, tokens, key) head to tail."""
        segment_spans, start = [], 0
        for level, count, key in spans:
            if count:
                segment_spans.append(SegmentSpan(start, start + count, Level(level), key))
            start += count
        forced = list(range(self._token, self._token + output_tokens))
        self._token += output_tokens
        request = Request(request_id, token_ids, SamplingParams(max_tokens=output_tokens), segment_spans, 0, session,
                          self._arrivals, forced)
        request.end_session = end_session
        self._arrivals += 1
        self.handles[request_id] = handle
        self.prompt_tokens_queried += len(token_ids)
        if self.levels is not None:
            self.levels.begin(session)
        self.scheduler.add(request)

    def has_work(self) -> bool:
        return self.scheduler.has_work()

    def step(self) -> StepResult:
        plan = self.scheduler.schedule()
        bs = self.limits.block_size
        result = StepResult([], 0, preempted=len(plan.preempted))
        sampled = []
        for item in plan.scheduled:
            request = item.request
            ranges = item.computed_ranges()
            if ranges[-1][1] == request.num_tokens and not request.is_chunk_job:
                sampled.append(request)  # its last token was computed: it gives the next token
            prompt = sum(max(0, min(end, request.num_prompt_tokens) - start) for start, end in ranges)
            result.prompt_tokens_computed += prompt
            self._computed[request.request_id] = self._computed.get(request.request_id, 0) + prompt
            result.computed += [(end - start, end) for start, end in ranges]
            request.num_computed_tokens = item.reach if item.reach is not None else ranges[-1][1]
            if self.levels is not None and not request.is_chunk_job:
                rid = request.request_id
                self.levels.tag_request(request, self.kv.req_blocks.get(rid, []), self.kv.num_cached_blocks.get(rid, 0), bs)
        if self.chunks:
            self.chunks.after_step([item.request for item in plan.scheduled])
        for request in sampled:
            if request.num_output_tokens < request.sampling.max_tokens:
                request.all_token_ids.append(request.forced_token_ids[request.num_output_tokens])
                if request.num_output_tokens == 1:
                    result.first_tokens.append(self.handles[request.request_id])
            if request.num_output_tokens >= request.sampling.max_tokens:
                result.finished.append(self._finish(request))
        self.prompt_tokens_computed += result.prompt_tokens_computed
        return result

    def _finish(self, request: Request) -> Finished:
        blocks = self.blocks_of(request)
        request.status = RequestStatus.FINISHED
        self.scheduler.finish(request, "stop")
        if request.end_session and self.levels is not None:
            self.levels.end_session(request.session)
        self.requests_finished += 1
        return Finished(self.handles.pop(request.request_id), blocks, self._computed.pop(request.request_id, 0))

    def blocks_of(self, request: Request) -> list:
        return []

    def counters(self) -> dict[str, Any]:
        return {"prompt_tokens_queried": self.prompt_tokens_queried, "prompt_tokens_computed": self.prompt_tokens_computed,
                "preemptions": self.scheduler.num_preemptions}


class NativeBackend(Backend):
    name = "native"

    def __init__(self, num_blocks: int, limits: Limits, policy: str | Any = "lru", chunks: bool = False,
                 p1_cap_fraction: float = 0.25) -> None:
        evictor = make_eviction_policy(policy, num_blocks, p1_cap_fraction) if isinstance(policy, str) else policy
        kv = KVCacheManager(num_blocks, limits.block_size, evictor)
        levels = SessionLevels(kv.pool)
        reuse = None
        if chunks:
            reuse = _bookkeeping_chunk_reuse(kv, levels, num_blocks, limits.block_size)
        super().__init__(kv, limits, reuse, levels)
        self.policy = evictor

    def blocks_of(self, request: Request) -> list[KVBlock]:
        return list(self.kv.req_blocks.get(request.request_id, []))

    def counters(self) -> dict[str, Any]:
        stats = self.kv.stats()
        out = {**super().counters(), "prefix_queries_tokens": stats["prefix_queries_tokens"],
               "prefix_hits_tokens": stats["prefix_hits_tokens"], "evicted_blocks": stats["evictions"],
               "evictions": {f"p{level}": stats[f"evictions_p{level}"] for level in range(1, 5)},
               "demoted_blocks": self.levels.num_demoted}
        if self.chunks:
            out["chunks"] = self.chunks.stats()
        return out


def _bookkeeping_chunk_reuse(kv: KVCacheManager, levels: SessionLevels, num_blocks: int, block_size: int):
    """The engine's ChunkReuse with its defaults (EngineConfig), bound to a KV tensor of one
    number per row: its copies move real rows of the right slots, just not a model's."""
    import torch

    from glmcot.engine.core.chunk_reuse import ChunkReuse

    defaults = EngineConfig()
    reuse = ChunkReuse(defaults.chunk_reuse if defaults.chunk_reuse != "exact" else "pic", defaults.pic_recompute_tokens,
                       kv, levels, defaults.chunk_source, defaults.chunk_admission)
    positions = 1 << 17
    reuse.bind(torch.zeros(1, 2, num_blocks, block_size, 1, 2), torch.ones(positions, 2), torch.zeros(positions, 2))
    return reuse


class VllmKV:
    """vLLM's KVCacheManager behind the native scheduler's cache interface. Imports vLLM."""

    def __init__(self, num_blocks: int, block_size: int, mode: str, max_model_len: int = 1 << 17,
                 p1_share: float | None = None) -> None:
        import torch
        from vllm.utils.hashing import sha256
        from vllm.v1.core.kv_cache_manager import KVCacheManager as VllmKVCacheManager
        from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
        from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec

        from glmcot.vllm_plugin.hooks import attach
        from glmcot.vllm_plugin.settings import Mode, Settings

        self.block_size = block_size
        spec = FullAttentionSpec(block_size=block_size, num_kv_heads=1, head_size=1, dtype=torch.float32)
        config = KVCacheConfig(num_blocks=num_blocks + 1, kv_cache_tensors=[],  # + vLLM's null block
                               kv_cache_groups=[KVCacheGroupSpec(["layer.0"], spec)])
        self.manager = VllmKVCacheManager(config, max_model_len=max_model_len, scheduler_block_size=block_size,
                                          hash_block_size=block_size, enable_caching=True, log_stats=True)
        init_none_hash(sha256)
        self.hasher = get_request_block_hasher(block_size, sha256)
        self.controller = None
        if mode != "absent":
            settings = Settings(mode=Mode(mode)) if p1_share is None else Settings(mode=Mode(mode), p1_share=p1_share)
            self.controller = attach(self.manager, settings, write_stats=False)
        self.requests: dict[str, Any] = {}
        self.req_blocks: dict[str, list] = {}  # what the native scheduler reads (unused by it for vLLM)
        self.num_cached_blocks: dict[str, int] = {}
        self._hits: dict[str, int] = {}
        self._last: Any = None
        self.prefix_queries = 0
        self.prefix_hits = 0

    def _vllm_request(self, request: Request):
        from vllm import SamplingParams as VllmSamplingParams
        from vllm.v1.request import Request as VllmRequest

        from glmcot.vllm_plugin import wire

        vreq = self.requests.get(request.request_id)
        if vreq is None:
            spans, start = [], 0
            for span in request.spans:
                if span.start > start:
                    spans.append((4, span.start - start))
                spans.append((int(span.level), span.end - span.start))
                start = span.end
            params = VllmSamplingParams(max_tokens=request.sampling.max_tokens,
                                        extra_args=wire.encode(spans, request.session, getattr(request, "end_session", False)))
            vreq = VllmRequest(request.request_id, list(request.all_token_ids[: request.num_prompt_tokens]), params, None,
                               block_hasher=self.hasher)
            self.requests[request.request_id] = vreq
        missing = request.all_token_ids[vreq.num_tokens:]
        if missing:
            vreq.append_output_token_ids(missing)
        vreq.num_computed_tokens = request.num_computed_tokens
        return vreq

    def get_computed_blocks(self, request: Request):
        vreq = self._vllm_request(request)
        blocks, hit = self.manager.get_computed_blocks(vreq)[:2]
        self._hits[request.request_id] = hit
        return blocks, hit

    def allocate_slots(self, request: Request, num_new_tokens: int, computed: Any = None) -> bool:
        vreq = self._vllm_request(request)
        if computed is not None:  # an admission (the scheduler passes the prefix hit's blocks)
            hit = self._hits.pop(request.request_id, 0)
            vreq.num_computed_tokens = 0
            done = self.manager.allocate_slots(vreq, num_new_tokens, hit, computed)
            self._last = (vreq, hit)
        else:
            done = self.manager.allocate_slots(vreq, num_new_tokens)
        return done is not None

    def record_lookup(self, num_tokens: int, num_hit: int) -> None:
        vreq, hit = self._last
        self.manager.record_prefix_cache_stats(vreq, hit)
        self.prefix_queries += num_tokens
        self.prefix_hits += num_hit

    def free(self, request: Request) -> None:
        from vllm.v1.request import RequestStatus as VllmStatus

        vreq = self._vllm_request(request)
        finished = request.status == RequestStatus.FINISHED
        vreq.status = VllmStatus.FINISHED_STOPPED if finished else VllmStatus.PREEMPTED
        self.manager.free(vreq)
        if finished:
            del self.requests[request.request_id]


class VllmBackend(Backend):
    name = "vllm"

    def __init__(self, num_blocks: int, limits: Limits, mode: str = "absent", p1_share: float | None = None) -> None:
        if mode not in ("absent", "observe", "enforce"):
            raise ValueError(f"vLLM plugin mode must be absent, observe or enforce, got {mode!r}")
        super().__init__(VllmKV(num_blocks, limits.block_size, mode, p1_share=p1_share), limits)
        self.mode = mode

    def counters(self) -> dict[str, Any]:
        out = {**super().counters(), "prefix_queries_tokens": self.kv.prefix_queries, "prefix_hits_tokens": self.kv.prefix_hits}
        controller = self.kv.controller
        if controller is not None:
            evictions = controller.evictions.as_dict()
            out["evictions"] = {k: evictions[k] for k in ("p1", "p2", "p3", "p4")}
            out["evicted_blocks"] = sum(out["evictions"].values())
            out["demoted_blocks"] = controller.table.demoted
        return out


BackendFactory = Callable[[int, Limits], Backend]
