"""Bookkeeping shared by the GLM agent and the Graph-CoT baseline: LLM calls with their trace
events and token/time counters, and the typed failure that ends a question."""

from __future__ import annotations

import time
import uuid
from typing import Callable

from glmcot.agents.records import QuestionResult
from glmcot.llm import LLMBackend, LLMError, LLMRequest, LLMResponse, Segment
from glmcot.agents.trace import AgentError, Answer, LLMCall, TraceEvent
from glmcot.agents.formats import valid_text
from glmcot.llm.replay import prompt_hash


class AsyncAnswer:
    """`await agent.aanswer(question)`: `answer` on a worker thread, so an event loop (a web app,
    LangChain's or LlamaIndex's async paths) never blocks on a question. The agents' LLM calls
    and sandbox runs are blocking; a thread per question in flight is what they cost. Cancelling
    the awaiting task does not stop a question already running: it finishes on its thread (the
    server's agents stop early through their backend's cancel flag)."""

    async def aanswer(self, question: str, qid: str | None = None) -> QuestionResult:
        import asyncio

        return await asyncio.to_thread(self.answer, question, qid)


class QuestionFailed(Exception):
    """Ends a question with a Table 5 category (or backend_error) and a detail."""

    def __init__(self, category: str, detail: str):
        super().__init__(f"{category}: {detail}")
        self.category = category
        self.detail = detail


class EventLog(list):
    """The trace: a list of events that also reports each new one to a hook."""

    def __init__(self, items=(), hook: Callable[[TraceEvent], None] | None = None):
        super().__init__(items)
        self.hook = hook

    def append(self, event: TraceEvent) -> None:
        super().append(event)
        if self.hook is not None:
            try:
                self.hook(event)
            except Exception:  # a broken observer must not break the question
                self.hook = None


class QuestionRun:
    """One question in flight: its session, its trace and its counters."""

    def __init__(self, backend: LLMBackend, question: str, qid: str | None, method: str, prompt_names: dict[str, str],
                 on_event: Callable[[TraceEvent], None] | None = None):
        self.backend = backend
        question = valid_text(question)
        self.question = question
        self.qid = qid
        self.session = f"{qid or 'q'}#{uuid.uuid4().hex[:8]}"
        self.result = QuestionResult(qid=qid, question=question, answer="", method=method, backend=backend.label)
        self.result.trace = self.trace = EventLog(hook=on_event)
        self.started = time.perf_counter()
        self._prompt_names = prompt_names  # P-I text -> name@hash, so traces do not repeat it

    def call(
        self,
        agent: str,
        segments: list[Segment],
        *,
        max_tokens: int,
        stop: list[str],
        step: int,
        attempt: int = 0,
        temperature: float = 0.0,
        on_line: Callable[[str], None] | None = None,
    ) -> LLMResponse:
        metadata = {"qid": self.qid if self.qid is not None else self.session, "agent": agent, "step": step, "attempt": attempt,
                    "method": self.result.method}
        request = LLMRequest(
            segments=segments,
            max_tokens=max_tokens,
            temperature=temperature,
            stop=list(stop),
            session=self.session,
            metadata=metadata,
            on_line=on_line,
        )
        try:
            response = self.backend.complete(request)
        except LLMError:
            raise
        except Exception as error:  # e.g. the engine refusing a prompt that can never fit
            raise LLMError(f"{type(error).__name__}: {error}") from error
        text = valid_text(response.text)
        if text is not response.text:
            # The reply is untrusted text: from here on (parsers, prompts, traces) it is valid Unicode.
            response.text = text
        result = self.result
        result.llm_calls += 1
        result.calls_by_agent[agent] = result.calls_by_agent.get(agent, 0) + 1
        result.prompt_tokens += response.prompt_tokens
        result.cached_tokens += response.cached_tokens
        result.output_tokens += response.output_tokens
        result.llm_time_s += response.latency_s
        self.trace.append(LLMCall(agent=agent, metadata=metadata, session=self.session,
                                  prompt_sha=prompt_hash(request.prompt),
                                  segments=[self._segment_record(s) for s in segments], response=response.to_dict()))
        return response

    def _segment_record(self, segment: Segment) -> dict:
        if segment.level == 1 and segment.text in self._prompt_names:
            return {"level": 1, "key": segment.key, "prompt": self._prompt_names[segment.text], "chars": len(segment.text)}
        return {"level": segment.level, "key": segment.key, "text": segment.text}

    def finish(self, answer: str, failure: QuestionFailed | None = None) -> QuestionResult:
        self.result.answer = answer
        if failure is not None:
            self.result.failure = failure.category
            self.result.failure_detail = failure.detail
            self.trace.append(AgentError(failure.category, failure.detail))
        self.result.latency_s = time.perf_counter() - self.started
        self.trace.append(Answer(answer, self.result.failure))
        try:
            self.backend.end_session(self.session)
        except Exception as error:  # ending a session must never lose the answer
            self.trace.append(AgentError("end_session", f"{type(error).__name__}: {error}"))
        return self.result
