"""LLMEngine: tokenises requests, runs scheduler -> model -> sampler steps, finishes requests.
Single-threaded; AsyncEngine drives it from a background thread."""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from typing import Any

import torch

from glmcot.engine.allocator import keep_large_buffers
from glmcot.engine.cache.policies import make_eviction_policy
from glmcot.engine.cache.kv_cache_manager import KVCacheManager
from glmcot.engine.cache.sessions import SessionLevels
from glmcot.engine.config import EngineConfig
from glmcot.engine.core.chunk_reuse import ChunkReuse
from glmcot.engine.core.detokenizer import TextStream
from glmcot.engine.core.model_runner import ModelRunner, kv_bytes_per_token
from glmcot.engine.core.prompts import Prompt, PromptLimits, check_fits, tokenize_prompt
from glmcot.engine.core.request import Request, SegmentSpan
from glmcot.engine.core.sampler import sample, token_logprob
from glmcot.engine.core.scheduler import Scheduler
from glmcot.engine.models.loader import DTYPES, LoadedModel, load_model
from glmcot.engine.outputs import RequestOutput

log = logging.getLogger(__name__)

DEFAULT_CPU_KV_BYTES = 4 << 30
DEFAULT_MAX_MODEL_LEN = 8192
DEFAULT_POOL_TOKENS = 32768


def load_for(config: EngineConfig) -> LoadedModel:
    """The weights an engine with `config` runs (to share among several engines: `loaded=`)."""
    limit = config.max_model_len or DEFAULT_MAX_MODEL_LEN
    return load_model(config.model, config.dtype, config.device, limit + 1, config.seed, config.tokenizer)


