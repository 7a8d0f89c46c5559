"""What one question produced: the answer or a failure reason, counts and the full trace.

Trace events (JSON objects, in order):
- {"type": "llm", "agent", "metadata", "session", "segments": [...], "response": {...}}
  (P-I segments are listed by name and hash; the rest with their text);
- {"type": "classify", "deterministic", "parsed"};
- {"type": "exec", "step", "attempt", "code", "result": {...}, "prefetched": [...]};
- {"type": "notebook", "added": [...]};
- {"type": "graphcot-step", "step", "thought", "action", "observation"};
- {"type": "error", "where", "message"};
- {"type": "result", "answer", "failure"} (last).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

TRACE_VERSION = "glmcot.trace/1"

FAILURES = ("unexpected_output", "retrieval_error", "code_error", "step_limit", "backend_error")


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
    trace: list[dict[str, Any]] = field(default_factory=list)
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
        data = asdict(self)
        data["trace"] = list(self.trace)
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
        return cls(**{key: value for key, value in data.items() if key in known})
