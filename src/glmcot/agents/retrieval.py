"""RetrieveNode for the agents: one service per run, shared by every question.

- A global LRU cache maps RetrieveNode text to a node id (the paper's text -> nodeID cache).
- Searches run in a small thread pool; a text already being searched is not searched twice
  (single flight), so a pipelined prefetch and the snippet's own call meet on one future.
- `prefetch(text)` starts a search early: the GLM agent calls it from the A-Agent's stream as soon
  as a complete `RetrieveNode("...")` line appears (pipelined retrieval, Figure 9).

Counters (`stats`): a lookup that meets a prefetched search is a `prefetch_hits` while the search
still runs (part of it overlapped decoding) and a `prefetch_ready` once it has finished (all of it
did); `cache_hits` are the lookups answered by the cache from an earlier lookup, so pipelining and
the cache are told apart.

RetrieveNode text comes from LLM output and snippets, so everything here is bounded: the query
length (`max_query_chars`), the cache by entries and by characters held, the searches in flight
from prefetching, and the lexical fallback's containment scan (`max_scan_chars`).
"""

from __future__ import annotations

import ast
import bisect
import re
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Protocol

from glmcot.agents.formats import valid_text
from glmcot.agents.trace import PrefetchTiming

MAX_QUERY_CHARS = 2000  # node texts are titles and names; longer text is not a RetrieveNode query


class Retriever(Protocol):
    def retrieve(self, text: str) -> str: ...


@dataclass
class Lookup:
    """What a prefetch did with one text: `source` is "search" (started a search), "cache" (the
    cache knew it), "in flight" (met a search already running) or "skipped" (too long, too many
    searches running); `started`/`finished` are the search's perf_counter times, set by the thread
    that runs it."""

    source: str
    started: float | None = None
    finished: float | None = None


