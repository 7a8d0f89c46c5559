"""RetrieveNode for the agents: one service per run, shared by every question.

- A global LRU cache maps RetrieveNode text to a node id (the paper's text -> nodeID cache).
- Searches run in a small thread pool; a text already being searched is not searched twice
  (single flight), so a pipelined prefetch and the snippet's own call meet on one future.
- `prefetch(text)` starts a search early: the GLM agent calls it from the A-Agent's stream as soon
  as a complete `RetrieveNode("...")` line appears (pipelined retrieval, Figure 9).
"""

from __future__ import annotations

import ast
import re
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Protocol


class Retriever(Protocol):
    def retrieve(self, text: str) -> str: ...


class RetrievalService:
    """`retriever.retrieve(text) -> node id` behind a cache, single flight and a thread pool."""

    def __init__(self, retriever: Retriever | None, *, cache_size: int = 100_000, threads: int = 2):
        self.retriever = retriever
        self.cache_size = cache_size
        self._cache: OrderedDict[str, str] = OrderedDict()
        self._inflight: dict[str, Future] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="retrieve")
        self.stats = {"lookups": 0, "cache_hits": 0, "searches": 0, "prefetches": 0, "prefetch_hits": 0, "search_s": 0.0}

    @staticmethod
    def normalise(text: str) -> str:
        return " ".join(str(text).split())

    def _search(self, key: str) -> str:
        if self.retriever is None:
            raise LookupError("no node index for this graph (build one with `glmcot graph embed`)")
        started = time.perf_counter()
        try:
            node_id = self.retriever.retrieve(key)
        finally:
            with self._lock:
                self.stats["search_s"] += time.perf_counter() - started
        if not node_id:
            raise LookupError(f"no node matches {key!r}")
        return node_id

    def _start(self, key: str) -> tuple[Future, bool]:
        """The future for key (a finished one on a cache hit) and whether it is new."""
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                done: Future = Future()
                done.set_result(self._cache[key])
                return done, False
            if key in self._inflight:
                return self._inflight[key], False
            future = self._pool.submit(self._search, key)
            self._inflight[key] = future
            self.stats["searches"] += 1
        future.add_done_callback(lambda f, key=key: self._finish(key, f))
        return future, True

    def _finish(self, key: str, future: Future) -> None:
        with self._lock:
            self._inflight.pop(key, None)
            if future.exception() is None:
                self._cache[key] = future.result()
                self._cache.move_to_end(key)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)

    def prefetch(self, text: str) -> None:
        key = self.normalise(text)
        if not key:
            return
        _, new = self._start(key)
        if new:
            with self._lock:
                self.stats["prefetches"] += 1

    def resolve(self, text: str) -> str:
        """The node id for text (blocks until the search, perhaps already running, finishes)."""
        key = self.normalise(text)
        with self._lock:
            self.stats["lookups"] += 1
            hit = key in self._cache
            inflight = key in self._inflight
            if hit:
                self.stats["cache_hits"] += 1
            elif inflight:
                self.stats["prefetch_hits"] += 1
        future, _ = self._start(key)
        return future.result()

    def clear(self) -> None:
        """Empties the text -> node id cache (and the retriever's own, if it keeps one), e.g. to
        measure cold-cache retrieval."""
        with self._lock:
            self._cache.clear()
        inner = getattr(self.retriever, "cache", None)
        if inner is not None and hasattr(inner, "clear"):
            inner.clear()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


_RETRIEVE_CALL = re.compile(r"RetrieveNode\(\s*((?:\"(?:[^\"\\]|\\.)*\")|(?:'(?:[^'\\]|\\.)*'))\s*\)")


def retrieve_literals(line: str) -> list[str]:
    """String literals passed to RetrieveNode on one line of code."""
    texts = []
    for literal in _RETRIEVE_CALL.findall(line):
        try:
            value = ast.literal_eval(literal)
        except (ValueError, SyntaxError):
            continue
        if isinstance(value, str) and value.strip():
            texts.append(value)
    return texts


class PipelineHook:
    """An on_line hook for the A-Agent's stream: each complete line naming RetrieveNode("...")
    starts that search at once (in the service's pool), while decoding continues."""

    def __init__(self, service: RetrievalService):
        self.service = service
        self.started: list[str] = []
        self.first_at: float | None = None
        self._t0 = time.perf_counter()

    def __call__(self, line: str) -> None:
        for text in retrieve_literals(line):
            if text not in self.started:
                if self.first_at is None:
                    self.first_at = time.perf_counter() - self._t0
                self.started.append(text)
                self.service.prefetch(text)


class LexicalRetriever:
    """Exact, then case- and space-insensitive, then longest-containment match on each node's main
    text. For graphs without an embedding index (tests, `glmcot exec`); the agents normally use
    glmcot.graph's embedding NodeRetriever."""

    def __init__(self, graph):
        self._exact: dict[str, str] = {}
        self._folded: dict[str, str] = {}
        for node_type in graph.node_types:
            start, end = graph.type_range(node_type)
            # an updated store (graph/merged.py) lists its live nodes, added ones included
            indices = graph.type_indices(node_type).tolist() if hasattr(graph, "type_indices") else range(start, end)
            for index in indices:
                text = graph.text_at(index)
                if not text:
                    continue
                node_id = graph.node_id(index)
                self._exact.setdefault(text, node_id)
                self._folded.setdefault(self._fold(text), node_id)

    @staticmethod
    def _fold(text: str) -> str:
        return " ".join(text.lower().split())

    def retrieve(self, text: str) -> str:
        if text in self._exact:
            return self._exact[text]
        folded = self._fold(text)
        if folded in self._folded:
            return self._folded[folded]
        best = None
        for candidate, node_id in self._folded.items():
            if folded and (folded in candidate or candidate in folded):
                if best is None or abs(len(candidate) - len(folded)) < best[0]:
                    best = (abs(len(candidate) - len(folded)), node_id)
        if best is None:
            raise LookupError(f"no node text matches {text!r}")
        return best[1]


def make_resolver(service: RetrievalService) -> Callable[[str], str]:
    return service.resolve
