"""The one way the server's graph endpoints, the MCP tools and the framework retrievers reach a
graph: the five primitives, a node's vertex chunk, a scored node search and the schema, over a
graph's AgentContext (its graph and RetrieveNode service).

Kept in one module so the graph-source seam (issue 31) can replace what is under it in one place.
Everything returned is plain data (dataclasses of str, int, float and lists); a primitive's own
error (an unknown node, relation or feature) is an outcome, not an exception, because the caller
(an outside agent) reads it to correct its next call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from glmcot.graph.tools.chunks import render_source_chunk
from glmcot.graph.errors import GraphToolError
from glmcot.graph.tools.primitives import PRIMITIVES, GraphTools, NeighbourList

# each primitive's arguments, in the order the agents' code passes them
PRIMITIVE_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "RetrieveNode": ("text",),
    "NodeInfo": ("node_id",),
    "NodeFeature": ("node_id", "feature"),
    "NeighbourCheck": ("node_id", "relation"),
    "NodeDegree": ("node_id", "relation"),
}
assert set(PRIMITIVE_ARGUMENTS) == set(PRIMITIVES)
MAX_ARGUMENT_CHARS = 2000    # a node id, relation, feature or RetrieveNode text longer than this is refused
MAX_SEARCH_RESULTS = 50


class CallError(ValueError):
    """A call that is malformed before it reaches the graph (unknown primitive, missing or extra
    arguments, a value too long); the message says what is wrong."""


@dataclass(frozen=True)
class PrimitiveCall:
    primitive: str
    arguments: dict[str, Any]

    def check(self) -> None:
        expected = PRIMITIVE_ARGUMENTS.get(self.primitive)
        if expected is None:
            raise CallError(f"unknown primitive {self.primitive!r}; primitives: {', '.join(PRIMITIVES)}")
        missing = [name for name in expected if name not in self.arguments]
        extra = sorted(set(self.arguments) - set(expected))
        if missing or extra:
            raise CallError(f"{self.primitive} takes ({', '.join(expected)})"
                            + (f"; missing {', '.join(missing)}" if missing else "")
                            + (f"; unknown {', '.join(extra)}" if extra else ""))
        for name in expected:
            value = self.arguments[name]
            if not isinstance(value, (str, int)) or isinstance(value, bool):
                raise CallError(f"{self.primitive}: {name} must be a string, got {type(value).__name__}")
            if len(str(value)) > MAX_ARGUMENT_CHARS:
                raise CallError(f"{self.primitive}: {name} is {len(str(value))} characters; at most "
                                f"{MAX_ARGUMENT_CHARS}")


@dataclass
class CallOutcome:
    """One primitive's result: `value` (a string, a number or a list of node ids) or `error`."""

    primitive: str
    ok: bool
    value: Any = None
    error: str | None = None
    total: int | None = None   # NeighbourCheck: neighbours in all (the list may be cut to a bound)


@dataclass
class VertexChunk:
    """A node's vertex chunk: the text the agents read for it (type, features, top neighbours)."""

    node_id: str
    node_type: str
    text: str
    score: float | None = None   # from a search: the retriever's similarity


@dataclass
class NodeTypeSchema:
    name: str
    count: int
    text_feature: str | None
    features: list[str] = field(default_factory=list)
    relations: list[str] = field(default_factory=list)


class GraphCalls:
    """The primitives and lookups over one graph context (glmcot.agents.context.AgentContext)."""

    def __init__(self, context: Any) -> None:
        self.context = context
        self.source = context.source   # the GraphSource (a store or a graph database)
        self.tools = GraphTools(self.source, retriever=_ServiceRetriever(context.retrieval))

    def call(self, call: PrimitiveCall) -> CallOutcome:
        call.check()
        function = getattr(self.tools, call.primitive)
        arguments = [call.arguments[name] for name in PRIMITIVE_ARGUMENTS[call.primitive]]
        try:
            value = function(*arguments)
        except (GraphToolError, LookupError, KeyError, ValueError) as error:
            return CallOutcome(call.primitive, ok=False, error=_message(error))
        if isinstance(value, NeighbourList):
            return CallOutcome(call.primitive, ok=True, value=[str(item) for item in value], total=value.total)
        if hasattr(value, "item"):   # numpy scalars
            value = value.item()
        if not isinstance(value, (str, int, float, bool, list)) and value is not None:
            value = str(value)
        return CallOutcome(call.primitive, ok=True, value=value)

    def chunk(self, node_id: str, score: float | None = None) -> VertexChunk:
        """The node's vertex chunk; GraphToolError (NodeNotFound) for an unknown id."""
        if not isinstance(node_id, str) or len(node_id) > MAX_ARGUMENT_CHARS:
            raise CallError(f"a node id is a string of at most {MAX_ARGUMENT_CHARS} characters")
        ref = self.source.resolve(node_id)
        if ref is None:
            raise GraphToolError(f"no such node: {node_id!r}")
        return VertexChunk(node_id=node_id, node_type=self.source.node_type(ref),
                           text=render_source_chunk(self.source, ref, self.tools.chunk_config), score=score)

    def search(self, text: str, k: int = 4) -> list[VertexChunk]:
        """The `k` nodes whose text best matches `text`, best first, with scores: the embedding
        index's cosine scores when the graph has one; else RetrieveNode's single match (score 1), or
        none when nothing matches."""
        if not isinstance(text, str) or not text.strip():
            raise CallError("the search text must be a non-empty string")
        if len(text) > MAX_ARGUMENT_CHARS:
            raise CallError(f"the search text is {len(text)} characters; at most {MAX_ARGUMENT_CHARS}")
        if not 1 <= k <= MAX_SEARCH_RESULTS:
            raise CallError(f"k must be between 1 and {MAX_SEARCH_RESULTS}")
        retriever = self.context.retrieval.retriever
        if hasattr(retriever, "search"):
            hits = retriever.search(text, k=k)
        else:
            outcome = self.call(PrimitiveCall("RetrieveNode", {"text": text}))
            hits = [(outcome.value, 1.0)] if outcome.ok else []   # no node matches: no documents
        return [self.chunk(node_id, score=float(score)) for node_id, score in hits if self.source.resolve(node_id) is not None]

    def schema(self) -> list[NodeTypeSchema]:
        return [NodeTypeSchema(name=entry.name, count=int(entry.count), text_feature=entry.text_key,
                               features=list(entry.features), relations=list(entry.relations))
                for entry in self.source.schema().types]

    def chunks_used(self, trace: list[Any], limit: int = 20) -> list[VertexChunk]:
        """The vertex chunks of the nodes a question's snippets looked at (touched_node_ids)."""
        chunks = []
        for node_id in touched_node_ids(trace, limit):
            try:
                chunks.append(self.chunk(node_id))
            except (GraphToolError, CallError):
                continue   # a node the question saw on a version since replaced
        return chunks


def touched_node_ids(trace: list[Any], limit: int = 20) -> list[str]:
    """The nodes a question's snippets looked at (the sandbox's touched ids), first seen first,
    at most `limit`."""
    seen: dict[str, None] = {}
    for event in trace:
        result = getattr(event, "result", None)
        if isinstance(result, dict):
            for node_id in result.get("touched") or []:
                seen.setdefault(str(node_id), None)
    return list(seen)[:limit]


class _ServiceRetriever:
    """RetrieveNode through the context's RetrievalService (its cache and single flight)."""

    def __init__(self, service: Any) -> None:
        self.service = service

    def retrieve(self, text: str) -> str:
        return self.service.resolve(text)


def _message(error: BaseException) -> str:
    text = str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)
    return text or type(error).__name__
