"""The in-process serving engine (glmcot.engine): segments, sessions, streaming hooks and forced
decoding pass straight through, so vertex-chunk reuse and priority eviction see the agents'
structure."""

from __future__ import annotations

import concurrent.futures
import time
from typing import Any

from glmcot.llm.types import LLMBackend, LLMError, LLMRequest, LLMResponse


class NativeBackend(LLMBackend):
    """Wraps a running engine, `glmcot.engine.AsyncEngine` or `ProcessEngine` (or builds an
    AsyncEngine from `model`)."""

    def __init__(self, engine: Any | None = None, *, model: str | None = None, timeout_s: float = 600.0, **config: Any):
        if engine is None:
            if model is None:
                raise ValueError("NativeBackend needs an engine or a model ('random:qwen3:tiny' or a checkpoint dir)")
            from glmcot.engine import AsyncEngine, EngineConfig

            engine = AsyncEngine(EngineConfig(model=model, **config))
            self._owns_engine = True
        else:
            self._owns_engine = False
        self.engine = engine
        self.timeout_s = timeout_s
        self.label = f"native {model}" if model else "native"

    def _convert(self, request: LLMRequest):
        from glmcot.engine import SamplingParams

        segments = list(request.segments)
        options: dict[str, Any] = dict(
            temperature=request.temperature,
            top_p=request.top_p,
            max_tokens=request.max_tokens,
            stop=list(request.stop),
        )
        if request.seed is not None:
            options["seed"] = request.seed
        if request.forced_text is not None:
            options["forced_text"] = request.forced_text
            options["stop"] = []  # the forced text already ends where the stop string would cut it
        elif request.grammar is not None:
            options["grammar"] = request.grammar  # the engine masks tokens outside it
        return segments, SamplingParams(**options)

    def complete(self, request: LLMRequest) -> LLMResponse:
        # Every failure is an LLMError, so an agent records a backend_error answer instead of
        # crashing; the message keeps the engine's words (a too-long prompt names its length and
        # the limit).
        try:
            segments, sampling = self._convert(request)
        except (ValueError, TypeError) as error:
            raise LLMError(f"native engine: bad request: {type(error).__name__}: {error}") from error
        started = time.perf_counter()
        try:
            # Prompts that can never be served (PromptTooLongError, empty) are refused right here.
            future = self.engine.submit(
                segments,
                sampling,
                session=request.session,
                priority=request.priority,
                on_delta=request.on_delta,
                on_line=request.on_line,
            )
        except Exception as error:
            raise LLMError(f"native engine refused the request: {type(error).__name__}: {error}") from error
        try:
            output = future.result(timeout=self.timeout_s)
        except concurrent.futures.TimeoutError as error:
            self._abort(future)  # free its KV blocks; nobody waits for it any more
            raise LLMError(f"native engine: no answer within {self.timeout_s:g} s") from error
        except Exception as error:  # the engine's own errors are reported with their type
            raise LLMError(f"native engine: {type(error).__name__}: {error}") from error
        latency = time.perf_counter() - started
        metrics = getattr(output, "metrics", None)
        ttft = _metric(metrics, "ttft")
        output_tokens = len(getattr(output, "token_ids", []) or [])
        return LLMResponse(
            text=output.text,
            prompt_tokens=int(getattr(output, "prompt_tokens", 0) or 0),
            cached_tokens=int(getattr(output, "cached_tokens", 0) or 0),
            output_tokens=output_tokens,
            latency_s=latency,
            ttft_s=ttft,
            finish_reason=str(getattr(output, "finish_reason", "stop") or "stop"),
            backend=self.label,
            levels=_levels(getattr(output, "level_tokens", None)),
        )

    def _abort(self, future: Any) -> None:
        abort = getattr(self.engine, "abort", None)
        request_id = getattr(future, "request_id", None)
        try:
            if abort is not None and request_id is not None:
                abort(request_id)
            else:
                future.cancel()
        except Exception:  # best effort: the timeout is what the caller needs to hear about
            pass

    def end_session(self, session_id: str) -> None:
        self.engine.end_session(session_id)

    def stats(self) -> dict:
        return self.engine.stats()

    def close(self) -> None:
        if self._owns_engine:
            shutdown = getattr(self.engine, "shutdown", None) or getattr(self.engine, "close", None)
            if shutdown is not None:
                shutdown()


def _metric(metrics: Any, name: str) -> float | None:
    if metrics is None:
        return None
    value = metrics.get(name) if isinstance(metrics, dict) else getattr(metrics, name, None)
    return None if value is None else float(value)


def _levels(counts: Any) -> dict[str, dict[str, int]] | None:
    """The engine's prompt tokens by level as the trace keeps them: {"1": {"prompt", "cached"}}."""
    if not counts:
        return None
    return {str(level): {"prompt": int(total), "cached": int(cached)} for level, (total, cached) in counts.items()}
