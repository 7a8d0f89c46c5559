"""The five graph primitives the agents' code calls, over a graph handle.

They return plain values (str, int, float, list of str). Errors are typed (``GraphToolError``
subclasses) and their messages list the valid choices, because an LLM reads them to correct its
next call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from glmcot.graph.tools.chunks import DEFAULT_CHUNK_CONFIG, ChunkConfig, render_source_chunk
from glmcot.graph.errors import (
    FeatureNotFound,
    GraphToolError,
    NodeNotFound,
    RelationNotFound,
    RetrievalUnavailable,
)
from glmcot.graph.graph_source import GraphSource, NodeRef, as_source
from glmcot.graph.storage.values import fresh

PRIMITIVES = ("RetrieveNode", "NodeInfo", "NodeFeature", "NeighbourCheck", "NodeDegree")


class Retriever(Protocol):
    def retrieve(self, text: str) -> str: ...


class NeighbourList(list):
    """A neighbour list that may be cut to a bound; printing it shows how many were left out."""

    def __init__(self, items, total: int):
        super().__init__(items)
        self.total = total

    @property
    def omitted(self) -> int:
        return self.total - len(self)

    def __repr__(self) -> str:
        text = super().__repr__()
        if self.omitted:
            text += f" ({self.omitted} more of {self.total} left out; NodeDegree gives the count)"
        return text

    __str__ = __repr__


class EdgeValues(dict):
    """Neighbour id -> edge feature value; printing it shows how many edges were left out."""

    def __init__(self, values: dict, total: int, shown: int):
        super().__init__(values)
        self.total = total
        self.shown = shown  # edges read (at most the neighbour bound)

    def __repr__(self) -> str:
        text = super().__repr__()
        if self.total > self.shown:
            text += f" ({self.total - self.shown} more of {self.total} left out; NodeDegree gives the count)"
        return text

    __str__ = __repr__


class GraphTools:
    """The primitives bound to one graph source (a store or a live database, graph/graph_source.py);
    records the node ids a snippet looked at."""

    def __init__(
        self,
        graph: GraphSource | Any,
        retriever: Retriever | None = None,
        neighbour_limit: int | None = 50,
        chunk_config: ChunkConfig = DEFAULT_CHUNK_CONFIG,
    ):
        if neighbour_limit is not None and neighbour_limit < 1:
            raise ValueError("neighbour_limit must be at least 1, or None for no bound")
        self.source = as_source(graph)
        self.retriever = retriever
        self.neighbour_limit = neighbour_limit
        self.chunk_config = chunk_config
        self._touched: dict[str, None] = {}
        self._lock = threading.Lock()

    # bookkeeping -------------------------------------------------------------------------------
    @property
    def touched(self) -> list[str]:
        with self._lock:
            return list(self._touched)

    def reset_touched(self) -> None:
        with self._lock:
            self._touched.clear()

    def _touch(self, node_id: str) -> None:
        with self._lock:
            self._touched.setdefault(node_id, None)

    def functions(self) -> dict[str, Callable[..., Any]]:
        return {name: getattr(self, name) for name in PRIMITIVES}

    # argument checks ---------------------------------------------------------------------------
    def _node(self, value: Any, primitive: str) -> tuple[str, NodeRef]:
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            value = str(value)  # numeric-looking ids (MAG, Goodreads) written without quotes
        if isinstance(value, (list, tuple, set, frozenset)):
            raise GraphToolError(
                f"{primitive} takes one node id (a string), got a {type(value).__name__} of {len(value)}; "
                f"call it once per id in a loop"
            )
        if not isinstance(value, str):
            raise GraphToolError(f"{primitive} takes a node id string, got {type(value).__name__} {value!r}")
        node_id = value
        index = self.source.resolve(node_id)
        if index is None and value != value.strip():  # stray spaces around an id written by a model
            node_id = value.strip()
            index = self.source.resolve(node_id)
        if index is None:
            raise NodeNotFound(f"no such node: {value!r}; node ids come from RetrieveNode or NeighbourCheck")
        self._touch(node_id)
        return node_id, index

    @staticmethod
    def _name(value: Any, primitive: str, what: str) -> str:
        if not isinstance(value, str):
            raise GraphToolError(f"{primitive} takes a {what} name string, got {type(value).__name__} {value!r}")
        return value.strip()

    # the primitives ----------------------------------------------------------------------------
    def RetrieveNode(self, text: str) -> str:  # noqa: N802 - the names are the paper's
        """Id of the node whose main text best matches ``text``."""
        if not isinstance(text, str) or not text.strip():
            raise GraphToolError(f"RetrieveNode takes a non-empty text string, got {text!r}")
        if self.retriever is None:
            raise RetrievalUnavailable(
                "RetrieveNode is unavailable: this graph has no node index; build one with `glmcot graph embed DIR`"
            )
        node_id = self.retriever.retrieve(text)
        self._touch(node_id)
        return node_id

    def NodeInfo(self, node_id: str) -> str:  # noqa: N802
        """The node's vertex chunk: type, features, top neighbours per relation."""
        _, index = self._node(node_id, "NodeInfo")
        return render_source_chunk(self.source, index, self.chunk_config)

    def NodeFeature(self, node_id: str, feature: str) -> Any:  # noqa: N802
        """One feature value of a node: a fresh copy, so a snippet that changes it changes nothing else."""
        _, index = self._node(node_id, "NodeFeature")
        return fresh(self.source.feature(index, self._name(feature, "NodeFeature", "feature")))

    def NeighbourCheck(self, node_id: str, relation: str, edge_feature: str | None = None) -> list[str] | EdgeValues:  # noqa: N802
        """Neighbour ids along ``relation``, at most ``neighbour_limit`` of them, in the file's order.
        With ``edge_feature`` (a relationship property, where the graph has them): a dict from
        each neighbour id to that edge's value (a list where several edges reach one neighbour)."""
        _, index = self._node(node_id, "NeighbourCheck")
        relation = self._name(relation, "NeighbourCheck", "relation")
        if edge_feature is not None:
            return self._edge_values(index, relation, self._name(edge_feature, "NeighbourCheck", "edge feature"))
        # Dangling ids (naming no node) stay in the list, as in Graph-CoT and the gold answers.
        found = self.source.neighbours(index, relation, self.neighbour_limit)
        return NeighbourList(found.ids, found.total)

    def _edge_values(self, ref, relation: str, feature: str) -> EdgeValues:
        source = self.source
        names_of = getattr(source, "edge_feature_names", None)  # live databases have no edge features yet
        names = names_of(source.node_type(ref), relation) if names_of is not None else []
        if feature not in names:
            source.degree(ref, relation)  # an unknown relation: RelationNotFound names the valid ones
            known = f"its edge features: {', '.join(names)}" if names else "it has no edge features"
            raise FeatureNotFound(f"relation {relation!r} has no edge feature {feature!r}; {known}")
        pairs, total = source.edge_values(ref, relation, feature, self.neighbour_limit)
        collected: dict[str, list] = {}
        for neighbour_id, value in pairs:  # several edges to one neighbour: every value, in order
            collected.setdefault(neighbour_id, []).append(fresh(value))
        return EdgeValues({key: items[0] if len(items) == 1 else items for key, items in collected.items()},
                          total, len(pairs))

    def NodeDegree(self, node_id: str, relation: str) -> int:  # noqa: N802
        """Number of neighbours along ``relation``."""
        _, index = self._node(node_id, "NodeDegree")
        return self.source.degree(index, self._name(relation, "NodeDegree", "relation"))


__all__ = [
    "GraphTools",
    "GraphToolError",
    "NodeNotFound",
    "FeatureNotFound",
    "RelationNotFound",
    "RetrievalUnavailable",
    "NeighbourList",
    "EdgeValues",
    "PRIMITIVES",
]
