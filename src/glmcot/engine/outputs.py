"""Request records shared by the engine and its callers: RequestOutput, metrics, and the errors a
caller sees. (Segment is the co-design contract's, glmcot.contract.)"""

from __future__ import annotations

from dataclasses import dataclass, field


class PromptTooLongError(ValueError):
    """A prompt that can never be served: longer than max_model_len or the whole KV pool."""


class EngineClosedError(RuntimeError):
    """The engine was shut down, or its process ended, before the request finished."""


class RequestFailedError(RuntimeError):
    """This request failed in the engine (sampling, detokenisation); other requests went on."""


@dataclass
class RequestMetrics:
    arrival_time: float
    first_scheduled_time: float | None = None
    first_token_time: float | None = None
    finished_time: float | None = None
    queue_time: float | None = None  # arrival -> first scheduled
    ttft: float | None = None  # arrival -> first output token
    tpot: float | None = None  # mean time per output token after the first
    e2e: float | None = None

    @property
    def queue(self) -> float | None:
        return self.queue_time


@dataclass(frozen=True)
class TokenLogprob:
    """A generated token's log-probability under the model (log_softmax of its logits, before
    temperature, top-k or top-p), and the `top` most likely tokens at that position."""

    token_id: int
    logprob: float
    top: tuple[tuple[int, float], ...] = ()


@dataclass
class RequestOutput:
    request_id: str
    text: str
    token_ids: list[int]
    prompt_tokens: int
    cached_tokens: int
    finish_reason: str | None  # "stop" | "length" | "abort" | "error" | None while running
    metrics: RequestMetrics
    prompt_token_ids: list[int] = field(default_factory=list, repr=False)
    error: str | None = None  # why the request failed (finish_reason "error"); others unharmed
    logprobs: list[TokenLogprob] | None = None  # one per output token, when SamplingParams.logprobs is set
    # prompt tokens by priority level: level -> (tokens, of them served from the cache)
    level_tokens: dict[int, tuple[int, int]] = field(default_factory=dict)

    @property
    def output_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None
