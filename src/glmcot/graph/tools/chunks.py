"""Vertex chunks: a node, its features and its top-k neighbours per relation, as text.

A chunk is the engine's unit of KV reuse, so rendering is canonical: the same node of the same
store gives byte-identical text in every process. Any change to the output format must bump
``CHUNK_RENDERER_VERSION``, which is part of the chunk's reuse key.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import numpy as np

from glmcot.graph.graph_source import StoreSource, ranked_neighbours, require
from glmcot.graph.storage.store import Graph

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


def format_edge(features: dict) -> str:
    """An edge's features as shown after its neighbour: `` {quantity: 12, discount: 0.05}``."""
    if not features:
        return ""
    return " {" + ", ".join(f"{name}: {_clip(format_value(value), 80)}" for name, value in features.items()) + "}"


def render_chunk(graph: Graph, node_id: str, config: ChunkConfig = DEFAULT_CHUNK_CONFIG) -> str:
    """The vertex chunk of ``node_id`` (raises NodeNotFound)."""
    return render_chunk_at(graph, graph.index(node_id), config)


def render_chunk_at(graph: Graph, index: int, config: ChunkConfig = DEFAULT_CHUNK_CONFIG) -> str:
    return render_chunk_view(StoreSource(graph).chunk_view(index, config.top_k), config)


def render_source_chunk(source, ref, config: ChunkConfig = DEFAULT_CHUNK_CONFIG) -> str:
    """The vertex chunk of the node at `ref` of any `GraphSource` (graph/graph_source.py)."""
    return render_chunk_view(source.chunk_view(ref, config.top_k), config)


def render_chunk_view(view, config: ChunkConfig = DEFAULT_CHUNK_CONFIG) -> str:
    """The canonical text of a `ChunkView`: one rendering for every source, so a chunk is
    byte-identical whether the store or a database answered."""
    lines = [f"[node {view.node_id} | {view.node_type}]"]
    for name, value in view.features.items():
        lines.append(f"{name}: {_clip(format_value(value), config.max_value_chars)}")
    for relation in view.relations:
        total = relation.total
        if total == 0:
            # Imported tables and RDF leave out relations a node has no neighbour on (a sparse RDF
            # graph has dozens per type); GRBench chunks list them, as Graph-CoT does.
            if view.empty_relations_shown:
                lines.append(f"{relation.relation} (0): none")
            continue
        edges = relation.edges or [{}] * len(relation.top)
        shown = [f"{_clip(text, config.max_neighbour_chars)} <{neighbour_id}>{format_edge(edge)}"
                 for (neighbour_id, text), edge in zip(relation.top, edges)]
        head = f"{relation.relation} ({total})" if len(shown) == total else f"{relation.relation} (top {len(shown)} of {total})"
        lines.append(f"{head}: {' | '.join(shown)}")
    return "\n".join(lines) + "\n"


def chunk_key(graph, node_id: str, config: ChunkConfig = DEFAULT_CHUNK_CONFIG, text: str | None = None) -> str:
    """Reuse key of a vertex chunk: store, node, renderer version and rendering options; for an
    updated store also a digest of the chunk's text, so changed content never reuses old KV. On a
    live source (any `GraphSource` but the store) the database's location takes the store's place
    and the key always ends in the digest of the chunk's text (`text` as rendered, else rendered
    now): a database changed by anyone invalidates exactly the chunks whose text changed."""
    if isinstance(graph, StoreSource):
        graph = graph.graph
    if not isinstance(graph, Graph):
        if text is None:
            text = render_source_chunk(graph, require(graph, node_id), config)
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        return f"vertex:{graph.location}:{node_id}:{CHUNK_RENDERER_VERSION}:{config.signature}:{digest}"
    key = f"vertex:{graph.store_id}:{node_id}:{CHUNK_RENDERER_VERSION}:{config.signature}"
    digest = getattr(graph, "content_digest", None)
    return key if digest is None else f"{key}:{digest(node_id, config)}"


__all__ = [
    "CHUNK_RENDERER_VERSION",
    "ChunkConfig",
    "DEFAULT_CHUNK_CONFIG",
    "render_chunk",
    "render_chunk_at",
    "render_chunk_view",
    "format_edge",
    "render_source_chunk",
    "chunk_key",
    "format_value",
    "ranked_neighbours",
]