class LLMEngine:
    def __init__(self, config: EngineConfig, hash_fn: Callable | None = None, loaded: LoadedModel | None = None) -> None:
        """`loaded`: weights already loaded (`load_model`) for this model, dtype, device and
        max_model_len, shared with other engines in the process (each engine keeps its own KV
        pool, cache and scheduler; the model holds no per-request state)."""
        self.config = config
        if config.device == "cpu":
            torch.set_num_threads(config.num_threads)
            if config.keep_large_buffers:
                keep_large_buffers()
        dtype = DTYPES[config.dtype]
        limit = config.max_model_len or DEFAULT_MAX_MODEL_LEN
        if loaded is None:
            loaded = load_for(config)
        else:
            weights = next(loaded.model.parameters())
            if weights.dtype != dtype or weights.device.type != torch.device(config.device).type:
                raise ValueError(f"the shared model is {weights.dtype} on {weights.device}; this engine wants "
                                 f"{config.dtype} on {config.device}")
            if loaded.model.rotary.cos.shape[0] < min(limit + 1, loaded.config.max_position_embeddings):
                raise ValueError(f"the shared model was loaded for {loaded.model.rotary.cos.shape[0] - 1} positions; "
                                 f"this engine wants max_model_len {limit}")
        self.model, self.model_config, self.tokenizer = loaded.model, loaded.config, loaded.tokenizer
        self.eos_token_ids = set(loaded.config.eos_token_ids) | set(loaded.tokenizer.eos_token_ids)
        self._grammars = None  # GrammarCompiler, made at the first request with a grammar
        per_token = kv_bytes_per_token(self.model, dtype)
        bs = config.block_size
        if config.kv_cache_tokens:
            num_blocks = -(-config.kv_cache_tokens // bs)
        elif config.kv_cache_bytes:
            num_blocks = max(1, config.kv_cache_bytes // (per_token * bs))
        else:  # a few full-length sequences, capped by memory
            tokens = min(self._default_kv_bytes() // per_token, max(4 * limit, DEFAULT_POOL_TOKENS))
            num_blocks = max(1, tokens // bs)
        self.max_model_len = min(limit, self.model_config.max_position_embeddings, num_blocks * bs)
        self.prompt_limits = PromptLimits(self.model_config.vocab_size, self.max_model_len,
                                          self.model_config.max_position_embeddings, num_blocks * bs)
        policy = make_eviction_policy(config.eviction_policy, num_blocks, config.p1_cap_fraction)
        self.kv = KVCacheManager(num_blocks, bs, policy, config.enable_prefix_caching,
                                 **({"hash_fn": hash_fn} if hash_fn else {}))
        self.levels = SessionLevels(self.kv.pool)
        self.chunks = None if config.chunk_reuse == "exact" else ChunkReuse(
            config.chunk_reuse, config.pic_recompute_tokens, self.kv, self.levels, config.chunk_source,
            config.chunk_admission)
        self.scheduler = Scheduler(config, self.kv, self.chunks)
        self.runner = ModelRunner(self.model, num_blocks, bs, dtype, config.device, config.cpu_kernels)
        if self.chunks:
            self.chunks.bind(self.runner.kv_cache, self.model.rotary.cos, self.model.rotary.sin)
        self.requests: dict[str, Request] = {}
        self._ids = itertools.count()
        self._arrivals = itertools.count()
        self.num_steps = 0
        self.num_prompt_tokens_computed = 0
        self.num_generated_tokens = 0
        self.busy_time = 0.0
        self.started = time.monotonic()

    def _default_kv_bytes(self) -> int:
        if self.config.device.startswith("cuda"):
            free, _ = torch.cuda.mem_get_info(torch.device(self.config.device))
            return int(free * 0.8)
        return DEFAULT_CPU_KV_BYTES

    # ---- requests -------------------------------------------------------------------------
    def tokenize_prompt(self, prompt: Prompt) -> tuple[list[int], list[SegmentSpan]]:
        """The prompt's token ids and segment spans (`core.prompts.tokenize_prompt`)."""
        return tokenize_prompt(self.tokenizer, prompt, self.model_config.vocab_size)

    def add_request(self, prompt: Prompt, sampling: Any = None, request_id: str | None = None, priority: int = 0,
                    session: str | None = None, on_delta: Callable[[str], None] | None = None,
                    on_line: Callable[[str], None] | None = None,
                    tokenized: tuple[list[int], list[SegmentSpan]] | None = None) -> Request:
        """`tokenized`: the result of tokenize_prompt(prompt), when the caller already has it."""
        from glmcot.engine.sampling_params import SamplingParams

        sampling = sampling or SamplingParams()
        request_id = request_id or self.new_request_id()
        if request_id in self.requests:
            raise ValueError(f"request id {request_id!r} is already running")
        ids, spans = tokenized or self.tokenize_prompt(prompt)
        self.check_fits(len(ids))
        forced = sampling.forced_token_ids
        if sampling.forced_text is not None:
            forced = self.tokenizer.encode(sampling.forced_text)
        request = Request(request_id, ids, sampling, spans, priority, session, next(self._arrivals),
                          list(forced) if forced is not None else None, on_delta, on_line)
        if sampling.seed is not None:
            request.generator = torch.Generator().manual_seed(sampling.seed)
        request.stream = TextStream(self.tokenizer, ids, sampling.stop, on_delta, on_line)
        if sampling.grammar is not None and forced is None:
            request.grammar = self.grammars().state(sampling.grammar)
        self.requests[request_id] = request
        self.levels.begin(session)
        self.scheduler.add(request)
        return request

    def grammars(self):
        """This engine's grammar compiler (made at the first constrained request)."""
        if self._grammars is None:
            from glmcot.engine.grammar import GrammarCompiler

            self._grammars = GrammarCompiler(self.tokenizer, self.model_config.vocab_size, tuple(sorted(self.eos_token_ids)))
        return self._grammars

    def end_session(self, session_id: str) -> int:
        """The session finished: its P2 (notebook) blocks fall to P3. Returns how many."""
        return self.levels.end_session(session_id)

    def new_request_id(self) -> str:
        return f"req-{next(self._ids)}"

    def check_fits(self, num_prompt_tokens: int) -> None:
        check_fits(num_prompt_tokens, self.prompt_limits)

    def abort(self, request_id: str) -> RequestOutput | None:
        request = self.requests.pop(request_id, None)
        if request is None:
            return None
        self.scheduler.abort(request)
        try:
            request.stream.finish(stopped_by_string=False)
        except Exception:  # a failing detokeniser must not keep the request (or its caller) alive
            log.exception("detokenising aborted request %s", request_id)
        return self._output(request)

    def abort_all(self) -> list[str]:
        """Abort every request in flight (after a failed step, or at shutdown); returns their ids."""
        request_ids = list(self.requests)
        for request_id in request_ids:
            self.abort(request_id)
        return request_ids

    def reset_prefix_cache(self) -> bool:
        """Forget every cached block (benchmarks reset between arms). Only when idle."""
        if self.requests:
            return False
        pool = self.kv.pool
        for block in pool.blocks:
            pool.drop_content(block)  # also re-files it as empty for level-aware policies
        pool.cached.clear()
        pool.chunks.entries.clear()
        return True

    def has_unfinished(self) -> bool:
        return bool(self.requests)

    # ---- the step -------------------------------------------------------------------------
    def step(self) -> list[RequestOutput]:
        """Run one batch; returns the requests that finished in it."""
        plan = self.scheduler.schedule()
        if not plan.scheduled:
            return []
        started = time.monotonic()
        logits, sampled = self.runner.execute(plan.scheduled, self.kv)
        for item in plan.scheduled:
            request = item.request
            ranges = item.computed_ranges()
            self.num_prompt_tokens_computed += sum(max(0, min(end, request.num_prompt_tokens) - start) for start, end in ranges)
            request.num_computed_tokens = item.reach if item.reach is not None else ranges[-1][1]
            if not request.is_chunk_job:
                rid = request.request_id
                self.levels.tag_request(request, self.kv.req_blocks.get(rid, []), self.kv.num_cached_blocks.get(rid, 0),
                                        self.kv.block_size)
        if self.chunks:
            self.chunks.after_step([item.request for item in plan.scheduled])
        finished = []
        if sampled:
            logits = logits.cpu()
            for row, request in enumerate(sampled):
                if request.grammar is not None and not request.is_chunk_job:
                    try:
                        request.grammar.mask(logits[row])
                    except Exception:  # noqa: BLE001 - accept() below fails this request alone
                        log.exception("masking request %s", request.request_id)
            tokens = sample(logits, sampled)
            now = time.monotonic()
            for row, (request, token) in enumerate(zip(sampled, tokens)):
                if request.is_chunk_job:
                    continue
                try:
                    if isinstance(token, Exception):
                        raise token
                    if self._append(request, token, now, logits[row] if request.logprobs is not None else None):
                        finished.append(self._output(request))
                except Exception as exc:  # sampling or detokenising this request failed: it alone fails
                    log.exception("request %s failed in sampling or detokenisation", request.request_id)
                    finished.append(self._fail(request, exc, now))
        self.num_steps += 1
        self.busy_time += time.monotonic() - started
        return finished

    def _append(self, request: Request, token: int, now: float, logits: torch.Tensor | None = None) -> bool:
        """Add one generated token; True when the request finished. `logits`: its row, when the
        request wants log-probabilities."""
        params = request.sampling
        if request.num_output_tokens >= params.max_tokens:  # max_tokens=0: a prefill-only request
            return self._finish(request, "length", False, now)
        if request.forced_token_ids is not None:
            if request.num_output_tokens >= len(request.forced_token_ids):
                return self._finish(request, "stop", False, now)
            token = request.forced_token_ids[request.num_output_tokens]
        if request.grammar is not None:
            request.grammar.accept(token)  # a token outside the grammar fails this request
        request.all_token_ids.append(token)
        if logits is not None:
            request.logprobs.append(token_logprob(logits, token, request.sampling.logprobs or 0))
        self.num_generated_tokens += 1
        if request.metrics.first_token_time is None:
            request.metrics.first_token_time = now
        hit_stop_string = request.stream.add_token(token)
        reason = None
        if token in self.eos_token_ids and not params.ignore_eos and request.forced_token_ids is None:
            reason = "stop"
        elif token in params.stop_token_ids or hit_stop_string:
            reason = "stop"
        elif request.grammar is not None and request.grammar.done:
            reason = "stop"  # the grammar's root is complete: nothing but the end of text may follow
        elif request.forced_token_ids is not None and request.num_output_tokens >= len(request.forced_token_ids):
            reason = "stop"
        elif request.num_output_tokens >= params.max_tokens or request.num_tokens >= self.max_model_len:
            reason = "length"
        if reason is None:
            request.stream.publish()
            return False
        return self._finish(request, reason, hit_stop_string, now)

    def _finish(self, request: Request, reason: str, stopped_by_string: bool, now: float) -> bool:
        self.scheduler.finish(request, reason)
        self.requests.pop(request.request_id, None)
        request.metrics.finished_time = now
        request.stream.finish(stopped_by_string)
        return True

    def _fail(self, request: Request, exc: Exception, now: float) -> RequestOutput:
        """Finish `request` with finish_reason "error", freeing its blocks."""
        self.requests.pop(request.request_id, None)
        try:
            self.scheduler.abort(request)
        except Exception:  # its blocks may already be gone; the request is over either way
            log.exception("freeing failed request %s", request.request_id)
        request.finish_reason = "error"
        request.metrics.finished_time = now
        out = self._output(request)
        out.error = f"{type(exc).__name__}: {exc}"
        return out

    def _output(self, request: Request) -> RequestOutput:
        m = request.metrics
        if m.first_token_time is not None:
            m.ttft = m.first_token_time - m.arrival_time
            if m.finished_time is not None and request.num_output_tokens > 1:
                m.tpot = (m.finished_time - m.first_token_time) / (request.num_output_tokens - 1)
        if m.finished_time is not None:
            m.e2e = m.finished_time - m.arrival_time
        return RequestOutput(request.request_id, request.stream.text, request.output_token_ids, request.num_prompt_tokens,
                             max(request.num_cached_tokens, 0), request.finish_reason, m,
                             request.all_token_ids[: request.num_prompt_tokens],
                             logprobs=list(request.logprobs) if request.logprobs is not None else None,
                             level_tokens=request.level_tokens())

    def stats(self) -> dict[str, Any]:
        elapsed = time.monotonic() - self.started
        kv = self.kv.stats()
        queries = kv["prefix_queries_tokens"]
        chunks = self.chunks.stats() if self.chunks else ChunkReuse.empty_stats()
        return {
            **kv,
            **chunks,
            "prefix_hit_rate": kv["prefix_hits_tokens"] / queries if queries else 0.0,
            "chunk_hit_rate": chunks["chunk_hits_tokens"] / queries if queries else 0.0,  # share of prompt tokens
            "eviction_policy": self.config.eviction_policy,
            "chunk_reuse": self.config.chunk_reuse,
            "chunk_source": self.config.chunk_source,
            "sessions_demoted_blocks": self.levels.num_demoted,
            "preemptions": self.scheduler.num_preemptions,
            "running": len(self.scheduler.running),
            "waiting": self.scheduler.num_waiting,
            "steps": self.num_steps,
            "prompt_tokens_computed": self.num_prompt_tokens_computed,
            "generated_tokens": self.num_generated_tokens,
            **(self._grammars.stats() if self._grammars is not None else {}),
            "busy_time_s": self.busy_time,
            "generation_throughput_busy": self.num_generated_tokens / self.busy_time if self.busy_time else 0.0,
            "generation_throughput": self.num_generated_tokens / elapsed if elapsed else 0.0,
            "uptime_s": elapsed,
            "max_model_len": self.max_model_len,
            "block_size": self.kv.block_size,
        }
