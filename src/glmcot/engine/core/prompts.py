"""A prompt's token ids, and whether it can ever be served: one function each, shared by
LLMEngine and by ProcessEngine's parent side, which tokenises and refuses prompts before the
engine process sees them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from glmcot.contract import Level, Segment
from glmcot.engine.core.request import SegmentSpan
from glmcot.engine.outputs import PromptTooLongError

Prompt = str | Sequence[int] | Sequence[Any]  # text, token ids, or Segment-like objects


@dataclass(frozen=True)
class PromptLimits:
    """What a prompt must fit in one engine: its vocabulary and max_model_len (the smaller of the
    configured limit, the model's positions and the KV pool)."""

    vocab_size: int
    max_model_len: int
    max_position_embeddings: int
    pool_tokens: int


def tokenize_prompt(tokenizer: Any, prompt: Prompt, vocab_size: int) -> tuple[list[int], list[SegmentSpan]]:
    """Text gets the tokenizer's special tokens (e.g. BOS); segments are tokenised one by one
    (so a shared leading segment gives the same tokens whatever follows it) and keep their
    token boundaries."""
    if isinstance(prompt, str):
        ids = tokenizer.encode(prompt, add_special_tokens=True)
        return ids, [SegmentSpan(0, len(ids), Level.TRANSIENT, None)]
    items = list(prompt)
    if all(isinstance(t, int) for t in items):
        bad = [t for t in items if not 0 <= t < vocab_size]
        if bad:
            raise ValueError(f"token ids out of range [0, {vocab_size}): {bad[:5]}")
        return items, [SegmentSpan(0, len(items), Level.TRANSIENT, None)]
    if all(isinstance(s, Segment) for s in items):
        ids = []
        spans = []
        for i, segment in enumerate(items):
            part = tokenizer.encode(segment.text, add_special_tokens=i == 0)
            spans.append(SegmentSpan(len(ids), len(ids) + len(part), segment.level, segment.key))
            ids.extend(part)
        return ids, spans
    raise TypeError("a prompt is a str, a list of token ids, or a list of Segment")


def check_fits(num_prompt_tokens: int, limits: PromptLimits) -> None:
    """Raises for a prompt no schedule can ever serve: empty, or not below max_model_len."""
    if num_prompt_tokens == 0:
        raise ValueError("empty prompt")
    if num_prompt_tokens >= limits.max_model_len:
        raise PromptTooLongError(
            f"prompt of {num_prompt_tokens} tokens cannot fit: max_model_len is {limits.max_model_len} "
            f"(model positions {limits.max_position_embeddings}, KV pool {limits.pool_tokens} tokens)")
