"""What the graph endpoints, the graph models (chat completions) and the MCP tools share: which
graphs a key sees, a graph's handle (404 alike for unknown and not granted), a graph's
primitives, and one question answered under the server's limits (admission, time, cancellation).

A `Desk` is the server's view for one caller: its grant, the runtime and the admission lanes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from glmcot.serve import errors
from glmcot.serve.config import ServeConfig
from glmcot.serve.keys import Access, Grant, grant_of
from glmcot.serve.limits import Admission
from glmcot.serve.runtime import GraphHandle, Runtime
from glmcot.system.graph_calls import GraphCalls

METHODS = ("glm", "graphcot")     # the methods served (graphcot-repaired is a research variant)
GRAPH_CALL_CONCURRENCY = 4        # primitive and chunk lookups running at once; more wait in line


@dataclass
class Desk:
    config: ServeConfig
    runtime: Runtime
    grant: Grant
    admission: Admission           # questions: the server's --max-concurrency lane
    lookups: Admission             # primitive calls and chunk lookups: their own small lane
    metrics: Any = None

    # --- which graphs ---------------------------------------------------------------------------

    def visible(self) -> list[str]:
        return [name for name in self.runtime.graph_names() if self.grant.sees(name)]

    def handle(self, name: str | None) -> GraphHandle:
        """The graph's handle; 404 for a graph that does not exist and for one this key does
        not see, with the same message (the list names only the graphs the key sees)."""
        names = self.visible()
        if name is None:
            if len(names) != 1:
                raise errors.APIError(400, f"name a graph; this key sees {names}", code="missing_graph")
            name = names[0]
        if not isinstance(name, str) or name not in names:
            raise errors.not_found(f"unknown graph {str(name)[:100]!r}; graphs: {names}")
        handle = self.runtime.graphs.get(name)
        if handle is None:   # removed a moment ago
            raise errors.not_found(f"unknown graph {name!r}; graphs: {self.visible()}")
        return handle

    def calls(self, name: str | None) -> tuple[GraphHandle, GraphCalls]:
        handle = self.handle(name)
        if handle.context is None:
            raise errors.APIError(503, f"graph {handle.name!r} has no open context", "service_unavailable",
                                  "graph_unavailable")
        return handle, GraphCalls(handle.context)

    def infos(self) -> list[dict[str, Any]]:
        return [info for info in self.runtime.graph_infos() if self.grant.sees(info["name"])]

    # --- bounded work ---------------------------------------------------------------------------

    async def lookup(self, work: Callable[[], Any], endpoint: str) -> Any:
        """Runs a graph lookup on a thread, in the lookups lane, within the server's timeout."""
        ticket = await self.lookups.acquire(endpoint)
        try:
            return await asyncio.wait_for(asyncio.to_thread(work), timeout=max(ticket.remaining(), 0.001))
        except (TimeoutError, asyncio.TimeoutError):
            raise errors.timeout(self.config.timeout_s) from None
        finally:
            ticket.release()

    async def begin(self, graph: str | None, method: str, question: str, *,
                    on_event: Callable[[Any], None] | None = None, options: Any = None,
                    endpoint: str = "graph-question") -> "Question":
        """Checks the question and starts it in the questions lane (429 when full); its slot is
        given back when its agent's thread ends, not when the caller stops waiting."""
        if method not in METHODS:
            raise errors.APIError(400, f"unknown method {str(method)[:50]!r}; methods: {', '.join(METHODS)}",
                                  code="unknown_method")
        if not isinstance(question, str) or not question.strip():
            raise errors.APIError(400, "the question is empty", code="empty_question")
        limit = self.config.max_question_chars
        if len(question) > limit:
            raise errors.APIError(413, f"question of {len(question)} characters exceeds the server's limit of {limit}",
                                  code="question_too_large")
        handle = self.handle(graph)
        runtime = self.runtime
        qid = runtime.resolve_qid(question, None)
        ticket = await self.admission.acquire(endpoint)
        loop = asyncio.get_running_loop()
        try:
            future, _ = runtime.start_question(handle.name, method, question, qid, options, on_event)
        except BaseException:
            ticket.release()
            raise
        future.add_done_callback(lambda _: loop.call_soon_threadsafe(ticket.release))
        ticket.on_cancel.append(lambda: runtime.cancel(future))
        return Question(handle=handle, method=method, future=future, ticket=ticket)

    async def finish(self, question: "Question") -> Any:
        """The question's result, within the server's timeout (504 past it). If the caller is
        cancelled (client gone, MCP cancellation) the agent stops at its next step."""
        runtime = self.runtime
        future = question.future
        try:
            result = await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)),
                                            timeout=max(question.ticket.remaining(), 0.001))
        except (TimeoutError, asyncio.TimeoutError):
            runtime.cancel(future)
            raise errors.timeout(self.config.timeout_s) from None
        except asyncio.CancelledError:
            runtime.cancel(future)
            raise
        except concurrent.futures.CancelledError:
            raise errors.unavailable() from None
        except errors.APIError:
            raise
        except Exception as exc:   # an agent that raised: reported, never a traceback
            raise errors.APIError(500, f"the agent failed: {type(exc).__name__}: {exc}", "server_error",
                                  "agent_error") from None
        if self.metrics is not None:
            _record(self, question.handle.name, question.method, result)
        return result

    def cancel(self, question: "Question") -> None:
        if not question.future.done():
            self.runtime.cancel(question.future)

    async def answer(self, graph: str | None, method: str, question: str, *,
                     on_event: Callable[[Any], None] | None = None, options: Any = None,
                     endpoint: str = "graph-question") -> tuple[GraphHandle, Any]:
        """One question, start to end: (the graph's handle, the agent's QuestionResult)."""
        started = await self.begin(graph, method, question, on_event=on_event, options=options, endpoint=endpoint)
        try:
            return started.handle, await self.finish(started)
        finally:
            self.cancel(started)


@dataclass
class Question:
    handle: GraphHandle
    method: str
    future: concurrent.futures.Future
    ticket: Any


def _record(desk: Desk, graph: str, method: str, result: Any) -> None:
    metrics = desk.metrics
    metrics.questions.inc(graph=graph, method=method, policy=desk.config.policy,
                          outcome=result.failure or "answered")
    metrics.llm_calls.inc(result.llm_calls, graph=graph, method=method)


def lookups_lane(config: ServeConfig) -> Admission:
    return Admission(GRAPH_CALL_CONCURRENCY, config.max_queue, config.timeout_s)


def desk_of(request: Any) -> Desk:
    """The desk for an HTTP request to the serve app."""
    access: Access = request.app.state.access
    return desk_for_app(request.app, grant_of(request.scope, access))


def desk_for_app(app: Any, grant: Grant) -> Desk:
    """The desk of the serve app `app` for a caller holding `grant`."""
    state = app.state.serve
    if state.runtime is None:
        raise errors.unavailable("server is starting")
    if not hasattr(app.state, "lookups"):
        app.state.lookups = lookups_lane(state.config)
    return Desk(config=state.config, runtime=state.runtime, grant=grant, admission=state.admission,
                lookups=app.state.lookups, metrics=state.metrics)
