"""Compact prompts: glmcot-mini never sees the agents' long shared prompts (P-I). Each shared
segment is replaced by a short agent tag, in training and at inference alike, so a small model
with short context learns from what varies (question, notebook, retry error) and the sequences
stay short enough to train on a CPU."""

from __future__ import annotations

from dataclasses import replace

from glmcot.contract import Level, Segment
from glmcot.llm.types import LLMBackend, LLMRequest, LLMResponse

TAG = "<<glmcot-mini {agent}>>\n"


def compact_segments(segments: list[Segment], agent: str) -> list[Segment]:
    """The segments with every shared prompt (Level.SHARED_PROMPT) replaced by the agent's tag."""
    out: list[Segment] = []
    for segment in segments:
        if segment.level == Level.SHARED_PROMPT:
            out.append(Segment(TAG.format(agent=agent), Level.SHARED_PROMPT, segment.key))
        else:
            out.append(segment)
    return out


def compact_prompt(segments: list[Segment], agent: str) -> str:
    return "".join(segment.text for segment in compact_segments(segments, agent))


class CompactBackend(LLMBackend):
    """Wraps a backend serving glmcot-mini: requests go through with compact prompts."""

    def __init__(self, inner: LLMBackend, label: str = "glmcot-mini (trained on synthetic data)"):
        self.inner = inner
        self.label = f"{label} on {inner.label}"

    def complete(self, request: LLMRequest) -> LLMResponse:
        agent = str(request.metadata.get("agent", "unknown"))
        response = self.inner.complete(replace(request, segments=compact_segments(list(request.segments), agent)))
        response.backend = self.label
        return response

    def end_session(self, session_id: str) -> None:
        self.inner.end_session(session_id)

    def close(self) -> None:
        self.inner.close()
