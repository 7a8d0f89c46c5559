"""What one question produced: the answer or a failure reason, counts and the full trace (typed
events, glmcot.agents.trace; written as JSON objects in order, format glmcot.trace/1)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from glmcot.agents.trace import TraceEvent, event_from_dict

TRACE_VERSION = "glmcot.trace/1"

# graph_source_error: the graph database behind a live source could not be reached mid-question
FAILURES = ("unexpected_output", "retrieval_error", "code_error", "step_limit", "backend_error", "graph_source_error")


@dataclass
class QuestionResult:
    qid: str | None
    question: str
    answer: str
    failure: str | None = None  # None or one of FAILURES (Table 5 categories + backend_error)
    llm_calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    llm_time_s: float = 0.0
    retrieval_time_s: float = 0.0
    trace: list[TraceEvent] = field(default_factory=list)
    method: str = "glm"
    backend: str = ""
    deterministic: bool | None = None
    rounds: int = 0
    failure_detail: str | None = None
    calls_by_agent: dict[str, int] = field(default_factory=dict)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens

    def to_dict(self, with_trace: bool = True) -> dict[str, Any]:
        data = asdict(replace(self, trace=[]))  # the events serialise themselves
        data["trace"] = [event.to_dict() for event in self.trace]
        data["format"] = TRACE_VERSION
        data["total_tokens"] = self.total_tokens
        for key in ("latency_s", "llm_time_s", "retrieval_time_s"):
            data[key] = round(data[key], 6)
        if not with_trace:
            data.pop("trace")
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "QuestionResult":
        known = {name for name in cls.__dataclass_fields__}
        values = {key: value for key, value in data.items() if key in known}
        values["trace"] = [event_from_dict(event) for event in values.get("trace") or [] if isinstance(event, dict)]
        return cls(**values)
