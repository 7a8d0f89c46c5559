"""`POST /v1/ask`: a question over a named graph, answered by GLM or Graph-CoT agents.

Agents are synchronous; each question runs in the runtime's worker pool and holds its admission
slot until its thread really finishes (a timed-out question still bounds the server's work).
With `stream: true` the agent's trace events are sent as Server-Sent Events while it runs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse

from glmcot.agents.trace import LLMCall, Reasoning, SnippetRun, TraceEvent
from glmcot.eval.view import llm_view
from glmcot.serve import errors, sse
from glmcot.serve.schemas import (EVENT_VERSION, AskRequest, AskResponse, AskTiming, AskUsage,
                                  GraphInfo, GraphList)

router = APIRouter(tags=["Questions"])
DISCONNECT_POLL_S = 1.0   # how often a waiting /v1/ask checks that its client is still there

ERROR_RESPONSES = {
    200: {"description": "The answer (JSON), or with `stream: true` a `text/event-stream` of "
                         "events: start, llm, classification, snippet, retrieval, prefetch, "
                         "notebook, missing, reasoning, thought, action, step, agent-error, answer, "
                         "result (the JSON answer), or error.",
          "content": {"text/event-stream": {}}},
    401: {"description": "Missing or invalid API key"},
    404: {"description": "Unknown graph"},
    413: {"description": "Body or question too large"},
    400: {"description": "Invalid request (a field, a limit, an unknown option)"},
    429: {"description": "Server full; retry later"},
    503: {"description": "Shutting down"},
    504: {"description": "Timed out"},
}


def jsonable(value: Any) -> Any:
    """Trace events and results as plain JSON (dataclasses, tuples, sets, numpy scalars)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    item = getattr(value, "item", None)   # numpy scalars
    if callable(item):
        try:
            return item()
        except (TypeError, ValueError):
            pass
    return str(value)


EVENT_MODES = {
    "live": "every agent step is sent as it happens",
    "llm-live": "each LLM call (classification, reasoning, snippet, thought, action) is sent as "
                "it finishes; retrieval, notebook and error events follow once the agent is "
                "done, because glmcot.agents offers no step callback",
    "replay": "the agent's trace is sent once the agent is done",
}
LLM_EVENT_NAMES = {"graphcot-thought": "thought", "graphcot-action": "action"}  # the rest: "llm"
EVENT_NAMES = {"classify": "classification", "notebook": "notebook", "graphcot-step": "step",
               "graphcot-config": "config", "error": "agent-error", "result": "answer"}


def event_views(event: TraceEvent) -> list[tuple[str, dict[str, Any]]]:
    """An agent trace event as SSE events (name, light payload). LLM calls are sent without their
    prompt segments (instructions and notebook would repeat at every step); the agents' decisions
    come from their own events: the R-Agent's missing information or answer, the A-Agent's
    snippet and what the sandbox made of it."""
    if isinstance(event, LLMCall):   # with the prompt's size by priority level (the page's cache bars)
        return [(LLM_EVENT_NAMES.get(event.agent, "llm"), llm_view(event))]
    if isinstance(event, Reasoning):
        if event.missing is not None:
            return [("missing", {"step": event.step, "attempt": event.attempt, "missing": event.missing})]
        return [("reasoning", {"step": event.step, "attempt": event.attempt, "answer": event.answer})]
    if isinstance(event, SnippetRun):
        return [("snippet", {"step": event.step, "attempt": event.attempt, "code": event.code}),
                ("retrieval", jsonable(event.to_dict()))]
    return [(EVENT_NAMES.get(event.KIND, event.KIND or "step"), jsonable(event.to_dict()))]


@router.get("/v1/graphs", response_model=GraphList, tags=["Questions"])
async def list_graphs(request: Request) -> GraphList:
    from glmcot.serve.graph_desk import desk_of   # only the graphs the key sees

    return GraphList(data=[GraphInfo(**info) for info in desk_of(request).infos()])


