"""The RetrieveNode index of an updated store: the base's FAISS index plus a small overlay.

An update embeds only the nodes whose text is new or changed and stores them, cumulatively per
version, in ``<base>/retrieval/overlay-vN.npz`` (ids, vectors, and the base indices no longer
searchable: deleted or renamed nodes). A search asks the base index for a few more hits than
were removed, drops the removed ones, searches the overlay exactly, and merges by score. A
compaction writes the new base's index from the stored base embeddings and the overlay, without
embedding anything again.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import asdict
from pathlib import Path

import numpy as np

from glmcot.graph.updates.delta import ApplyReport
from glmcot.graph.index.retrieval import (
    MAX_TEXT_CHARS,
    RETRIEVAL_DIR,
    RETRIEVAL_FORMAT_VERSION,
    Embedder,
    IndexConfig,
    LazyEmbedder,
    NodeRetriever,
    RetrieveNodeCache,
    _make_index,
)
from glmcot.graph.storage.store import Graph

OVERLAY = "overlay-v{version:06d}.npz"


def _overlay_path(graph, version: int) -> Path:
    return Path(graph.directory) / RETRIEVAL_DIR / OVERLAY.format(version=version)


def _load_overlay(graph, version: int, dim: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    path = _overlay_path(graph, version)
    if version <= 0 or not path.is_file():
        return [], np.zeros((0, dim), np.float32), np.zeros(0, np.int64)
    with np.load(path, allow_pickle=False) as data:
        return data["ids"].tolist(), data["vectors"].astype(np.float32), data["removed"].astype(np.int64)


def has_node_index(graph) -> bool:
    return (Path(graph.directory) / RETRIEVAL_DIR / "meta.json").is_file()


def update_node_index(before, after, report: ApplyReport, embedder: Embedder | None = None) -> int:
    """Write the overlay of version ``after.version``; returns how many texts were embedded."""
    meta = json.loads((Path(after.directory) / RETRIEVAL_DIR / "meta.json").read_text(encoding="utf-8"))
    embedder = embedder or LazyEmbedder(meta["embedder"], meta["dim"])  # loaded only if a text changed
    ids, vectors, removed = _load_overlay(before, getattr(before, "version", 0), meta["dim"])
    changed = set(report.text_changed) | set(report.deleted)
    keep = [position for position, node_id in enumerate(ids) if node_id not in changed]
    ids, vectors = [ids[position] for position in keep], vectors[keep]
    removed_set = set(removed.tolist())
    base_count = int(after.manifest["num_nodes"])
    for node_id in changed:
        index = Graph._find(after, node_id)  # the base index, if it is a base node
        if 0 <= index < base_count:
            removed_set.add(index)
    fresh = [node_id for node_id in dict.fromkeys(report.text_changed) if after.has_node(node_id)]
    if fresh:
        texts = [after.text_at(after.index(node_id))[:MAX_TEXT_CHARS] for node_id in fresh]
        vectors = np.concatenate([vectors, embedder.encode(texts).astype(np.float32)])
        ids = ids + fresh
    path = _overlay_path(after, after.version)
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}.npz")
    np.savez(tmp, ids=np.asarray(ids, dtype=str), vectors=vectors.reshape(-1, meta["dim"]),
             removed=np.asarray(sorted(removed_set), dtype=np.int64))
    os.replace(tmp, path)
    return len(fresh)


def surviving(entries, report: ApplyReport) -> list[tuple[str, str]]:
    """The (query text, node id) cache entries an update cannot change.

    A new or renamed node may now be the best match of any query, so then none survive; after
    deletions only, the entries that answer a deleted node go; edge and other feature changes
    leave every entry true.
    """
    if report.text_changed:
        return []
    gone = set(report.deleted)
    return [(text, node_id) for text, node_id in entries.items() if node_id not in gone]


def drop_affected(cache: RetrieveNodeCache, report: ApplyReport) -> int:
    """Drop the RetrieveNode cache entries an update can change; returns how many were dropped."""
    with cache._lock:
        kept = surviving(cache._entries, report)
        dropped = len(cache._entries) - len(kept)
        cache._entries.clear()
        cache._entries.update(kept)
        return dropped


class UpdatedNodeRetriever(NodeRetriever):
    """RetrieveNode over a merged version: the base index minus removed nodes, plus the overlay."""

    def __init__(self, graph, base: NodeRetriever, ids: list[str], vectors: np.ndarray, removed: np.ndarray):
        super().__init__(graph, base.index, base.embedder, base.meta, base.cache)
        self.base = base
        self.overlay_ids = ids
        self.overlay_vectors = vectors
        self.removed = removed

    def search_batch(self, texts: list[str], k: int = 1, node_type: str | None = None) -> list[list[tuple[str, float]]]:
        queries = self.embedder.encode(list(texts))
        results: list[list[tuple[str, float]]] = []
        base_hits: list[list[tuple[int, float]]] = [[] for _ in texts]
        if self.index is not None and (node_type is None or node_type in self.base.graph.node_types):
            extra = min(len(self.removed), 1024)
            scores, found = self.base._search_vectors(queries, k + extra, node_type)
            removed = self.removed
            for row, (row_scores, row_ids) in enumerate(zip(scores.tolist(), found.tolist())):
                kept = [(index, score) for index, score in zip(row_ids, row_scores) if index >= 0]
                if len(removed):
                    mask = np.isin([index for index, _ in kept], removed)
                    kept = [pair for pair, gone in zip(kept, mask.tolist()) if not gone]
                base_hits[row] = kept[:k]
        overlay = [(position, node_id) for position, node_id in enumerate(self.overlay_ids)
                   if node_type is None or self.graph.node_type(node_id) == node_type]
        overlay_scores = None
        if overlay:
            overlay_scores = queries @ self.overlay_vectors[[position for position, _ in overlay]].T
        for row in range(len(texts)):
            names = self.base.graph.node_ids([index for index, _ in base_hits[row]])
            candidates = [(name, float(score)) for name, (_, score) in zip(names, base_hits[row])]
            if overlay_scores is not None:
                candidates += [(node_id, float(score)) for (_, node_id), score in zip(overlay, overlay_scores[row].tolist())]
            candidates.sort(key=lambda pair: -pair[1])
            results.append(candidates[:k])
        return results


def open_updated_retriever(graph, embedder: Embedder | None = None, cache: RetrieveNodeCache | None = None,
                           device: str = "cpu") -> UpdatedNodeRetriever:
    base_graph = Graph.open(graph.directory, follow_updates=False)
    base = NodeRetriever.open(base_graph, embedder=embedder, cache=cache, device=device)
    ids, vectors, removed = _load_overlay(graph, graph.version, base.meta["dim"])
    return UpdatedNodeRetriever(graph, base, ids, vectors, removed)


NodeRetriever.open_updated = staticmethod(open_updated_retriever)


def compact_node_index(before, new_base: Graph, old_to_new: np.ndarray) -> bool:
    """Write the new base's index from stored vectors (no embedding); False if there is no index."""
    import faiss

    source = Path(before.directory) / RETRIEVAL_DIR
    if not (source / "meta.json").is_file() or not (source / "embeddings.npy").is_file():
        return False
    meta = json.loads((source / "meta.json").read_text(encoding="utf-8"))
    base_vectors = np.load(source / "embeddings.npy", mmap_mode="r")
    ids, overlay_vectors, _ = _load_overlay(before, getattr(before, "version", 0), meta["dim"])
    vectors = np.zeros((new_base.num_nodes, meta["dim"]), dtype=np.float32)
    filled = np.zeros(new_base.num_nodes, dtype=bool)
    base_count = int(before.manifest["num_nodes"])
    old = np.flatnonzero(old_to_new[:base_count] >= 0)
    vectors[old_to_new[old]] = base_vectors[old]
    filled[old_to_new[old]] = True
    for position, node_id in enumerate(ids):
        if new_base.has_node(node_id):
            index = new_base.index(node_id)
            vectors[index] = overlay_vectors[position]
            filled[index] = True
    if not filled.all():
        return False  # a node without a stored vector: `glmcot graph embed` rebuilds the index
    target = Path(new_base.directory) / RETRIEVAL_DIR
    tmp = Path(new_base.directory) / f".{RETRIEVAL_DIR}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        np.save(tmp / "embeddings.npy", vectors)
        config = IndexConfig(**meta["index"])
        if len(vectors):
            faiss.write_index(_make_index(vectors, config), str(tmp / "index.faiss"))
        meta.update(store_id=new_base.store_id, num_nodes=new_base.num_nodes, version=RETRIEVAL_FORMAT_VERSION,
                    index=asdict(config), text_keys={t: new_base.text_key(t) for t in new_base.node_types})
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return True


__all__ = ["update_node_index", "drop_affected", "surviving", "UpdatedNodeRetriever", "open_updated_retriever",
           "compact_node_index", "has_node_index"]
