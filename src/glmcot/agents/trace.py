"""A question's trace: one typed event per thing the agents did (file format glmcot.trace/1).

The agents append these as they happen; their consumers (the terminal view of `glmcot ask`, the
server's SSE stream, recorded-call replay, reports) dispatch on the event's class and read the
decisions from its fields, never from the LLM's text again. On disk an event is
`{"type": KIND, **fields}`; `event_from_dict` reads one back.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar


@dataclass(frozen=True)
class TraceEvent:
    KIND: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.KIND, **{item.name: getattr(self, item.name) for item in fields(self)}}


@dataclass(frozen=True)
class LLMCall(TraceEvent):
    """One LLM call: who asked, its prompt (shared instructions named, not repeated) and the reply."""

    KIND: ClassVar[str] = "llm"
    agent: str
    metadata: dict[str, Any]
    session: str
    prompt_sha: str
    segments: list[dict[str, Any]]
    response: dict[str, Any]  # LLMResponse.to_dict()

    @property
    def text(self) -> str:
        return str(self.response.get("text") or "")


@dataclass(frozen=True)
class Classification(TraceEvent):
    """The C-Agent's label, and the first missing information when it planned one."""

    KIND: ClassVar[str] = "classify"
    deterministic: bool
    parsed: bool
    missing: str | None = None


@dataclass(frozen=True)
class Reasoning(TraceEvent):
    """The R-Agent's decision: what is still missing, or the answer."""

    KIND: ClassVar[str] = "reason"
    step: int
    attempt: int
    missing: str | None = None
    answer: str | None = None


@dataclass(frozen=True)
class SnippetRun(TraceEvent):
    """An A-Agent snippet and what the sandbox made of it (code None: the reply held no code)."""

    KIND: ClassVar[str] = "exec"
    step: int
    attempt: int
    code: str | None
    result: dict[str, Any]  # ExecutionResult.to_dict()
    prefetched: list[str] = field(default_factory=list)  # RetrieveNode texts started while decoding
    prefetch_at_s: float | None = None


@dataclass(frozen=True)
class PrefetchTiming(TraceEvent):
    """Pipelined retrieval (Figure 9) for one RetrieveNode line of an A-Agent's stream, in seconds
    from the call's start: when the line was seen, when its search ran (None where the cache
    answered or nothing was started), and when the call's decoding ended. `source`: search,
    cache, in flight or skipped (retrieval.Lookup)."""

    KIND: ClassVar[str] = "prefetch"
    step: int
    attempt: int
    text: str
    seen_s: float
    search_start_s: float | None
    search_end_s: float | None
    decode_end_s: float
    source: str


@dataclass(frozen=True)
class NotebookUpdate(TraceEvent):
    KIND: ClassVar[str] = "notebook"
    added: list[str]  # chunk keys of vertex chunks, "fact" for a fact


@dataclass(frozen=True)
class GraphCoTStep(TraceEvent):
    KIND: ClassVar[str] = "graphcot-step"
    step: int
    thought: str
    action: str
    observation: str | None


@dataclass(frozen=True)
class GraphCoTConfig(TraceEvent):
    """Which Graph-CoT ran, and its limits."""

    KIND: ClassVar[str] = "graphcot-config"
    variant: str
    token_counter: str
    token_cap: int
    max_steps: int


@dataclass(frozen=True)
class AgentError(TraceEvent):
    KIND: ClassVar[str] = "error"
    where: str
    message: str


@dataclass(frozen=True)
class Answer(TraceEvent):
    """The question's end: its answer and failure category (the last event)."""

    KIND: ClassVar[str] = "result"
    answer: str
    failure: str | None


@dataclass(frozen=True)
class UnknownEvent(TraceEvent):
    """An event of a type this version does not know (a newer trace file): kept as read."""

    data: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.data)


EVENT_TYPES: dict[str, type[TraceEvent]] = {
    kind.KIND: kind for kind in (LLMCall, Classification, Reasoning, SnippetRun, PrefetchTiming, NotebookUpdate,
                                 GraphCoTStep, GraphCoTConfig, AgentError, Answer)
}


def event_from_dict(data: dict[str, Any]) -> TraceEvent:
    """An event from its JSON form; one of an unknown type, or with fields this version lacks or
    does not know, comes back as UnknownEvent rather than failing the whole trace."""
    kind = EVENT_TYPES.get(str(data.get("type")))
    if kind is None:
        return UnknownEvent(dict(data))
    names = {item.name for item in fields(kind)}
    values = {key: value for key, value in data.items() if key != "type"}
    try:
        if set(values) - names:
            raise TypeError(f"unknown fields {sorted(set(values) - names)}")
        return kind(**values)
    except TypeError:
        return UnknownEvent(dict(data))
