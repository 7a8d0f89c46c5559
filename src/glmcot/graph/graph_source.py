"""`GraphSource`: the one interface every consumer reads a graph through (docs/contracts.md).

A source answers the five primitives' questions about one graph, wherever it lives: the
memory-mapped store (`StoreSource`, here), a FalkorDB graph (graph/live/falkordb_source.py) or a
SPARQL endpoint (graph/live/sparql_source.py). Consumers resolve an id once to a `NodeRef` (an opaque
handle: the store's node index, a database's id string) and ask about the ref, so the store keeps
its direct index path and pays nothing for the seam.

Errors are the graph layer's typed ones (graph/errors.py) with the same messages on every source,
so an agent sees the same text whichever source answers; a database that cannot be reached raises
`SourceUnavailable`, which is not a `GraphToolError` (a snippet cannot catch its way past it).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Hashable, Protocol, runtime_checkable

import numpy as np

from glmcot.graph.errors import FeatureNotFound, GraphFormatError, NodeNotFound

NodeRef = Hashable  # what `resolve` returns: an int index for the store, the id string for a database


class SourceUnavailable(RuntimeError):
    """The database behind a source cannot be reached (at start or mid-question); names the URL."""


@dataclass(frozen=True)
class TypeSchema:
    """One node type: its features (name -> kind: str, int, float, bool, list, json) in order,
    its relations in order, and the feature that is its main text."""

    name: str
    features: dict[str, str]
    relations: tuple[str, ...]
    text_key: str | None
    count: int


@dataclass(frozen=True)
class Schema:
    types: tuple[TypeSchema, ...]
    domain: str | None = None  # the dataset's domain (dblp, ...), where known: it picks the agents' prompts

    @property
    def node_types(self) -> list[str]:
        return [entry.name for entry in self.types]

    def type(self, name: str) -> TypeSchema:
        for entry in self.types:
            if entry.name == name:
                return entry
        raise LookupError(f"no node type {name!r}; node types: {', '.join(self.node_types)}")

    def has_relation(self, name: str) -> bool:
        return any(name in entry.relations for entry in self.types)

    def has_feature(self, name: str) -> bool:
        return any(name in entry.features for entry in self.types)

    def to_json(self) -> dict:
        return {"types": [{"name": t.name, "features": dict(t.features), "relations": list(t.relations),
                           "text_key": t.text_key, "count": t.count} for t in self.types], "domain": self.domain}

    @classmethod
    def from_json(cls, data: dict) -> Schema:
        try:
            return cls(tuple(TypeSchema(str(t["name"]), {str(k): str(v) for k, v in t["features"].items()},
                                        tuple(str(r) for r in t["relations"]), t.get("text_key"), int(t.get("count", 0)))
                             for t in data["types"]), data.get("domain"))
        except (KeyError, TypeError, AttributeError, ValueError) as error:
            raise GraphFormatError(f"malformed graph schema: {error}") from None


@dataclass(frozen=True)
class Neighbours:
    """Neighbour ids along one relation in the source's order (at most the asked limit), and how
    many there are in all; ids that name no node (dangling) are kept, as Graph-CoT lists them."""

    ids: list[str]
    total: int


@dataclass(frozen=True)
class ChunkRelation:
    """A relation in a vertex chunk: the real neighbours' count and the top ones as (id, text)."""

    relation: str
    total: int
    top: list[tuple[str, str]]
    edges: list[dict[str, Any]] = field(default_factory=list)  # the top edges' features, where the graph has any


@dataclass(frozen=True)
class ChunkView:
    """What a vertex chunk shows; rendering it is graph/tools/chunks.py's job, the same on every source."""

    node_id: str
    node_type: str
    features: dict[str, Any]
    relations: list[ChunkRelation] = field(default_factory=list)
    empty_relations_shown: bool = True  # imported tables and RDF leave out relations without neighbours


@runtime_checkable
class GraphSource(Protocol):
    """A graph, read through the five primitives' questions. Thread-safe."""

    location: str  # the store folder or the database URL it was opened from

    def schema(self) -> Schema: ...

    def version(self) -> str:
        """A token that changes whenever the graph changes (chunk reuse keys carry it)."""
        ...

    def resolve(self, node_id: str) -> NodeRef | None:
        """The ref of the node with this exact id, or None."""
        ...

    def node_id(self, ref: NodeRef) -> str: ...

    def node_type(self, ref: NodeRef) -> str: ...

    def features(self, ref: NodeRef) -> dict[str, Any]:
        """The node's present features, in its type's feature order."""
        ...

    def feature(self, ref: NodeRef, name: str) -> Any:
        """One feature value (raises FeatureNotFound naming the valid ones)."""
        ...

    def neighbours(self, ref: NodeRef, relation: str, limit: int | None = None) -> Neighbours:
        """Neighbours along `relation` (raises RelationNotFound naming the valid ones)."""
        ...

    def degree(self, ref: NodeRef, relation: str) -> int: ...

    def has_relation_key(self, ref: NodeRef, relation: str) -> bool:
        """Whether the node's source record had the relation at all (the faithful baseline's KeyError)."""
        ...

    def texts(self, node_ids: Sequence[str]) -> list[str]:
        """Main texts of many nodes in one call (the id where a node has none)."""
        ...

    def chunk_view(self, ref: NodeRef, top_k: int) -> ChunkView:
        """The node's features and, per relation, its top-k real neighbours by edge weight (or by
        their total degree), ties in stored order, ranked where the data lives."""
        ...

    def iter_nodes(self, batch: int = 4096) -> Iterator[list[tuple[str, str, str]]]:
        """Every node as (id, type, main text), in batches: what node indexes are built from."""
        ...

    def close(self) -> None: ...


