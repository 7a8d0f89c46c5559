"""SamplingParams: how one request is decoded."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from glmcot.engine.grammar import Grammar

# Below this a temperature is greedy: dividing logits by it would overflow (1e-300 gives inf/nan),
# and the distribution is already a point mass at this precision (vLLM uses the same cut-off).
GREEDY_TEMPERATURE = 1e-5
MAX_LOGPROBS = 20  # top alternatives per token, as the OpenAI API allows


@dataclass
class SamplingParams:
    """temperature 0 (or below GREEDY_TEMPERATURE) means greedy. `forced_text` / `forced_token_ids` make the engine emit exactly
    that completion while still running (and sampling) every decode step, so compute is real."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0  # 0 = off
    seed: int | None = None
    max_tokens: int = 256
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    ignore_eos: bool = False
    forced_text: str | None = None
    forced_token_ids: list[int] | None = None
    logprobs: int | None = None  # None: off; k: each output token's log-probability and the top k
    grammar: Grammar | None = None  # constrained decoding: tokens outside it are masked before sampling

    def __post_init__(self) -> None:
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        self.stop = [s for s in self.stop if s]
        if not math.isfinite(self.temperature) or self.temperature < 0:
            raise ValueError("temperature must be a finite number >= 0")
        if not 0 < self.top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")
        if self.top_k < 0:
            raise ValueError("top_k must be >= 0")
        if self.seed is not None and not -(2**63) <= self.seed < 2**64:
            raise ValueError("seed must fit in 64 bits")
        if self.logprobs is not None and not 0 <= self.logprobs <= MAX_LOGPROBS:
            raise ValueError(f"logprobs must be in [0, {MAX_LOGPROBS}]")
        if self.max_tokens < 0:
            raise ValueError("max_tokens must be >= 0")
        if self.forced_text is not None and self.forced_token_ids is not None:
            raise ValueError("give forced_text or forced_token_ids, not both")
        if self.grammar is not None and not isinstance(self.grammar, Grammar):
            raise ValueError("grammar must be a glmcot.engine.grammar.Grammar")

    @property
    def greedy(self) -> bool:
        return self.temperature < GREEDY_TEMPERATURE or self.top_k == 1
