"""OpenAI-compatible `/v1/completions`, `/v1/chat/completions` and `/v1/models` over the engine.

Each choice is one engine request submitted to the engine (AsyncEngine or ProcessEngine); its
deltas cross from the engine's thread into the event loop through a queue. A client that disconnects mid-stream
cancels the response task, whose `finally` aborts the engine requests so their blocks are freed.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from glmcot.engine.outputs import EngineClosedError
from glmcot.serve import errors, sse
from glmcot.serve.engine_bridge import EngineBridge, Generation, GenerationAborted
from glmcot.serve.schemas import (MAX_STOP, ChatCompletionRequest, ChatCompletionResponse,
                                  CompletionRequest, CompletionResponse, ModelCard, ModelList)

router = APIRouter(tags=["OpenAI-compatible"])


def _state(request: Request):
    return request.app.state.serve


def _bridge(request: Request) -> EngineBridge:
    bridge = _state(request).runtime.bridge
    if bridge is None:
        raise errors.APIError(501, "this server has no native engine (it was started with an "
                              "upstream --llm URL or the scripted policy alone); the "
                              "OpenAI-compatible endpoints need --model", "invalid_request_error",
                              "no_engine")
    return bridge


def _check_model(request: Request, model: str | None) -> str:
    served = _state(request).config.model_name
    if model not in (None, "", served):
        raise errors.not_found(f"model {model!r} is not served here; this server serves "
                               f"{served!r} (GET /v1/models)")
    return served


@router.get("/v1/models", response_model=ModelList)
async def list_models(request: Request) -> ModelList:
    state = _state(request)
    from glmcot.serve import graph_models   # graph QA models: "<method>/<graph>"

    return ModelList(data=[ModelCard(id=state.config.model_name, created=state.created),
                           *graph_models.cards(request, state.created)])


# Fields a client may send that change nothing here: metadata, or a parameter at the value
# that means "off". Any other field this server does not implement is refused by name.
IGNORED_FIELDS = frozenset({"store", "metadata", "service_tier"})
OFF_VALUES: dict[str, tuple[Any, ...]] = {
    "response_format": ({"type": "text"},), "tool_choice": ("none",), "function_call": ("none",),
    "best_of": (1,), "parallel_tool_calls": (True, False),
    "repetition_penalty": (1, 1.0)}   # 1.0 is off; `vllm bench serve` always sends it


def _refuse(name: str, why: str = "") -> errors.APIError:
    return errors.APIError(400, f"parameter {name!r} is not supported by this server{why}",
                           code="unsupported_parameter")


def _unsupported(body: Any) -> None:
    """400 naming the first parameter the server would otherwise silently ignore."""
    for name, value in (body.model_extra or {}).items():
        if name in IGNORED_FIELDS or value in (None, "", [], {}):
            continue
        if value in OFF_VALUES.get(name, ()):
            continue
        raise _refuse(name)
    if getattr(body, "echo", False):
        raise _refuse("echo")
    for name in ("presence_penalty", "frequency_penalty"):
        if getattr(body, name) not in (None, 0, 0.0):
            raise _refuse(name, " (only 0)")
    if _logprobs(body) is not None and body.stream:
        raise _refuse("logprobs", " together with stream; ask without stream")
    if getattr(body, "top_logprobs", None) is not None and not body.logprobs:
        raise errors.APIError(400, "top_logprobs needs logprobs: true", code="invalid_parameter")


def _logprobs(body: Any) -> int | None:
    """How many alternatives per token the body asks for; None when it wants no logprobs."""
    if isinstance(body, ChatCompletionRequest):
        return (body.top_logprobs or 0) if body.logprobs else None
    return body.logprobs


def _check_counts(request: Request, body: Any, num_prompts: int) -> None:
    """Bounds what one request may queue: prompts, choices per prompt, the session id."""
    config = _state(request).config
    if num_prompts > config.max_prompts:
        raise errors.APIError(400, f"{num_prompts} prompts in one request exceed the server's "
                              f"limit of {config.max_prompts} (--max-prompts)",
                              code="too_many_prompts")
    if body.n > config.max_n:
        raise errors.APIError(400, f"n={body.n} exceeds the server's limit of {config.max_n} "
                              "(--max-n)", code="n_too_large")
    stops = [body.stop] if isinstance(body.stop, str) else list(body.stop or [])
    if len(stops) > MAX_STOP:
        raise errors.APIError(400, f"{len(stops)} stop strings exceed the limit of {MAX_STOP}",
                              code="too_many_stop_strings")
    if body.session is not None and len(body.session) > config.max_session_chars:
        raise errors.APIError(400, f"session id of {len(body.session)} characters exceeds the "
                              f"server's limit of {config.max_session_chars} "
                              "(--max-session-chars)", code="session_too_long")


def _max_tokens(request: Request, value: int | None) -> int:
    limit = _state(request).config.max_tokens_limit
    if value is None:
        return limit
    if value > limit:
        raise errors.APIError(400, f"max_tokens {value} exceeds the server's limit of {limit} "
                              "(--max-tokens-limit)",
                              code="max_tokens_too_large")
    return value


def _check_prompt_size(request: Request, prompts: list[Any]) -> None:
    limit = _state(request).config.max_prompt_chars
    for prompt in prompts:
        if isinstance(prompt, str):
            size = len(prompt)
        elif prompt and isinstance(prompt[0], int):
            size = len(prompt)
        else:
            size = sum(len(segment.text) for segment in prompt)
        if size > limit:
            raise errors.APIError(413, f"prompt of {size} characters exceeds the server's limit "
                                  f"of {limit}", code="prompt_too_large")


@router.post("/v1/completions", response_model=CompletionResponse)
async def completions(body: CompletionRequest, request: Request):
    model = _check_model(request, body.model)
    bridge = _bridge(request)
    _unsupported(body)
    if body.segments is not None:
        prompts = [bridge.segments(body.segments)]
    elif body.prompt is None:
        raise errors.APIError(400, "give a prompt (or segments)", code="missing_prompt")
    elif isinstance(body.prompt, str):
        prompts = [body.prompt]
    elif body.prompt and isinstance(body.prompt[0], int):
        prompts = [list(body.prompt)]
    else:
        prompts = list(body.prompt)
    if not prompts:
        raise errors.APIError(400, "the prompt list is empty", code="missing_prompt")
    _check_counts(request, body, len(prompts))
    _check_prompt_size(request, prompts)
    max_tokens = _max_tokens(request, body.max_tokens)
    return await _serve(request, "/v1/completions", body, model, prompts, max_tokens, chat=False)


@router.post("/v1/chat/completions", response_model=ChatCompletionResponse)
async def chat_completions(body: ChatCompletionRequest, request: Request):
    from glmcot.serve import graph_models   # "<method>/<graph>": GLM or Graph-CoT over a graph

    graph_model = graph_models.parse_model(body.model)
    if graph_model is not None:
        return await graph_models.chat(body, request, *graph_model)
    model = _check_model(request, body.model)
    bridge = _bridge(request)
    _unsupported(body)
    _check_counts(request, body, 1)
    prompt = bridge.chat_prompt(body.messages, body.add_generation_prompt)
    _check_prompt_size(request, [prompt])
    max_tokens = _max_tokens(request, body.max_completion_tokens if body.max_completion_tokens
                             is not None else body.max_tokens)
    return await _serve(request, "/v1/chat/completions", body, model, [prompt], max_tokens,
                        chat=True)


async def _serve(request: Request, endpoint: str, body: Any, model: str, prompts: list[Any],
                 max_tokens: int, chat: bool):
    state = _state(request)
    bridge: EngineBridge = state.runtime.bridge
    ticket = await state.engine_admission.acquire(endpoint, cost=len(prompts) * body.n)
    generation = Generation(bridge, asyncio.get_running_loop(), body.session, body.priority)
    ticket.on_cancel.append(generation.abort)

    def submit_all() -> None:
        for prompt in prompts:
            for sample in range(body.n):
                generation.start(prompt, bridge.sampling(body, max_tokens,
                                                         _sample_seed(body.seed, sample),
                                                         _logprobs(body)))

    try:
        # tokenising happens in submit: off the event loop, so /health and others stay served
        await asyncio.to_thread(submit_all)
    except (ValueError, TypeError) as exc:   # the engine refused the prompt (empty, too long)
        generation.abort()
        ticket.release()
        raise errors.APIError(400, f"{exc}", code="invalid_prompt") from None
    except EngineClosedError as exc:   # the engine process ended
        generation.abort()
        ticket.release()
        raise errors.engine_gone(str(exc)) from None
    except GenerationAborted:   # cancelled by the shutdown drain while submitting
        ticket.release()
        raise errors.unavailable() from None
    except BaseException:
        generation.abort()   # also stops a submit_all still running (it checks the flag)
        ticket.release()
        raise
    rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
    # forced text is the scripted policy's, never the model's: say so in every response
    fingerprint = "glmcot-forced-text (scripted policy)" if body.forced_text is not None \
        else "glmcot"
    created = int(time.time())
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return StreamingResponse(
            _stream(state, endpoint, generation, ticket, rid, created, model, chat, include_usage,
                    body, fingerprint),
            media_type=sse.MEDIA_TYPE, headers=sse.HEADERS)
    try:
        outputs = await generation.wait(ticket.remaining())
    except (TimeoutError, asyncio.TimeoutError):
        generation.abort()
        raise errors.timeout(state.config.timeout_s) from None
    except asyncio.CancelledError:
        generation.abort()
        raise
    finally:
        ticket.release()
        _end_session(bridge, body)
    usage = _usage(outputs)
    _count_tokens(state, endpoint, usage)
    if chat:
        choices = [{"index": i, "message": {"role": "assistant", "content": out.text},
                    "logprobs": _chat_logprobs(bridge, out.logprobs),
                    "finish_reason": out.finish_reason}
                   for i, out in enumerate(outputs)]
        return {"id": rid, "object": "chat.completion", "created": created, "model": model,
                "system_fingerprint": fingerprint, "choices": choices, "usage": usage}
    choices = [{"index": i, "text": out.text,
                "logprobs": _completion_logprobs(bridge, out.logprobs, body.logprobs or 0),
                "finish_reason": out.finish_reason} for i, out in enumerate(outputs)]
    return {"id": rid, "object": "text_completion", "created": created, "model": model,
            "system_fingerprint": fingerprint, "choices": choices, "usage": usage}


def _completion_logprobs(bridge: EngineBridge, entries: list[Any] | None, top: int
                         ) -> dict[str, Any] | None:
    """The legacy completions shape: parallel lists, top alternatives as {token: logprob}."""
    if entries is None:
        return None
    tokens = [bridge.token_text(e.token_id) for e in entries]
    offsets, at = [], 0
    for token in tokens:
        offsets.append(at)
        at += len(token)
    tops = None
    if top > 0:
        tops = [{bridge.token_text(t): lp for t, lp in e.top} for e in entries]
    return {"tokens": tokens, "token_logprobs": [e.logprob for e in entries],
            "top_logprobs": tops, "text_offset": offsets}


def _chat_logprobs(bridge: EngineBridge, entries: list[Any] | None) -> dict[str, Any] | None:
    if entries is None:
        return None

    def item(token_id: int, logprob: float) -> dict[str, Any]:
        text = bridge.token_text(token_id)
        return {"token": text, "logprob": logprob, "bytes": list(text.encode("utf-8"))}

    content = [{**item(e.token_id, e.logprob), "top_logprobs": [item(t, lp) for t, lp in e.top]}
               for e in entries]
    return {"content": content, "refusal": None}


def _sample_seed(seed: int | None, sample: int) -> int | None:
    """Choice `sample`'s seed: seed + sample, wrapped to stay a signed 64-bit integer."""
    if seed is None:
        return None
    return (seed + sample + 2**63) % 2**64 - 2**63