class RetrievalService:
    """`retriever.retrieve(text) -> node id` behind a cache, single flight and a thread pool."""

    def __init__(
        self,
        retriever: Retriever | None,
        *,
        cache_size: int = 100_000,
        cache_chars: int = 8_000_000,
        max_query_chars: int = MAX_QUERY_CHARS,
        max_inflight: int = 256,
        threads: int = 2,
    ):
        self.retriever = retriever
        self.cache_size = cache_size
        self.cache_chars = cache_chars  # characters of keys and ids the cache may hold
        self.max_query_chars = max_query_chars
        self.max_inflight = max_inflight  # prefetches beyond this are skipped (resolve still searches)
        self._cache: OrderedDict[str, str] = OrderedDict()
        self._cached_chars = 0
        self._inflight: dict[str, Future] = {}
        # keys a prefetch started that no lookup has asked for yet (bounded like the searches in flight)
        self._prefetched: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="retrieve")
        self.stats = {"lookups": 0, "cache_hits": 0, "searches": 0, "prefetches": 0, "prefetch_hits": 0,
                      "prefetch_ready": 0, "search_s": 0.0}

    @staticmethod
    def normalise(text: str) -> str:
        return " ".join(valid_text(str(text)).split())

    def _check_length(self, key: str) -> None:
        if len(key) > self.max_query_chars:
            raise LookupError(f"the RetrieveNode text is {len(key)} characters; at most {self.max_query_chars} (pass the name or title only)")

    @property
    def cached_chars(self) -> int:
        """Characters (keys and node ids) the cache holds now."""
        with self._lock:
            return self._cached_chars

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

    def _timed_search(self, key: str, lookup: Lookup) -> str:
        lookup.started = time.perf_counter()
        try:
            return self._search(key)
        finally:
            lookup.finished = time.perf_counter()

    def _start(self, key: str) -> tuple[Future, bool]:
        """The future for key (a finished one on a cache hit) and whether it is new; a new one
        carries its Lookup as `future.lookup`, the others a Lookup saying where they came from."""
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                done: Future = Future()
                done.set_result(self._cache[key])
                done.lookup = Lookup("cache")  # type: ignore[attr-defined]
                return done, False
            if key in self._inflight:
                running = self._inflight[key]
                running.lookup = getattr(running, "lookup", None) or Lookup("in flight")  # type: ignore[attr-defined]
                return running, False
            lookup = Lookup("search")
            future = self._pool.submit(self._timed_search, key, lookup)
            future.lookup = lookup  # type: ignore[attr-defined]
            self._inflight[key] = future
            self.stats["searches"] += 1
        future.add_done_callback(lambda f, key=key: self._finish(key, f))
        return future, True

    def _finish(self, key: str, future: Future) -> None:
        with self._lock:
            self._inflight.pop(key, None)
            if future.cancelled() or future.exception() is not None:
                return
            node_id = future.result()
            old = self._cache.pop(key, None)
            if old is not None:
                self._cached_chars -= len(key) + len(old)
            self._cache[key] = node_id
            self._cached_chars += len(key) + len(node_id)
            while self._cache and (len(self._cache) > self.cache_size or self._cached_chars > self.cache_chars):
                evicted, value = self._cache.popitem(last=False)
                self._cached_chars -= len(evicted) + len(value)

    def prefetch(self, text: str) -> Lookup:
        """Starts the search for text unless the cache knows it or it is running; says which."""
        key = self.normalise(text)
        if not key or len(key) > self.max_query_chars:
            return Lookup("skipped")  # resolve reports the error, if the snippet really asks
        with self._lock:
            if len(self._inflight) >= self.max_inflight:
                return Lookup("skipped")
        future, new = self._start(key)
        if not new:
            lookup = getattr(future, "lookup", None)
            return Lookup("cache") if lookup is None or lookup.source == "cache" else \
                Lookup("in flight", lookup.started, lookup.finished)
        with self._lock:
            self.stats["prefetches"] += 1
            self._prefetched[key] = None
            while len(self._prefetched) > self.max_inflight:
                self._prefetched.popitem(last=False)
        return future.lookup  # type: ignore[attr-defined]

    def resolve(self, text: str) -> str:
        """The node id for text (blocks until the search, perhaps already running, finishes)."""
        key = self.normalise(text)
        self._check_length(key)
        with self._lock:
            self.stats["lookups"] += 1
            hit = key in self._cache
            inflight = key in self._inflight
            prefetched = key in self._prefetched
            if prefetched:
                del self._prefetched[key]
            if hit:
                self.stats["prefetch_ready" if prefetched else "cache_hits"] += 1
            elif inflight:
                self.stats["prefetch_hits"] += 1
        future, _ = self._start(key)
        return future.result()

    def clear(self) -> None:
        """Empties the text -> node id cache (and the retriever's own, if it keeps one), e.g. to
        measure cold-cache retrieval."""
        with self._lock:
            self._cache.clear()
            self._cached_chars = 0
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
        self.t0 = time.perf_counter()   # the A-Agent call starts right after the hook is made
        self.seen: list[tuple[str, float, Lookup]] = []  # (text, seconds from t0, what the prefetch did)

    # A line longer than a snippet may be is not worth scanning (and the literal search costs up to
    # line length per `RetrieveNode(` on it).
    max_line = 8000

    def __call__(self, line: str) -> None:
        if len(line) > self.max_line:
            return
        for text in retrieve_literals(line):
            if text not in self.started:
                seen = time.perf_counter() - self.t0
                if self.first_at is None:
                    self.first_at = seen
                self.started.append(text)
                self.seen.append((text, seen, self.service.prefetch(text)))

    def timings(self, step: int, attempt: int, decode_end_s: float) -> list["PrefetchTiming"]:
        """One trace event per RetrieveNode line seen, times in seconds from the call's start."""
        def since(moment: float | None) -> float | None:
            return None if moment is None else round(moment - self.t0, 6)

        return [PrefetchTiming(step, attempt, text[:200], round(seen, 6), since(lookup.started),
                               since(lookup.finished), round(decode_end_s, 6), lookup.source)
                for text, seen, lookup in self.seen]


