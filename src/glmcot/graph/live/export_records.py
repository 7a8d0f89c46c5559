"""What an export to a graph database writes, read from any store view: nodes and edges as
records in store order (graph/live/db_export.py loads them into FalkorDB, graph/live/sparql_source.py into
a SPARQL endpoint)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from glmcot.graph.graph_source import type_indices

RESERVED = ("_id", "_type", "_text", "_degree", "_order", "_absent", "_nulls")  # the layouts' own names

Progress = Callable[[int, int], None]  # (items done, items in all)
BATCH = 2000


@dataclass
class ExportReport:
    location: str
    nodes: int
    edges: int
    dangling: int
    seconds: float


@dataclass
class NodeRecord:
    node_id: str
    node_type: str
    order: int
    text: str
    degree: int
    features: dict
    absent: list[str]


@dataclass
class EdgeRecord:
    source: str
    relation: str
    target: str
    position: int
    weight: float | None
    dangling: bool


def node_records(graph, batch: int = BATCH) -> Iterator[list[NodeRecord]]:
    """Every live node of a store view, in store order, as export records."""
    order = 0
    for node_type in graph.node_types:
        indices = type_indices(graph, node_type)
        relations = graph.relation_names(node_type)
        for first in range(0, len(indices), batch):
            part = indices[first : first + batch]
            degrees = graph.total_degree(part).tolist() if len(part) else []
            records = []
            for index, node_id, degree in zip(part.tolist(), graph.node_ids(part), degrees):
                absent = [name for name in relations if not _has_key(graph, index, name)]
                records.append(NodeRecord(node_id, node_type, order, graph.text_at(index), int(degree),
                                          graph.features_at(index), absent))
                order += 1
            yield records


def _has_key(graph, index: int, relation: str) -> bool:
    try:
        return graph.has_relation_key_at(index, relation)
    except (IndexError, KeyError, ValueError):
        return True


def edge_records(graph, batch: int = BATCH) -> Iterator[list[EdgeRecord]]:
    """Every edge, with its place in the neighbour list (dangling ids included) and its weight."""
    records: list[EdgeRecord] = []
    for node_type in graph.node_types:
        if hasattr(graph, "type_indices"):
            indices = graph.type_indices(node_type).tolist()
        else:
            start, stop = graph.type_range(node_type)
            indices = range(start, stop)
        for relation in graph.relation_names(node_type):
            for index in indices:
                ids = graph.neighbor_id_list(index, relation)
                if not ids:
                    continue
                weights = graph.neighbor_weights(index, relation)
                weights = weights.tolist() if weights is not None else None
                source = graph.node_id(index)
                real = 0
                for position, target in enumerate(ids):
                    dangling = not graph.has_node(target)
                    weight = None
                    if not dangling and weights is not None:
                        weight = float(weights[real])
                    if not dangling:
                        real += 1
                    records.append(EdgeRecord(source, relation, target, position, weight, dangling))
                if len(records) >= batch:
                    yield records
                    records = []
    if records:
        yield records


def check_names(schema) -> None:
    """Names that cannot be stored as given: a clear error before anything is written."""
    for entry in schema.types:
        for name in entry.features:
            if name in RESERVED or "`" in name or not name:
                raise ValueError(f"{entry.name} feature {name!r} cannot be exported: the names {', '.join(RESERVED)} "
                                 "are the layout's own, and names may not contain a backtick")
        for relation in entry.relations:
            if "`" in relation or not relation:
                raise ValueError(f"{entry.name} relation {relation!r} cannot be exported (a backtick or empty name)")



__all__ = ["ExportReport", "NodeRecord", "EdgeRecord", "node_records", "edge_records", "check_names", "Progress", "RESERVED"]
