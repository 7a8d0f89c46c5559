"""Vertex chunks: a node, its features and its top-k neighbours per relation, as text.

A chunk is the engine's unit of KV reuse, so rendering is canonical: the same node of the same
store gives byte-identical text in every process. Any change to the output format must bump
``CHUNK_RENDERER_VERSION``, which is part of the chunk's reuse key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from glmcot.graph.store import Graph

CHUNK_RENDERER_VERSION = "vc1"


@dataclass(frozen=True)
class ChunkConfig:
    top_k: int = 5  # neighbours shown per relation
    max_value_chars: int = 300  # a feature value longer than this is cut
    max_neighbour_chars: int = 80  # a neighbour's main text longer than this is cut

    @property
    def signature(self) -> str:
        return f"k{self.top_k}.v{self.max_value_chars}.n{self.max_neighbour_chars}"


DEFAULT_CHUNK_CONFIG = ChunkConfig()


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())  # one line per field, whatever the source whitespace
    if len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)].rstrip() + "…"


def format_value(value: object) -> str:
    """Canonical text of a feature value."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return "; ".join(value) if value else "none"
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def ranked_neighbours(graph: Graph, index: int, relation: str, top_k: int) -> tuple[np.ndarray, int]:
    """Top-k neighbour indices by edge weight (or by their degree), and the full count."""
    neighbours = np.asarray(graph.neighbor_indices(index, relation), dtype=np.int64)
    positions, total = _ranked_positions(graph, index, relation, neighbours, top_k)
    return neighbours[positions], total


def _ranked_positions(graph: Graph, index: int, relation: str, neighbours: np.ndarray, top_k: int) -> tuple[np.ndarray, int]:
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


def format_edge(features: dict) -> str:
    """An edge's features as shown after its neighbour: `` {quantity: 12, discount: 0.05}``."""
    if not features:
        return ""
    return " {" + ", ".join(f"{name}: {_clip(format_value(value), 80)}" for name, value in features.items()) + "}"


def render_chunk(graph: Graph, node_id: str, config: ChunkConfig = DEFAULT_CHUNK_CONFIG) -> str:
    """The vertex chunk of ``node_id`` (raises NodeNotFound)."""
    return render_chunk_at(graph, graph.index(node_id), config)


def render_chunk_at(graph: Graph, index: int, config: ChunkConfig = DEFAULT_CHUNK_CONFIG) -> str:
    node_type = graph.type_of_index(index)
    lines = [f"[node {graph.node_id(index)} | {node_type}]"]
    for name, value in graph.features_at(index).items():
        lines.append(f"{name}: {_clip(format_value(value), config.max_value_chars)}")
    # Imported tables and RDF leave out relations a node has no neighbour on (a sparse RDF graph
    # has dozens per type); GRBench chunks list them, as Graph-CoT does.
    empty_shown = graph.manifest.get("source", {}).get("empty_relations", "shown") == "shown"
    for relation in graph.relation_names(node_type):
        neighbours = np.asarray(graph.neighbor_indices(index, relation), dtype=np.int64)
        positions, total = _ranked_positions(graph, index, relation, neighbours, config.top_k)
        if total == 0:
            if empty_shown:
                lines.append(f"{relation} (0): none")
            continue
        chosen = neighbours[positions]
        ids = graph.node_ids(chosen)
        edges = [{}] * len(ids)
        if graph.edge_feature_names(node_type, relation):
            every = graph.edge_features_at(index, relation)
            edges = [every[position] for position in positions.tolist()]
        shown = [
            f"{_clip(graph.text_at(int(neighbour)), config.max_neighbour_chars)} <{neighbour_id}>{format_edge(edge)}"
            for neighbour, neighbour_id, edge in zip(chosen.tolist(), ids, edges)
        ]
        head = f"{relation} ({total})" if len(shown) == total else f"{relation} (top {len(shown)} of {total})"
        lines.append(f"{head}: {' | '.join(shown)}")
    return "\n".join(lines) + "\n"


def chunk_key(graph: Graph, node_id: str, config: ChunkConfig = DEFAULT_CHUNK_CONFIG) -> str:
    """Reuse key of a vertex chunk: store, node, renderer version and rendering options; for an
    updated store also a digest of the chunk's text, so changed content never reuses old KV."""
    key = f"vertex:{graph.store_id}:{node_id}:{CHUNK_RENDERER_VERSION}:{config.signature}"
    digest = getattr(graph, "content_digest", None)
    return key if digest is None else f"{key}:{digest(node_id, config)}"


__all__ = [
    "CHUNK_RENDERER_VERSION",
    "ChunkConfig",
    "DEFAULT_CHUNK_CONFIG",
    "render_chunk",
    "render_chunk_at",
    "chunk_key",
    "format_value",
    "ranked_neighbours",
]
