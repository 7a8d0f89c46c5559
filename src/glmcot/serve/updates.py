"""`POST /v1/graphs/{name}/update`: apply graph changes while the server answers questions.

The update commits a new version of the store (graph/updates/versions.py), then the server opens a new
agent context on it (graph, RetrieveNode service, sandbox pool) and swaps it in. Questions
already running keep the context they started with, so they finish on their starting version;
the old context closes once the last of them is done. RetrieveNode cache entries the update
cannot change carry over to the new context. The endpoint needs the server's API key: a server
started without one refuses updates.
"""

from __future__ import annotations

import dataclasses

import asyncio
import threading
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from glmcot.serve import errors

router = APIRouter(tags=["Graphs"])
_locks: dict[str, threading.Lock] = {}


class UpdateRequest(BaseModel):
    operations: list[dict[str, Any]] = Field(..., description="Operations as in docs/graph-formats.md (upsert_node, delete_node, upsert_edge, delete_edge).")


class UpdateResponse(BaseModel):
    graph: str
    version: int
    upserted_nodes: int
    deleted_nodes: int
    upserted_edges: int
    deleted_edges: int
    embedded: int
    cache_entries_kept: int
    seconds: float
    compacted: bool = False  # the delta passed the auto-compaction size (docs/graph-formats.md)


def _close_when_idle(runtime: Any, context: Any, timeout_s: float) -> None:
    """Close an old context once the questions that were running at the swap are done."""
    import concurrent.futures
    import time

    def wait_and_close() -> None:
        deadline = time.monotonic() + timeout_s
        # Twice: a question whose agent was made just before the swap registers a moment later.
        for _ in range(2):
            running = list(runtime._cancel_flags)
            concurrent.futures.wait(running, timeout=max(deadline - time.monotonic(), 0.0))
            time.sleep(0.2)
        try:
            context.close()
        except Exception:
            pass

    threading.Thread(target=wait_and_close, name="glmcot-retire-context", daemon=True).start()


def _apply(runtime: Any, name: str, operations: list[dict]) -> dict:
    from glmcot.graph.updates.delta import parse_operation
    from glmcot.graph.errors import GraphFormatError
    from glmcot.graph.index.index_updates import surviving
    from glmcot.graph.updates.versions import apply_update

    lock = _locks.setdefault(name, threading.Lock())
    with lock:
        handle = runtime.graphs[name]  # read under the lock: the previous update may just have swapped it
        if getattr(handle.context, "is_live", False):
            raise errors.APIError(400, f"graph {name!r} is a graph database ({handle.context.location}); updates "
                                  "through glmcot write to stores only so far: change the database itself",
                                  code="bad_update")
        try:
            parsed = [parse_operation(raw, f"operation {number}") for number, raw in enumerate(operations, 1)]
            result = apply_update(handle.context.graph_dir, parsed)
        except GraphFormatError as error:
            raise errors.APIError(400, str(error), code="bad_update") from None
        old = handle.context
        config = runtime.config
        new = runtime.system.open_context(old.graph_dir, domain=old.domain)
        old_service, new_service = old.retrieval, new.retrieval
        with old_service._lock:
            kept = surviving(old_service._cache, result.report)
        with new_service._lock:
            new_service._cache.update(kept)
            # One set of counters per graph across versions: /metrics counters never go back,
            # and the questions still on the old version keep counting.
            if isinstance(getattr(old_service, "stats", None), dict):
                new_service.stats = old_service.stats
        backend = handle.backend
        if config.scripted is not None and name in runtime.graph_backends:
            # the scripted policy runs its plans in this version's sandbox
            backend = runtime.graph_backends[name] = runtime.system.graph_backend(new)
        # One assignment: a question starting now gets the old handle or the new one, whole (its
        # context and its backend from the same version), never a mix.
        runtime.graphs[name] = dataclasses.replace(handle, context=new, graph=new.graph, retriever=new.retrieval,
                                                   backend=backend)
        _close_when_idle(runtime, old, timeout_s=max(config.timeout_s, 60.0))
    report = result.report
    return UpdateResponse(graph=name, version=result.version, upserted_nodes=report.upserted_nodes,
                          deleted_nodes=report.deleted_nodes, upserted_edges=report.upserted_edges,
                          deleted_edges=report.deleted_edges, embedded=result.embedded,
                          cache_entries_kept=len(kept), seconds=result.seconds, compacted=result.compacted).model_dump()


@router.post("/v1/graphs/{name}/update", response_model=UpdateResponse)
async def update_graph(name: str, body: UpdateRequest, request: Request) -> Any:
    """Apply upserts and deletes as one new version of a graph (all or nothing); needs the API key."""
    from glmcot.serve.graph_desk import desk_of

    if not request.app.state.access.enforced:
        raise errors.APIError(403, "graph updates need an API key: start the server with --api-key",
                              "permission_error", "updates_need_api_key")
    desk = desk_of(request)
    runtime = desk.runtime
    if name not in desk.visible():   # 404 alike for a graph that does not exist and one the key does not see
        raise errors.not_found(f"no graph {name!r}; graphs: {', '.join(desk.visible())}")
    if not desk.grant.update:
        raise errors.APIError(403, f"key {desk.grant.name!r} may not update graphs (no update right)",
                              "permission_error", "update_not_allowed")
    if not body.operations:
        raise errors.APIError(400, "no operations", code="bad_update")
    return await asyncio.to_thread(_apply, runtime, name, body.operations)
