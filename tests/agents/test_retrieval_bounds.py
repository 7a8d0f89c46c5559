"""RetrieveNode in the parent: query length, cache size (entries and characters), prefetches in
flight and the lexical fallback's work are bounded."""

import random
import threading
import time

import pytest

from glmcot.agents.retrieval import LexicalRetriever, PipelineHook, RetrievalService


class Echo:
    def __init__(self):
        self.calls = []

    def retrieve(self, text):
        self.calls.append(text)
        return "n" + str(len(text))


class TextGraph:
    """The part of a GraphSource that LexicalRetriever reads: every node's main text."""

    def __init__(self, texts):
        self.texts = texts

    def iter_nodes(self, batch=4096):
        rows = [(f"n{index}", "t", text) for index, text in enumerate(self.texts)]
        for first in range(0, len(rows), batch):
            yield rows[first : first + batch]


def test_long_queries_are_refused_with_a_clear_error():
    inner = Echo()
    service = RetrievalService(inner)
    try:
        with pytest.raises(LookupError, match="20000000 characters; at most 2000"):
            service.resolve("x" * 20_000_000)
        service.prefetch("x" * 5000)  # skipped quietly
        assert inner.calls == []
        assert service.resolve("y" * 2000) == "n2000"
        assert service.cached_chars == 2000 + len("n2000")
    finally:
        service.close()


def test_cache_is_bounded_by_entries_and_characters():
    service = RetrievalService(Echo(), cache_size=50, cache_chars=20_000)
    try:
        for i in range(300):
            service.resolve(f"{i} " + "k" * 1500)
            assert len(service._cache) <= 50
            assert service.cached_chars <= 20_000
        assert 0 < len(service._cache) <= 20_000 // 1500
        # Short keys: the entry bound applies.
        for i in range(300):
            service.resolve(str(i))
        assert len(service._cache) == 50
        assert service.cached_chars == sum(len(k) + len(v) for k, v in service._cache.items())
    finally:
        service.close()


def test_prefetches_in_flight_are_bounded():
    release = threading.Event()

    class Stuck:
        def retrieve(self, text):
            release.wait(30)
            return "n"

    service = RetrievalService(Stuck(), max_inflight=5, threads=1)
    try:
        for i in range(100):
            service.prefetch(f"q{i}")
        assert len(service._inflight) == 5
    finally:
        release.set()
        service.close()


def test_pipeline_hook_skips_lines_longer_than_a_snippet():
    inner = Echo()
    service = RetrievalService(inner)
    try:
        hook = PipelineHook(service)
        hook('RetrieveNode("' * 20_000 + '")')
        hook('p = RetrieveNode("Fast Graph Sampling")')
        assert hook.started == ["Fast Graph Sampling"]
    finally:
        service.close()


def test_lexical_containment_is_the_closest_length_match():
    texts = ["graph", "fast graph sampling", "graph sampling", "sampling of large graphs", "x"]
    retriever = LexicalRetriever(TextGraph(texts))
    assert retriever.retrieve("Graph Sampling") == "n2"  # folded exact
    assert retriever.retrieve("graph samp") == "n2"  # contained in, closest length
    assert retriever.retrieve("a graph sampling method") == "n2"  # contains it
    with pytest.raises(LookupError, match="no node text matches"):
        retriever.retrieve("zzz")


def test_lexical_containment_agrees_with_a_full_scan():
    def full_scan(retriever, text):
        folded = retriever._fold(text)
        if text in retriever._exact:
            return retriever._exact[text]
        if folded in retriever._folded:
            return retriever._folded[folded]
        best = None
        for candidate, node_id in retriever._folded.items():
            if folded and (folded in candidate or candidate in folded):
                if best is None or abs(len(candidate) - len(folded)) < best[0]:
                    best = (abs(len(candidate) - len(folded)), node_id)
        return None if best is None else best[1]

    generator = random.Random(5)
    words = ["ab", "a", "b", "ba", "abc", " ", "c", "A"]
    for _ in range(1000):
        texts = ["".join(generator.choice(words) for _ in range(generator.randint(0, 5))) for _ in range(generator.randint(1, 12))]
        retriever = LexicalRetriever(TextGraph(texts))
        for _ in range(5):
            query = "".join(generator.choice(words) for _ in range(generator.randint(0, 6)))
            try:
                found = retriever.retrieve(query)
            except LookupError:
                found = None
            assert found == full_scan(retriever, query), (texts, query)