class LexicalRetriever:
    """Exact, then case- and space-insensitive, then containment match on each node's main text
    (the node text that contains, or is contained in, the query with the closest length; ties go
    to the first node). For graphs without an embedding index (tests, `glmcot exec`); the agents
    normally use glmcot.graph's embedding NodeRetriever.

    The containment search visits node texts in order of length distance from the query and stops
    at the first distance with a match, so a near match costs little; the characters it compares
    are bounded by `max_scan_chars` (past that it reports no match and says why), and queries by
    `max_query_chars`. `last_scan_chars` is the work the last search did."""

    def __init__(self, graph, *, max_query_chars: int = MAX_QUERY_CHARS, max_scan_chars: int = 20_000_000):
        self.max_query_chars = max_query_chars
        self.max_scan_chars = max_scan_chars
        self.last_scan_chars = 0
        self._exact: dict[str, str] = {}
        self._folded: dict[str, str] = {}
        from glmcot.graph.graph_source import as_source

        # every node's main text through the graph source (a store, its updated view, a database)
        for batch in as_source(graph).iter_nodes():
            for node_id, _node_type, text in batch:
                if not text:
                    continue
                self._exact.setdefault(text, node_id)
                self._folded.setdefault(self._fold(text), node_id)
        # Folded text length -> [(first-seen order, folded text, node id)], in first-seen order.
        self._by_length: dict[int, list[tuple[int, str, str]]] = {}
        for order, (folded, node_id) in enumerate(self._folded.items()):
            self._by_length.setdefault(len(folded), []).append((order, folded, node_id))
        self._lengths = sorted(self._by_length)

    @staticmethod
    def _fold(text: str) -> str:
        return " ".join(text.lower().split())

    def retrieve(self, text: str) -> str:
        if len(text) > self.max_query_chars:
            raise LookupError(f"the RetrieveNode text is {len(text)} characters; at most {self.max_query_chars}")
        if text in self._exact:
            return self._exact[text]
        folded = self._fold(text)
        if folded in self._folded:
            return self._folded[folded]
        self.last_scan_chars = 0
        if not folded:
            raise LookupError(f"no node text matches {text!r}")
        node_id = self._containment(folded)
        if node_id is None:
            if self.last_scan_chars > self.max_scan_chars:
                raise LookupError(
                    f"no node text near {text[:80]!r} within the lexical search budget ({self.max_scan_chars} characters compared); "
                    "build an embedding index with `glmcot graph embed`"
                )
            raise LookupError(f"no node text matches {text[:200]!r}")
        return node_id

    def _containment(self, folded: str) -> str | None:
        """The closest-length node text containing or contained in `folded` (first seen on ties)."""
        size = len(folded)
        lengths = self._lengths
        above = bisect.bisect_left(lengths, size)
        below = above - 1
        work = 0
        while below >= 0 or above < len(lengths):
            low_gap = size - lengths[below] if below >= 0 else None
            high_gap = lengths[above] - size if above < len(lengths) else None
            gap = min(g for g in (low_gap, high_gap) if g is not None)
            buckets = []
            if low_gap == gap:
                buckets.append(self._by_length[lengths[below]])
                below -= 1
            if high_gap == gap:
                buckets.append(self._by_length[lengths[above]])
                above += 1
            best: tuple[int, str] | None = None
            for bucket in buckets:
                for order, candidate, node_id in bucket:
                    if best is not None and order > best[0]:
                        break  # only an earlier node could win the tie
                    work += max(len(candidate), size)
                    if work > self.max_scan_chars:
                        self.last_scan_chars = work
                        return None
                    shorter, longer = (candidate, folded) if len(candidate) <= size else (folded, candidate)
                    if shorter in longer:
                        if best is None or order < best[0]:
                            best = (order, node_id)
                        break  # later entries of this bucket come later in first-seen order
            if best is not None:
                self.last_scan_chars = work
                return best[1]
        self.last_scan_chars = work
        return None


def make_resolver(service: RetrievalService) -> Callable[[str], str]:
    return service.resolve


class TimedResolver:
    """RetrieveNode resolution that adds up its own time (a question's retrieval time)."""

    def __init__(self, resolve: Callable[[str], str]) -> None:
        self._resolve = resolve
        self.seconds = 0.0

    def __call__(self, text: str) -> str:
        started = time.perf_counter()
        try:
            return self._resolve(text)
        finally:
            self.seconds += time.perf_counter() - started
