"""Trace events are typed from the agent to every consumer, and their JSON form reads back."""

from __future__ import annotations

import json

from glmcot.agents.records import QuestionResult
from glmcot.agents.trace import (EVENT_TYPES, AgentError, Answer, Classification, GraphCoTConfig, GraphCoTStep,
                                 LLMCall, NotebookUpdate, PrefetchTiming, Reasoning, SnippetRun, UnknownEvent,
                                 event_from_dict)

EVENTS = [
    LLMCall("reason", {"qid": "q", "agent": "reason", "step": 1, "attempt": 0}, "q#1", "abc",
            [{"level": 1, "key": None, "prompt": "reason/dblp@1", "chars": 10}], {"text": "<missing>x</missing>"}),
    Classification(False, True, "the authors"),
    Reasoning(1, 0, missing="the authors"),
    SnippetRun(0, 1, "print(1)", {"ok": True, "output": "1\n"}, prefetched=["A Paper"], prefetch_at_s=0.25),
    PrefetchTiming(0, 1, "A Paper", 0.25, 0.26, 0.3, 0.5, "search"),
    NotebookUpdate(["vertex:p1@2", "fact"]),
    GraphCoTStep(2, "I look.", "NodeFeature[p1, year]", "The feature is 2020."),
    GraphCoTConfig("faithful", "tiktoken cl100k", 10000, 10),
    AgentError("code_error", "NameError"),
    Answer("2020", None),
]


def test_every_event_type_reads_back_from_its_json_form():
    assert {type(event) for event in EVENTS} == set(EVENT_TYPES.values())
    for event in EVENTS:
        data = json.loads(json.dumps(event.to_dict()))
        assert data["type"] == event.KIND
        assert event_from_dict(data) == event


def test_unknown_or_changed_events_are_kept_as_read():
    newer = {"type": "plan-revision", "step": 3}
    assert event_from_dict(newer) == UnknownEvent(newer) and event_from_dict(newer).to_dict() == newer
    changed = {"type": "result", "answer": "x", "failure": None, "confidence": 0.9}
    assert isinstance(event_from_dict(changed), UnknownEvent)


def test_a_result_round_trips_with_typed_events():
    result = QuestionResult(qid="q", question="Q?", answer="2020", trace=list(EVENTS))
    data = json.loads(json.dumps(result.to_dict()))
    assert data["trace"][0]["type"] == "llm" and data["trace"][-1] == {"type": "result", "answer": "2020", "failure": None}
    again = QuestionResult.from_dict(data)
    assert again.trace == EVENTS and again.answer == "2020"
    assert "trace" not in result.to_dict(with_trace=False)
