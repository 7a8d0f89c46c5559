"""The graph itself over HTTP, the building blocks of retrievers and outside agents:

- `POST /v1/graphs/{name}/call`: one primitive (`{"primitive", "arguments"}`) or a batch
  (`{"calls": [...]}`, at most --max-graph-calls), each answered with a value or its error;
- `GET /v1/graphs/{name}/nodes/{node_id}`: a node's vertex chunk;
- `POST /v1/graphs/{name}/search`: the k best-matching nodes' chunks with scores;
- `GET /v1/graphs/{name}/schema`: node types, features, relations and counts;
- `POST /v1/admin/graphs`, `DELETE /v1/admin/graphs/{name}`: add or remove a graph while
  serving (a key with the admin right).

A key that does not grant a graph gets 404 for it, as for a graph that does not exist.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from glmcot.graph.errors import GraphToolError
from glmcot.serve import errors, graph_admin
from glmcot.serve.graph_desk import desk_of
from glmcot.system.graph_calls import MAX_SEARCH_RESULTS, CallError, PrimitiveCall

router = APIRouter(tags=["Graphs"])


class CallItem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    primitive: str = Field(..., max_length=40, description="RetrieveNode, NodeInfo, NodeFeature, "
                           "NeighbourCheck or NodeDegree.")
    arguments: dict[str, Any] = Field(default_factory=dict, description="By name: text; node_id; "
                                      "node_id, feature; node_id, relation.")


class CallRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    primitive: str | None = Field(None, max_length=40)
    arguments: dict[str, Any] | None = None
    calls: list[CallItem] | None = None


class CallResult(BaseModel):
    primitive: str
    ok: bool
    value: Any = None
    error: str | None = None
    total: int | None = None


class CallResponse(BaseModel):
    graph: str
    results: list[CallResult]


class Chunk(BaseModel):
    node_id: str
    node_type: str
    text: str
    score: float | None = None


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(..., min_length=1)
    k: int = Field(4, ge=1, le=MAX_SEARCH_RESULTS)


class SearchResponse(BaseModel):
    graph: str
    documents: list[Chunk]


class NodeType(BaseModel):
    name: str
    count: int
    text_feature: str | None
    features: list[str]
    relations: list[str]


class SchemaResponse(BaseModel):
    graph: str
    num_nodes: int | None
    num_edges: int | None
    node_types: list[NodeType]


class AddGraph(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(..., min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_-]+$")
    path: str = Field(..., min_length=1, max_length=4096, description="A graph store folder on the "
                      "server's machine (or a dataset folder holding graph/).")


def _calls(body: CallRequest, limit: int) -> list[PrimitiveCall]:
    if body.calls is not None:
        if body.primitive is not None or body.arguments is not None:
            raise errors.APIError(400, "give either primitive and arguments, or calls", code="invalid_call")
        if not body.calls:
            raise errors.APIError(400, "calls is empty", code="invalid_call")
        if len(body.calls) > limit:
            raise errors.APIError(400, f"{len(body.calls)} calls in one request; at most {limit} "
                                  "(--max-graph-calls)", code="too_many_calls")
        items = [(item.primitive, item.arguments) for item in body.calls]
    elif body.primitive is not None:
        items = [(body.primitive, body.arguments or {})]
    else:
        raise errors.APIError(400, "give a primitive (with its arguments) or calls", code="invalid_call")
    calls = [PrimitiveCall(primitive, dict(arguments)) for primitive, arguments in items]
    for position, call in enumerate(calls):
        try:
            call.check()
        except CallError as error:
            where = f"calls[{position}]: " if body.calls is not None else ""
            raise errors.APIError(400, where + str(error), code="invalid_call") from None
    return calls


@router.post("/v1/graphs/{name}/call", response_model=CallResponse, responses={
    400: {"description": "Malformed call"}, 404: {"description": "Unknown graph"},
    429: {"description": "Busy or over the key's rate"}, 504: {"description": "Timed out"}})
async def call_primitives(name: str, body: CallRequest, request: Request) -> Any:
    """Runs one primitive, or a batch in order; a primitive's own error (an unknown node,
    relation or feature) is that call's `error`, with the choices an agent needs to retry."""
    desk = desk_of(request)
    handle, graph_calls = desk.calls(name)
    calls = _calls(body, desk.config.max_graph_calls)
    outcomes = await desk.lookup(lambda: [graph_calls.call(call) for call in calls], "/v1/graphs/call")
    return CallResponse(graph=handle.name, results=[CallResult(**asdict(outcome)) for outcome in outcomes])