def _validate(request: Request, body: AskRequest) -> str:
    state = request.app.state.serve
    limit = state.config.max_question_chars
    if len(body.question) > limit:
        raise errors.APIError(413, f"question of {len(body.question)} characters exceeds the "
                              f"server's limit of {limit}", code="question_too_large")
    tokens_limit = state.config.max_tokens_limit
    if body.options.max_tokens is not None and body.options.max_tokens > tokens_limit:
        raise errors.APIError(400, f"options.max_tokens {body.options.max_tokens} exceeds the "
                              f"server's limit of {tokens_limit} (--max-tokens-limit)",
                              code="max_tokens_too_large")
    from glmcot.serve.graph_desk import desk_of

    names = desk_of(request).visible()   # a graph the key does not see is unknown to it
    if body.graph is None:
        if len(names) != 1:
            raise errors.APIError(400, f"name a graph; this server has {names}",
                                  code="missing_graph")
        return names[0]
    if body.graph not in names:
        raise errors.not_found(f"unknown graph {body.graph!r}; this server has {names}")
    return body.graph


def _response(state: Any, rid: str, body: AskRequest, graph: str, qid: str | None,
              result: Any, ticket: Any) -> AskResponse:
    usage = AskUsage(llm_calls=result.llm_calls, prompt_tokens=result.prompt_tokens,
                     cached_tokens=result.cached_tokens, output_tokens=result.output_tokens,
                     total_tokens=result.prompt_tokens + result.output_tokens)
    timing = AskTiming(latency_s=result.latency_s, llm_time_s=result.llm_time_s,
                       retrieval_time_s=result.retrieval_time_s, queue_s=ticket.queue_s,
                       server_s=time.monotonic() - ticket.arrived)
    trace = [jsonable(e.to_dict()) for e in result.trace] if body.options.include_trace else None
    return AskResponse(id=rid, qid=qid, question=body.question, graph=graph, method=body.method,
                       policy=state.config.policy, answer=result.answer, failure=result.failure,
                       failure_detail=getattr(result, "failure_detail", None),
                       backend=getattr(result, "backend", None) or None,
                       calls_by_agent=dict(getattr(result, "calls_by_agent", {}) or {}),
                       usage=usage, timing=timing, trace=trace)


def _record(state: Any, graph: str, method: str, result: Any) -> None:
    m = state.metrics
    outcome = result.failure or "answered"
    m.questions.inc(graph=graph, method=method, policy=state.config.policy, outcome=outcome)
    m.question_latency.observe(result.latency_s, graph=graph, method=method)
    m.llm_calls.inc(result.llm_calls, graph=graph, method=method)
    m.tokens.inc(result.prompt_tokens, endpoint="/v1/ask", kind="prompt")
    m.tokens.inc(result.cached_tokens, endpoint="/v1/ask", kind="cached")
    m.tokens.inc(result.output_tokens, endpoint="/v1/ask", kind="output")


def _failed(exc: BaseException) -> errors.APIError:
    if isinstance(exc, errors.APIError):
        return exc
    return errors.APIError(500, f"the agent failed: {type(exc).__name__}: {exc}", "server_error",
                           "agent_error")