def require(source: GraphSource, node_id: str) -> NodeRef:
    """The ref of `node_id`, or NodeNotFound."""
    ref = source.resolve(node_id)
    if ref is None:
        raise NodeNotFound(f"no such node: {node_id!r}")
    return ref


def type_indices(graph, node_type: str) -> np.ndarray:
    """The store positions of `node_type`'s nodes: a merged view lists its live ones, a base
    store holds them in one range."""
    if hasattr(graph, "type_indices"):
        return graph.type_indices(node_type)
    start, stop = graph.type_range(node_type)
    return np.arange(start, stop, dtype=np.int64)


class LiveNodeRefs:
    """`node_id`/`node_type`/`feature` of a live source whose node references (`node_class`) carry them;
    anything else is looked up first (`resolve`, the source's own query)."""

    node_class: type

    def _ref(self, ref: Any) -> Any:
        if isinstance(ref, self.node_class):
            return ref
        found = self.resolve(ref)
        if found is None:
            raise NodeNotFound(f"no such node: {ref!r}")
        return found

    def node_id(self, ref: Any) -> str:
        return self._ref(ref).node_id

    def node_type(self, ref: Any) -> str:
        return self._ref(ref).node_type

    def feature(self, ref: Any, name: str) -> Any:
        node = self._ref(ref)
        entry = self._schema.type(node.node_type)
        if name not in entry.features:
            raise FeatureNotFound(f"{entry.name} node {node.node_id!r} has no feature {name!r}; "
                                  f"{entry.name} features: {', '.join(entry.features) or '(none)'}")
        present = self.features(node)
        if name not in present:
            raise FeatureNotFound(f"{entry.name} node {node.node_id!r} has no value for feature {name!r}; "
                                  f"features present on this node: {', '.join(present) or '(none)'}")
        return present[name]


def ranked_neighbours(graph, index: int, relation: str, top_k: int) -> tuple[np.ndarray, int]:
    """Top-k neighbour indices by edge weight (or by their degree), and the full count."""
    neighbours = np.asarray(graph.neighbor_indices(index, relation), dtype=np.int64)
    positions, total = ranked_positions(graph, index, relation, neighbours, top_k)
    return neighbours[positions], total


def ranked_positions(graph, index: int, relation: str, neighbours: np.ndarray, top_k: int) -> tuple[np.ndarray, int]:
    """Positions in the neighbour list of the top-k neighbours, and the full count."""
    total = len(neighbours)
    if total == 0 or top_k <= 0:
        return np.zeros(0, dtype=np.int64), total
    weights = graph.neighbor_weights(index, relation)
    scores = np.asarray(weights if weights is not None else graph.total_degree(neighbours), dtype=np.float64)
    positions = np.arange(total)
    if total > 4 * top_k:
        # Hubs: keep only candidates scoring at least the k-th best value (a value, so the choice
        # does not depend on the selection algorithm), the tied ones in stored order.
        kth = np.partition(scores, total - top_k)[total - top_k]
        above = positions[scores > kth]
        tied = positions[scores == kth][: top_k - len(above)]
        positions = np.concatenate([above, tied])
    # Highest score first; ties keep the stored order, so the result is deterministic.
    return positions[np.lexsort((positions, -scores[positions]))][:top_k], total