def _usage(outputs: list[Any]) -> dict[str, Any]:
    prompt = sum(out.prompt_tokens for out in outputs)
    completion = sum(out.completion_tokens for out in outputs)
    cached = sum(out.cached_tokens for out in outputs)
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached}}


def _count_tokens(state: Any, endpoint: str, usage: dict[str, Any]) -> None:
    state.metrics.tokens.inc(usage["prompt_tokens"], endpoint=endpoint, kind="prompt")
    state.metrics.tokens.inc(usage["prompt_tokens_details"]["cached_tokens"], endpoint=endpoint,
                             kind="cached")
    state.metrics.tokens.inc(usage["completion_tokens"], endpoint=endpoint, kind="output")


async def _stream(state: Any, endpoint: str, generation: Generation, ticket: Any, rid: str,
                  created: int, model: str, chat: bool, include_usage: bool, body: Any,
                  fingerprint: str) -> AsyncIterator[str]:
    obj = "chat.completion.chunk" if chat else "text_completion"

    def chunk(index: int, text: str | None, finish: str | None, role: bool = False) -> str:
        if chat:
            delta: dict[str, Any] = {}
            if role:
                delta["role"] = "assistant"
            if text is not None:
                delta["content"] = text
            choice = {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}
        else:
            choice = {"index": index, "text": text or "", "logprobs": None,
                      "finish_reason": finish}
        body = {"id": rid, "object": obj, "created": created, "model": model,
                "system_fingerprint": fingerprint, "choices": [choice]}
        if include_usage:
            body["usage"] = None
        return sse.event(body)

    first = True
    try:
        if chat:
            for index in range(generation.size):
                yield chunk(index, "", None, role=True)
        async for index, text, output in generation.events(ticket.remaining()):
            if first and text:
                state.metrics.ttft.observe(time.monotonic() - ticket.arrived, endpoint=endpoint)
                first = False
            if output is None:
                yield chunk(index, text, None)
            else:
                if text:
                    yield chunk(index, text, None)
                yield chunk(index, None if chat else "", output.finish_reason)
        usage = _usage(generation.outputs())
        _count_tokens(state, endpoint, usage)
        if include_usage:
            yield sse.event({"id": rid, "object": obj, "created": created, "model": model,
                             "choices": [], "usage": usage})
        yield sse.DONE
    except (TimeoutError, asyncio.TimeoutError):
        generation.abort()
        yield sse.event(errors.timeout(state.config.timeout_s).body())
        yield sse.DONE
    except errors.APIError as exc:
        generation.abort()
        yield sse.event(exc.body())
        yield sse.DONE
    finally:
        # Runs on normal end, on error and when the client disconnects (task cancelled).
        generation.abort()
        ticket.release()
        _end_session(generation.bridge, body)


def _end_session(bridge: EngineBridge, body: Any) -> None:
    if body.end_session and body.session:
        bridge.end_session(body.session)