@router.post("/v1/ask", response_model=AskResponse, responses=ERROR_RESPONSES)
async def ask(body: AskRequest, request: Request):
    """Answers a question. With `stream: true`: `text/event-stream` with one event per agent
    step (classification, missing information, snippet, retrieval result, answer...), then a
    `result` event holding this endpoint's JSON answer."""
    state = request.app.state.serve
    graph = _validate(request, body)
    runtime = state.runtime
    qid = runtime.resolve_qid(body.question, body.qid)
    ticket = await state.admission.acquire("/v1/ask")
    loop = asyncio.get_running_loop()
    rid = "ask-" + uuid.uuid4().hex
    events: asyncio.Queue = asyncio.Queue()

    def on_event(event: Any) -> None:
        try:
            loop.call_soon_threadsafe(events.put_nowait, event)
        except RuntimeError:
            pass

    try:
        future, mode = runtime.start_question(graph, body.method, body.question, qid,
                                              body.options, on_event if body.stream else None)
    except BaseException:
        ticket.release()
        raise
    # the slot is given back when the agent's thread ends, not when the client stops waiting
    future.add_done_callback(lambda _: loop.call_soon_threadsafe(ticket.release))
    ticket.on_cancel.append(lambda: runtime.cancel(future))
    if body.stream:
        return StreamingResponse(_stream(state, rid, body, graph, qid, future, mode, events,
                                         ticket),
                                 media_type=sse.MEDIA_TYPE,
                                 headers={**sse.HEADERS,
                                          "X-Glmcot-Events": mode})
    done = asyncio.wrap_future(future)
    while True:
        remaining = ticket.remaining()
        try:
            if remaining <= 0:
                raise TimeoutError
            result = await asyncio.wait_for(asyncio.shield(done),
                                            timeout=min(DISCONNECT_POLL_S, remaining))
            break
        except (TimeoutError, asyncio.TimeoutError):
            if ticket.remaining() <= 0:
                runtime.cancel(future)
                _count(state, graph, body.method, "timeout")
                raise errors.timeout(state.config.timeout_s) from None
            if await request.is_disconnected():   # nobody is waiting for this answer
                runtime.cancel(future)
                _count(state, graph, body.method, "client_disconnected")
                return Response(status_code=499)
        except Exception as exc:
            _count(state, graph, body.method, "error")
            raise _failed(exc) from None
    _record(state, graph, body.method, result)
    return _response(state, rid, body, graph, qid, result, ticket)


def _count(state: Any, graph: str, method: str, outcome: str) -> None:
    state.metrics.questions.inc(graph=graph, method=method, policy=state.config.policy,
                                outcome=outcome)


async def _stream(state: Any, rid: str, body: AskRequest, graph: str, qid: str | None,
                  future: Any, mode: str, events: asyncio.Queue, ticket: Any
                  ) -> AsyncIterator[str]:
    runtime = state.runtime
    done = asyncio.wrap_future(future)
    seq = 0
    answered = timed_out = False
    getter: asyncio.Future | None = None
    yield sse.event({"version": EVENT_VERSION, "id": rid, "qid": qid, "graph": graph,
                     "method": body.method, "policy": state.config.policy,
                     "events": mode, "events_note": EVENT_MODES[mode]}, name="start", id=seq)
    try:
        deadline = ticket.deadline
        while mode != "replay" and not (done.done() and events.empty()):
            getter = asyncio.ensure_future(events.get())
            waited, _ = await asyncio.wait({getter, done}, timeout=max(0.0, deadline
                                           - time.monotonic()),
                                           return_when=asyncio.FIRST_COMPLETED)
            if getter in waited:
                for name, payload in event_views(getter.result()):
                    seq += 1
                    answered |= name == "answer"
                    yield sse.event(payload, name=name, id=seq)
            else:
                getter.cancel()
                if not waited:
                    raise TimeoutError
        if not done.done():
            await asyncio.wait_for(asyncio.shield(done), timeout=ticket.remaining())
        result = done.result()
        if mode != "live":
            for event in result.trace:
                if mode == "llm-live" and isinstance(event, LLMCall):
                    continue   # already sent as it happened
                for name, payload in event_views(event):
                    seq += 1
                    answered |= name == "answer"
                    yield sse.event(payload, name=name, id=seq)
        _record(state, graph, body.method, result)
        answer = _response(state, rid, body, graph, qid, result, ticket)
        if not answered:   # agents that end their trace without a result event
            seq += 1
            yield sse.event({"type": "result", "answer": answer.answer,
                             "failure": answer.failure}, name="answer", id=seq)
        yield sse.event(answer.model_dump(mode="json"), name="result", id=seq + 1)
    except (TimeoutError, asyncio.TimeoutError):
        timed_out = True
        runtime.cancel(future)
        _count(state, graph, body.method, "timeout")
        yield sse.event(errors.timeout(state.config.timeout_s).body(), name="error")
    except Exception as exc:
        _count(state, graph, body.method, "error")
        yield sse.event(_failed(exc).body(), name="error")
    finally:
        if getter is not None and not getter.done():
            getter.cancel()
        if not done.done():   # the client went away or timed out: stop the agent
            runtime.cancel(future)
            if not timed_out:
                _count(state, graph, body.method, "client_disconnected")