def test_lexical_fallback_work_is_bounded():
    texts = [f"title number {i} of the collection" for i in range(20_000)]
    retriever = LexicalRetriever(TextGraph(texts), max_scan_chars=100_000)
    query = "q" * 2000
    with pytest.raises(LookupError, match="lexical search budget"):
        retriever.retrieve(query)
    assert retriever.last_scan_chars <= 100_000 + 2000  # stops within one comparison of the budget
    with pytest.raises(LookupError, match="at most 2000"):
        retriever.retrieve("q" * 2001)
    # A near match stops at its length distance: the 900 texts of the query's own length and the
    # first 8 one shorter (n10-n17) are compared, not all 20,000 (about 700,000 characters).
    assert retriever.retrieve("title number 17 of the collection!") == "n17"
    assert retriever.last_scan_chars == 900 * 34 + 8 * 34


def test_lookups_served_by_a_prefetch_are_counted_apart_from_cache_hits():
    release = threading.Event()

    class Gated:
        def retrieve(self, text):
            if text == "slow":
                release.wait(30)
            return "node-" + text

    service = RetrievalService(Gated(), threads=2)
    try:
        service.prefetch("fast")
        service.prefetch("slow")
        deadline = time.monotonic() + 10
        while "fast" not in service._cache and time.monotonic() < deadline:
            time.sleep(0.01)
        assert service.resolve("fast") == "node-fast"  # the prefetched search had finished
        looking = threading.Thread(target=service.resolve, args=("slow",))
        looking.start()  # meets the prefetched search still running
        deadline = time.monotonic() + 10
        while service.stats["lookups"] < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        release.set()
        looking.join(10)
        assert service.resolve("fast") == "node-fast"  # now an ordinary cache hit
        assert {k: service.stats[k] for k in ("prefetches", "prefetch_ready", "prefetch_hits", "cache_hits")} == {
            "prefetches": 2, "prefetch_ready": 1, "prefetch_hits": 1, "cache_hits": 1}
    finally:
        release.set()
        service.close()


def test_the_pipeline_hook_times_each_line_its_search_and_the_end_of_decoding():
    release = threading.Event()

    class Gated:
        def retrieve(self, text):
            release.wait(30)
            return "node-" + text

    service = RetrievalService(Gated(), threads=2)
    try:
        hook = PipelineHook(service)
        hook('p = RetrieveNode("A Paper")')
        hook('q = RetrieveNode("A Paper")')   # the same text again: not started twice
        time.sleep(0.05)
        release.set()
        assert service.resolve("A Paper") == "node-A Paper"
        decode_end = time.perf_counter() - hook.t0
        [timing] = hook.timings(2, 1, decode_end)
        assert (timing.step, timing.attempt, timing.text, timing.source) == (2, 1, "A Paper", "search")
        assert 0 <= timing.seen_s <= timing.search_start_s <= timing.search_end_s <= timing.decode_end_s
        assert timing.search_end_s - timing.search_start_s >= 0.04   # it waited for the gate
        again = PipelineHook(service)
        again('RetrieveNode("A Paper")')   # now the cache answers: no search ran
        [cached] = again.timings(0, 0, 0.5)
        assert cached.source == "cache" and cached.search_start_s is None and cached.search_end_s is None
        skipped = PipelineHook(service)
        skipped(f'RetrieveNode("{"x" * 5000}")')
        assert skipped.timings(0, 0, 0.1)[0].source == "skipped"
    finally:
        release.set()
        service.close()
