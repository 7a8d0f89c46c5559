"""The request/response records every backend speaks, and the backend interface."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, Callable

from glmcot.contract import Segment, join_segments
from glmcot.engine.grammar import Choices, Grammar  # noqa: F401 - re-exported for the agents (which may not import engine)

@dataclass
class LLMRequest:
    """One completion request. `metadata` names the caller: qid, agent, step, attempt."""

    segments: list[Segment]
    max_tokens: int = 256
    temperature: float = 0.0
    stop: list[str] = field(default_factory=list)
    session: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    # Streaming: on_delta(text_piece) for each new piece; on_line(line) for each completed line
    # (without its newline; the unterminated last line is delivered when the call ends).
    on_delta: Callable[[str], None] | None = None
    on_line: Callable[[str], None] | None = None
    top_p: float = 1.0
    seed: int | None = None
    # Scheduling priority (lower is served first): which request runs next, not how long its KV is
    # kept (that is the segments' levels).
    priority: int = 0
    # Force-decode exactly this completion (the scripted policy on the native engine); backends
    # that cannot force decoding reject a request that sets it.
    forced_text: str | None = None
    # Constrained decoding: the reply must match this grammar (the native engine masks tokens;
    # a vLLM server gets it as a structured-output grammar when it takes one).
    grammar: Grammar | None = None

    @property
    def prompt(self) -> str:
        return join_segments(self.segments)


@dataclass
class LLMResponse:
    """A completion: the text (stop string excluded) with token counts and timings."""

    text: str
    prompt_tokens: int
    cached_tokens: int
    output_tokens: int
    latency_s: float
    ttft_s: float | None = None
    finish_reason: str = "stop"
    backend: str = ""
    # prompt tokens by priority level "1".."4": {"prompt": n, "cached": m}, where the backend
    # reports them (the native engine); None elsewhere
    levels: dict[str, dict[str, int]] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {
            "text": self.text,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "output_tokens": self.output_tokens,
            "latency_s": round(self.latency_s, 6),
            "ttft_s": None if self.ttft_s is None else round(self.ttft_s, 6),
            "finish_reason": self.finish_reason,
            "backend": self.backend,
        }
        if self.levels is not None:
            data["levels"] = self.levels
        return data


class LLMError(RuntimeError):
    """A backend could not produce a completion (after its retries)."""


class LLMBackend(abc.ABC):
    """What agents call. Implementations are thread-safe: many questions call concurrently."""

    #: Short label written into traces and reports ("openai", "native", "scripted policy", ...).
    label: str = "backend"

    @abc.abstractmethod
    def complete(self, request: LLMRequest) -> LLMResponse:
        """Runs one request to completion (streaming through the request's hooks if set)."""

    def end_session(self, session_id: str) -> None:
        """Tells the backend a question finished (the engine demotes its notebook to P-III)."""

    def close(self) -> None:
        """Releases connections, engines or files."""

    def __enter__(self) -> "LLMBackend":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LineSplitter:
    """Feeds streamed pieces to on_delta and completed lines to on_line. Linear in the text: the
    unfinished line is kept as a list of pieces and each piece is scanned once (re-scanning and
    re-copying a growing buffer per piece, or the rest of it per line, is quadratic)."""

    def __init__(self, on_delta: Callable[[str], None] | None, on_line: Callable[[str], None] | None):
        self.on_delta = on_delta
        self.on_line = on_line
        self._pending: list[str] = []

    def feed(self, piece: str) -> None:
        if not piece:
            return
        if self.on_delta is not None:
            self.on_delta(piece)
        if self.on_line is None:
            return
        newline = piece.find("\n")
        if newline < 0:
            self._pending.append(piece)
            return
        self._pending.append(piece[:newline])
        line = "".join(self._pending)
        self._pending = []
        self.on_line(line)
        start = newline + 1
        while True:
            newline = piece.find("\n", start)
            if newline < 0:
                break
            self.on_line(piece[start:newline])
            start = newline + 1
        if start < len(piece):
            self._pending.append(piece[start:])

    def finish(self) -> None:
        if self.on_line is not None and self._pending:
            line = "".join(self._pending)
            self._pending = []
            if line:
                self.on_line(line)


def cut_at_stop(text: str, stop: list[str]) -> tuple[str, bool]:
    """Truncates text before the earliest stop string, as servers do; says if one was found."""
    cut = len(text)
    for s in stop:
        if s:
            position = text.find(s)
            if position != -1 and position < cut:
                cut = position
    return text[:cut], cut < len(text)