@router.get("/v1/graphs/{name}/nodes/{node_id:path}", response_model=Chunk)
async def node_chunk(name: str, node_id: str, request: Request) -> Any:
    """A node's vertex chunk: its type, features and top neighbours per relation, as the agents read it."""
    desk = desk_of(request)
    _, graph_calls = desk.calls(name)

    def work():
        try:
            return graph_calls.chunk(node_id)
        except GraphToolError as error:
            raise errors.not_found(str(error)) from None
        except CallError as error:
            raise errors.APIError(400, str(error), code="invalid_node_id") from None

    return Chunk(**asdict(await desk.lookup(work, "/v1/graphs/nodes")))


@router.post("/v1/graphs/{name}/search", response_model=SearchResponse)
async def search_nodes(name: str, body: SearchRequest, request: Request) -> Any:
    """The `k` nodes whose text best matches `query` (embedding scores when the graph has an
    index; else RetrieveNode's one lexical match, score 1), with their vertex chunks."""
    desk = desk_of(request)
    handle, graph_calls = desk.calls(name)

    def work():
        try:
            return graph_calls.search(body.query, body.k)
        except CallError as error:
            raise errors.APIError(400, str(error), code="invalid_search") from None

    chunks = await desk.lookup(work, "/v1/graphs/search")
    return SearchResponse(graph=handle.name, documents=[Chunk(**asdict(chunk)) for chunk in chunks])


@router.get("/v1/graphs/{name}/schema", response_model=SchemaResponse)
async def graph_schema(name: str, request: Request) -> Any:
    desk = desk_of(request)
    handle, graph_calls = desk.calls(name)
    return SchemaResponse(graph=handle.name, num_nodes=getattr(handle.graph, "num_nodes", None),
                          num_edges=getattr(handle.graph, "num_edges", None),
                          node_types=[NodeType(**asdict(item)) for item in graph_calls.schema()])


def _admin(request: Request) -> Any:
    desk = desk_of(request)
    if not desk.grant.admin:
        raise errors.APIError(403, "adding and removing graphs needs a key with the admin right"
                              + ("" if request.app.state.access.enforced else
                                 " (start the server with --api-key or --keys-file)"),
                              "permission_error", "admin_needed")
    return desk


@router.post("/v1/admin/graphs", status_code=201, tags=["Admin"])
async def add_graph(body: AddGraph, request: Request) -> Any:
    """Opens a graph store and serves it under `name` (admin key)."""
    desk = _admin(request)
    if body.name in desk.runtime.graphs:
        raise errors.APIError(409, f"graph {body.name!r} is already served; remove it first", code="graph_exists")
    try:
        info = await asyncio.to_thread(graph_admin.add_graph, desk.runtime, body.name, Path(body.path))
    except graph_admin.GraphAdminError as error:
        raise errors.APIError(error.status, str(error), code="bad_graph") from None
    return info


@router.delete("/v1/admin/graphs/{name}", tags=["Admin"])
async def remove_graph(name: str, request: Request) -> Any:
    """Stops serving a graph; questions already running on it finish first (admin key)."""
    desk = _admin(request)
    desk.handle(name)
    await asyncio.to_thread(graph_admin.remove_graph, desk.runtime, name)
    return {"removed": name, "graphs": desk.visible()}
