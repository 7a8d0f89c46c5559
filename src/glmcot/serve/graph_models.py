"""Graph QA as OpenAI models: `/v1/chat/completions` with `model: "<method>/<graph>"` (for
example `glm/dblp`, `graphcot/dblp`; listed by `/v1/models` for the graphs the key sees) answers
the conversation's last user message with that method over that graph.

Streaming sends the agents' steps as `reasoning_content` deltas (the field chat UIs show as the
model's thinking), then the answer as `content`. Non-streaming, the message carries both. `usage`
counts every LLM call the agents made (prompt, cached and output tokens).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from glmcot.serve import errors, sse
from glmcot.serve.ask import event_views
from glmcot.serve.graph_desk import METHODS, Desk, desk_of
from glmcot.serve.schemas import ModelCard

FINGERPRINT = "glmcot-graph-qa"


def parse_model(model: str | None) -> tuple[str, str] | None:
    """(method, graph) for a graph model name, else None (the engine's own model)."""
    if not model or "/" not in model:
        return None
    method, _, graph = model.partition("/")
    return (method, graph) if method in METHODS and graph else None


def cards(request: Request, created: int) -> list[ModelCard]:
    desk = desk_of(request)
    return [ModelCard(id=f"{method}/{graph}", created=created) for graph in desk.visible() for method in METHODS]


def _last_user_text(body: Any) -> str:
    for message in reversed(body.messages):
        if message.role != "user":
            continue
        content = message.content
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            texts = [getattr(part, "text", None) for part in content]
            return "\n".join(text for text in texts if isinstance(text, str))
        if message.segments:
            return "".join(segment.text for segment in message.segments)
        return ""
    raise errors.APIError(400, "no user message: a graph model answers the last user message", code="no_question")


def _refuse_unsupported(body: Any) -> None:
    if body.n != 1:
        raise errors.APIError(400, "a graph model gives one answer per request (n=1)", code="unsupported_parameter")
    extra = body.model_extra or {}
    asked = {"logprobs": body.logprobs, **{name: extra.get(name) for name in ("tools", "functions", "response_format")}}
    for name, value in asked.items():
        if value not in (None, False, [], {"type": "text"}):
            raise errors.APIError(400, f"{name} is not supported by graph models", code="unsupported_parameter")


def step_text(name: str, payload: dict[str, Any]) -> str | None:
    """One agent step as a line of the reasoning a chat UI shows."""
    if name == "classification":
        return ("Classified as deterministic: one snippet answers it." if payload.get("deterministic")
                else f"Needs reasoning; first missing: {payload.get('missing')}")
    if name == "missing":
        return f"R-Agent, missing: {payload.get('missing')}"
    if name == "reasoning":
        return f"R-Agent, answer: {payload.get('answer')}"
    if name == "snippet" and payload.get("code"):
        return f"A-Agent code:\n```python\n{payload['code'].rstrip()}\n```"
    if name == "retrieval":
        result = payload.get("result") or {}
        output = result.get("output") if isinstance(result, dict) else None
        error = result.get("error") if isinstance(result, dict) else None
        return f"Sandbox: {output.strip()[:2000]}" if output else (f"Sandbox error: {error}" if error else None)
    if name == "thought":
        return f"Thought: {payload.get('text', '').strip()}"
    if name == "action":
        return f"Action: {payload.get('text', '').strip()}"
    if name == "step" and payload.get("observation"):
        return f"Observation: {str(payload['observation']).strip()[:2000]}"
    if name == "agent-error":
        return f"Error ({payload.get('where')}): {payload.get('message')}"
    return None


def _steps(event: Any) -> list[str]:
    return [line + "\n" for name, payload in event_views(event) if (line := step_text(name, payload))]


def steps_of(trace: list[Any]) -> list[str]:
    """A question's trace as the steps a person reads (one string each)."""
    return [line for event in trace for name, payload in event_views(event) if (line := step_text(name, payload))]


def _content(result: Any) -> str:
    if result.failure:
        detail = f": {result.failure_detail}" if getattr(result, "failure_detail", None) else ""
        return f"(no answer: {result.failure}{detail})"
    return result.answer


def _usage(result: Any) -> dict[str, Any]:
    return {"prompt_tokens": result.prompt_tokens, "completion_tokens": result.output_tokens,
            "total_tokens": result.prompt_tokens + result.output_tokens,
            "prompt_tokens_details": {"cached_tokens": result.cached_tokens},
            "llm_calls": result.llm_calls}


async def chat(body: Any, request: Request, method: str, graph: str) -> Any:
    """Answers the chat request with `method` over `graph` (404 if the key does not see it)."""
    desk = desk_of(request)
    if graph not in desk.visible():
        raise errors.not_found(f"model {body.model!r} is not served here (GET /v1/models)")
    _refuse_unsupported(body)
    question = _last_user_text(body)
    model = f"{method}/{graph}"
    rid = "chatcmpl-" + uuid.uuid4().hex
    created = int(time.time())
    if not body.stream:
        _, result = await desk.answer(graph, method, question, endpoint="/v1/chat/completions")
        reasoning = "".join(line for event in result.trace for line in _steps(event))
        # a JSONResponse: the engine's response model would drop reasoning_content and llm_calls
        return JSONResponse({"id": rid, "object": "chat.completion", "created": created, "model": model,
                "system_fingerprint": FINGERPRINT,
                "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                             "message": {"role": "assistant", "content": _content(result),
                                         "reasoning_content": reasoning}}],
                "usage": _usage(result)})
    loop = asyncio.get_running_loop()
    events: asyncio.Queue = asyncio.Queue()

    def on_event(event: Any) -> None:
        try:
            loop.call_soon_threadsafe(events.put_nowait, event)
        except RuntimeError:   # the loop is closing
            pass

    started = await desk.begin(graph, method, question, on_event=on_event, endpoint="/v1/chat/completions")
    include_usage = bool(body.stream_options and getattr(body.stream_options, "include_usage", False))
    return StreamingResponse(_stream(desk, started, events, rid, created, model, include_usage),
                             media_type=sse.MEDIA_TYPE, headers=sse.HEADERS)


async def _stream(desk: Desk, started: Any, events: asyncio.Queue, rid: str, created: int, model: str,
                  include_usage: bool) -> AsyncIterator[str]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return sse.event({"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                          "system_fingerprint": FINGERPRINT,
                          "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]})

    waiting = asyncio.ensure_future(desk.finish(started))
    getter: asyncio.Future | None = None
    try:
        yield chunk({"role": "assistant", "content": ""})
        while True:
            getter = asyncio.ensure_future(events.get())
            done, _ = await asyncio.wait({getter, waiting}, return_when=asyncio.FIRST_COMPLETED)
            if getter in done:
                for line in _steps(getter.result()):
                    yield chunk({"reasoning_content": line})
                continue
            getter.cancel()
            break
        while not events.empty():
            for line in _steps(events.get_nowait()):
                yield chunk({"reasoning_content": line})
        result = waiting.result()
        yield chunk({"content": _content(result)})
        yield chunk({}, finish="stop")
        if include_usage:
            yield sse.event({"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                             "choices": [], "usage": _usage(result)})
        yield sse.DONE
    except errors.APIError as exc:
        yield sse.event(exc.body())
        yield sse.DONE
    finally:
        # normal end, error, or the client went away (this generator closed): stop the agent
        if getter is not None and not getter.done():
            getter.cancel()
        if not waiting.done():
            waiting.cancel()
        desk.cancel(started)
