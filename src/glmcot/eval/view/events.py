"""A question's trace as the page's events: the same (name, payload) pairs the server's SSE
stream sends (`POST /v1/ask` with `stream: true`), so one script draws both a live question and
a saved one."""

from __future__ import annotations

from typing import Any

from glmcot.agents.records import QuestionResult
from glmcot.agents.trace import LLMCall, Reasoning, TraceEvent, UnknownEvent

# trace KIND -> event name on the stream (serve/ask.py names them the same way)
NAMES = {"classify": "classification", "notebook": "notebook", "graphcot-step": "step",
         "graphcot-config": "config", "error": "agent-error", "result": "answer",
         "prefetch": "prefetch", "exec": "retrieval"}
LLM_NAMES = {"graphcot-thought": "thought", "graphcot-action": "action"}


def level_tokens(event: LLMCall) -> dict[str, dict[str, int]]:
    """The prompt by priority level ("1".."4"): its characters, and where the backend reported
    them (`response.levels`) its prompt and cached tokens. Without them the page shares the
    call's cached/computed totals out by characters, and says so."""
    levels: dict[str, dict[str, int]] = {}
    for segment in event.segments:
        level = str(segment.get("level", 4))
        chars = segment.get("chars")
        if chars is None:
            chars = len(str(segment.get("text") or ""))
        levels.setdefault(level, {"chars": 0})["chars"] += int(chars)
    reported = event.response.get("levels")
    if isinstance(reported, dict):
        for level, counts in reported.items():
            entry = levels.setdefault(str(level), {"chars": 0})
            if isinstance(counts, dict):
                entry["prompt"] = int(counts.get("prompt", 0))
                entry["cached"] = int(counts.get("cached", 0))
    return levels


def llm_view(event: LLMCall) -> dict[str, Any]:
    """An LLM call without its prompt text (instructions and notebook would repeat at every
    step): who, which step, the reply, tokens (by level) and time."""
    response = event.response
    return {"agent": event.agent, "step": event.metadata.get("step"),
            "attempt": event.metadata.get("attempt"), "text": response.get("text"),
            "prompt_tokens": response.get("prompt_tokens"), "cached_tokens": response.get("cached_tokens"),
            "output_tokens": response.get("output_tokens"), "latency_s": response.get("latency_s"),
            "ttft_s": response.get("ttft_s"), "levels": level_tokens(event)}


def _views(event: TraceEvent) -> list[tuple[str, dict[str, Any]]]:
    if isinstance(event, LLMCall):
        return [(LLM_NAMES.get(event.agent, "llm"), llm_view(event))]
    if isinstance(event, Reasoning):
        if event.missing is not None:
            return [("missing", {"step": event.step, "attempt": event.attempt, "missing": event.missing})]
        return [("reasoning", {"step": event.step, "attempt": event.attempt, "answer": event.answer})]
    if isinstance(event, UnknownEvent):
        return []   # an event this version does not know: not drawn
    data = event.to_dict()
    return [(NAMES.get(event.KIND, event.KIND or "event"), data)]


def page_events(result: QuestionResult, *, graph: str = "", policy: str = "") -> list[list[Any]]:
    """[name, payload] pairs for a finished question: start, its trace, then the result."""
    start = {"graph": graph, "method": result.method, "policy": policy or result.backend,
             "qid": result.qid, "question": result.question, "events": "saved"}
    pairs: list[list[Any]] = [["start", start]]
    for event in result.trace:
        pairs += [[name, payload] for name, payload in _views(event)]
    summary = result.to_dict(with_trace=False)
    summary["usage"] = {"llm_calls": result.llm_calls, "prompt_tokens": result.prompt_tokens,
                        "cached_tokens": result.cached_tokens, "output_tokens": result.output_tokens}
    summary["timing"] = {"latency_s": round(result.latency_s, 6), "llm_time_s": round(result.llm_time_s, 6),
                         "retrieval_time_s": round(result.retrieval_time_s, 6)}
    pairs.append(["result", summary])
    return pairs
