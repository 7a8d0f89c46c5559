"""`create_app(ServeConfig)`: the FastAPI application. All state lives on ``app.state.serve``."""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import glmcot
from glmcot.serve import ask, errors, graph_serving, openai_api, ui, updates
from glmcot.serve.config import ServeConfig
from glmcot.serve.limits import Admission
from glmcot.serve.metrics import CONTENT_TYPE, ServerMetrics
from glmcot.serve.runtime import Runtime
from glmcot.serve.startup import build_runtime
from glmcot.serve.schemas import Health
from glmcot.serve.security import BodyLimitMiddleware

log = logging.getLogger("glmcot.serve")

ENDPOINTS = frozenset({"/v1/ask", "/v1/graphs", "/v1/completions", "/v1/chat/completions",
                       "/v1/models", "/metrics", "/health"})


@dataclass
class ServeState:
    config: ServeConfig
    admission: Admission          # /v1/ask questions (agent threads): --max-concurrency
    engine_admission: Admission   # OpenAI endpoints' engine requests: --max-engine-requests
    metrics: ServerMetrics
    runtime: Runtime | None = None
    status: str = "starting"
    created: int = field(default_factory=lambda: int(time.time()))


class MetricsMiddleware:
    """Counts every request by endpoint and status, and times it to its last byte."""

    def __init__(self, app: ASGIApp, metrics: ServerMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.monotonic()
        endpoint = scope["path"] if scope["path"] in ENDPOINTS else "other"
        status = 500

        async def counting_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        except asyncio.CancelledError:
            status = 499   # the client went away
            raise
        finally:
            self.metrics.requests.inc(endpoint=endpoint, status=str(status))
            self.metrics.latency.observe(time.monotonic() - start, endpoint=endpoint)


def _validation_message(exc: RequestValidationError) -> tuple[int, str, str]:
    problems = exc.errors()
    if any(p.get("type") == "json_invalid" for p in problems):
        return 400, "malformed JSON body", "malformed_json"
    parts = []
    for problem in problems[:5]:
        where = ".".join(str(x) for x in problem.get("loc", ()) if x != "body") or "body"
        parts.append(f"{where}: {problem.get('msg', 'invalid')}")
    more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
    # 400, as OpenAI and vLLM answer (clients retry nothing on it)
    return 400, "invalid request: " + "; ".join(parts) + more, "invalid_request"


def create_app(config: ServeConfig, runtime: Runtime | None = None) -> FastAPI:
    """The server for `config`. Pass `runtime` to share an already built one (tests,
    benchmarks); the app then leaves closing it to the caller."""
    metrics = ServerMetrics(config.policy, config.model_name)
    state = ServeState(config=config, metrics=metrics,
                       admission=Admission(config.max_concurrency, config.max_queue,
                                           config.timeout_s),
                       engine_admission=Admission(config.max_engine_requests, config.max_queue,
                                                  config.timeout_s))

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        owned = runtime is None
        state.runtime = runtime if runtime is not None else await asyncio.to_thread(
            build_runtime, config)
        metrics.collectors[:] = state.runtime.collectors()
        state.status = "ok"
        try:
            async with serving.running(state):
                yield
        finally:
            state.status = "shutting_down"
            drained = await asyncio.gather(state.admission.drain(config.shutdown_grace_s),
                                           state.engine_admission.drain(config.shutdown_grace_s))
            cancelled = sum(drained)
            if cancelled:
                log.warning("shutdown: cancelled %d in-flight requests", cancelled)
            if owned:
                await asyncio.to_thread(state.runtime.close)

    app = FastAPI(
        title="glmcot",
        version=glmcot.__version__ if hasattr(glmcot, "__version__") else "0.1.0",
        description=("Graph chain-of-thought question answering (GLM and Graph-CoT agents) "
                     "and an OpenAI-compatible API over the native engine. Send the API key as "
                     "`Authorization: Bearer <key>` when the server has one. Answers produced "
                     "under the **scripted policy** measure the system, never model accuracy."),
        lifespan=lifespan,
    )
    app.state.serve = state

    @app.exception_handler(errors.APIError)
    async def api_error(request: Request, exc: errors.APIError):
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError):
        status, message, code = _validation_message(exc)
        return errors.error_response(status, message, "invalid_request_error", code)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        message = exc.detail if isinstance(exc.detail, str) else "request failed"
        if exc.status_code == 404:
            message = f"no endpoint at {request.url.path}"
        return errors.error_response(exc.status_code, message, "invalid_request_error",
                                     headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception):
        log.exception("unhandled error on %s", request.url.path)   # traceback stays in the log
        return errors.error_response(500, f"internal error ({type(exc).__name__})",
                                     "server_error")

    @app.get("/health", response_model=Health, tags=["Server"])
    async def health() -> Any:
        """Liveness; needs no API key. 503 while starting or shutting down, and once the native
        engine has stopped serving (its process ended): `detail` says how."""
        status, detail = state.status, None
        engine = state.runtime.engine if state.runtime else None
        failure = getattr(engine, "failure", None) if engine is not None else None
        if status == "ok" and failure:
            status, detail = "engine_failed", failure
        # with a keys file the graphs a server holds are for the keys that see them
        hidden = bool(config.keys_file)
        sources = await asyncio.to_thread(state.runtime.graph_sources) \
            if state.runtime and status == "ok" and not hidden else {}
        body = Health(status=status, policy=config.policy,
                      graphs=state.runtime.graph_names() if state.runtime and not hidden else [],
                      model=config.model_name, detail=detail, graph_sources=sources)
        if status != "ok":
            return JSONResponse(body.model_dump(), status_code=503)
        return body

    @app.get("/metrics", response_class=PlainTextResponse, tags=["Server"])
    async def prometheus() -> PlainTextResponse:
        """Prometheus text format: requests, latencies, tokens, engine and cache figures."""
        text = await asyncio.to_thread(metrics.render, state.admission, state.engine_admission)
        return PlainTextResponse(text, media_type=CONTENT_TYPE)

    app.include_router(ask.router)
    app.include_router(openai_api.router)
    app.include_router(updates.router)
    app.include_router(ui.router)
    serving = graph_serving.install(app, config)   # graph endpoints, per-graph keys, store watcher

    # Outermost first: count everything, then authenticate, then bound the body.
    app.add_middleware(BodyLimitMiddleware, max_bytes=config.max_body_bytes)
    serving.add_middleware()   # JSON bodies without a JSON Content-Type; the keys (401, per-key 429)
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    return app