class StoreSource:
    """The memory-mapped store (a `Graph`, or its updated `MergedGraph` view) as a `GraphSource`.
    Refs are node indices; every method is the store's own index path."""

    def __init__(self, graph):
        self.graph = graph
        self.location = str(getattr(graph, "root", None) or graph.directory)
        self._schema: Schema | None = None

    def schema(self) -> Schema:
        if self._schema is None:
            graph = self.graph
            types = []
            for name in graph.node_types:
                kinds = {feature: graph.feature_kind(name, feature) for feature in graph.feature_names(name)}
                types.append(TypeSchema(name, kinds, tuple(graph.relation_names(name)), graph.text_key(name),
                                        graph.count(name)))
            self._schema = Schema(tuple(types), _store_domain(self.location))
        return self._schema

    def version(self) -> str:
        return f"{self.graph.store_id}@v{getattr(self.graph, 'version', 0)}"

    def resolve(self, node_id: str) -> int | None:
        index = self.graph._find(node_id)
        return None if index < 0 else index

    def node_id(self, ref: int) -> str:
        return self.graph.node_id(ref)

    def node_type(self, ref: int) -> str:
        return self.graph.type_of_index(ref)

    def features(self, ref: int) -> dict[str, Any]:
        return self.graph.features_at(ref)

    def feature(self, ref: int, name: str) -> Any:
        return self.graph.feature_at(ref, name)

    def neighbours(self, ref: int, relation: str, limit: int | None = None) -> Neighbours:
        graph = self.graph
        total = graph.degree_at(ref, relation)
        return Neighbours(graph.neighbor_id_list(ref, relation, limit), total)

    def degree(self, ref: int, relation: str) -> int:
        return self.graph.degree_at(ref, relation)

    def has_relation_key(self, ref: int, relation: str) -> bool:
        return self.graph.has_relation_key_at(ref, relation)

    def texts(self, node_ids: Sequence[str]) -> list[str]:
        graph = self.graph
        result = []
        for node_id in node_ids:
            index = graph._find(node_id)
            result.append(node_id if index < 0 else graph.text_at(index))
        return result

    def chunk_view(self, ref: int, top_k: int) -> ChunkView:
        graph = self.graph
        node_type = graph.type_of_index(ref)
        relations = []
        for relation in graph.relation_names(node_type):
            neighbours = np.asarray(graph.neighbor_indices(ref, relation), dtype=np.int64)
            positions, total = ranked_positions(graph, ref, relation, neighbours, top_k)
            chosen = neighbours[positions]
            ids = graph.node_ids(chosen) if len(chosen) else []
            edges = []
            if len(chosen) and graph.edge_feature_names(node_type, relation):
                every = graph.edge_features_at(ref, relation)
                edges = [every[position] for position in positions.tolist()]
            relations.append(ChunkRelation(relation, total, [(node_id, graph.text_at(int(index)))
                                                             for index, node_id in zip(chosen.tolist(), ids)], edges))
        shown = graph.manifest.get("source", {}).get("empty_relations", "shown") == "shown"
        return ChunkView(graph.node_id(ref), node_type, graph.features_at(ref), relations, shown)

    def edge_feature_names(self, node_type: str, relation: str) -> list[str]:
        """The edge features (relationship properties) of a relation; a live source has none yet."""
        return self.graph.edge_feature_names(node_type, relation)

    def edge_values(self, ref: int, relation: str, feature: str, limit: int | None = None) -> tuple[list[tuple[str, Any]], int]:
        """(neighbour id, value of `feature` on that edge) in stored order, at most `limit`, and
        the count of edges; an edge without the feature gives None."""
        graph = self.graph
        neighbours = graph.neighbor_index_list(ref, relation)
        features = graph.edge_features_at(ref, relation)
        stop = len(neighbours) if limit is None else min(limit, len(neighbours))
        ids = graph.node_ids(neighbours[:stop])
        return [(node_id, edge.get(feature)) for node_id, edge in zip(ids, features[:stop])], len(neighbours)

    def iter_nodes(self, batch: int = 4096) -> Iterator[list[tuple[str, str, str]]]:
        graph = self.graph
        for node_type in graph.node_types:
            indices = type_indices(graph, node_type)
            for first in range(0, len(indices), batch):
                part = indices[first : first + batch]
                ids = graph.node_ids(part)
                yield [(node_id, node_type, graph.text_at(int(index))) for node_id, index in zip(ids, part.tolist())]

    def close(self) -> None:
        return None


def _store_domain(location: str) -> str | None:
    """The domain a dataset folder's meta.json names (glmcot data synth writes it beside graph/)."""
    import json
    from pathlib import Path

    for candidate in (Path(location) / "meta.json", Path(location).parent / "meta.json"):
        if candidate.is_file():
            try:
                return json.loads(candidate.read_text(encoding="utf-8")).get("domain")
            except (OSError, ValueError, AttributeError):
                return None
    return None


def store_of(source: Any):
    """The memory-mapped `Graph` behind a source, or None for a live database."""
    return source.graph if isinstance(source, StoreSource) else None




def as_source(graph: Any) -> GraphSource:
    """A `GraphSource` as given, or a store `Graph` wrapped as one."""
    if isinstance(graph, StoreSource) or not hasattr(graph, "_find"):
        return graph
    return StoreSource(graph)


__all__ = ["GraphSource", "StoreSource", "Schema", "TypeSchema", "Neighbours", "ChunkRelation", "ChunkView",
           "NodeRef", "SourceUnavailable", "require", "store_of", "as_source", "ranked_neighbours"]
