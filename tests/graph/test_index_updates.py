import numpy as np
import pytest

from glmcot.graph.updates.delta import ApplyReport, parse_operation
from glmcot.graph.index.index_updates import UpdatedNodeRetriever, drop_affected
from glmcot.graph.index.retrieval import NodeRetriever, RetrieveNodeCache, build_node_index
from glmcot.graph.storage.store import Graph
from glmcot.graph.updates.versions import apply_update, compact
from glmcot.graph.storage.writer import StoreWriter

TITLES = ["Attention Is All You Need", "Deep Residual Learning for Image Recognition",
          "Playing Atari with Deep Reinforcement Learning", "Adam: A Method for Stochastic Optimization",
          "MapReduce: Simplified Data Processing on Large Clusters", "Bitcoin: A Peer-to-Peer Electronic Cash System"]


def ops(*rows):
    return [parse_operation(row, f"op {number}") for number, row in enumerate(rows, 1)]


@pytest.fixture
def indexed(tmp_path, embedder):
    store = tmp_path / "store"
    with StoreWriter(store) as writer:
        writer.add_nodes("paper", [f"p{i}" for i in range(len(TITLES))], {"title": TITLES})
        writer.add_nodes("author", ["a0"], {"name": ["Ashish Vaswani"]})
        writer.add_edges("paper", "author", np.array([0]), np.array([len(TITLES)]))
    build_node_index(Graph.open(store), embedder)
    return store


def test_index_follows_updates_without_reembedding(indexed, embedder):
    result = apply_update(indexed, ops(
        {"op": "upsert_node", "id": "p9", "type": "paper", "features": {"title": "Underwater Basket Weaving for Beginners"}},
        {"op": "upsert_node", "id": "p1", "features": {"title": "A Field Guide to Alpine Mushrooms"}},
        {"op": "upsert_node", "id": "p2", "features": {"year": 2013}},  # not its text: nothing to embed
        {"op": "delete_node", "id": "p4"},
    ), embedder=embedder)
    assert result.embedded == 2
    retriever = NodeRetriever.open(Graph.open(indexed), embedder=embedder)
    assert isinstance(retriever, UpdatedNodeRetriever)
    assert retriever.retrieve("Underwater Basket Weaving for Beginners") == "p9"
    assert retriever.retrieve("A Field Guide to Alpine Mushrooms") == "p1"
    assert retriever.retrieve("Deep Residual Learning for Image Recognition") != "p1"  # the old text is gone
    assert retriever.retrieve("MapReduce: Simplified Data Processing on Large Clusters") != "p4"
    assert retriever.retrieve("Playing Atari with Deep Reinforcement Learning") == "p2"
    assert [hit for hit, _ in retriever.search("Alpine Mushrooms", k=2, node_type="paper")][0] == "p1"

    version = compact(indexed)
    compacted = Graph.open(indexed)
    assert compacted.version == version and compacted.directory.name == f"v{version:06d}"
    plain = NodeRetriever.open(compacted, embedder=embedder)
    assert not isinstance(plain, UpdatedNodeRetriever)  # a fresh base index, built from stored vectors
    assert plain.retrieve("Underwater Basket Weaving for Beginners") == "p9"
    assert plain.retrieve("A Field Guide to Alpine Mushrooms") == "p1"


def test_retrieve_cache_entries_that_an_update_can_change_are_dropped():
    cache = RetrieveNodeCache()
    cache.put("heat", "m1")
    cache.put("alien", "m2")
    assert drop_affected(cache, ApplyReport(deleted=["m2"])) == 1
    assert cache.get("heat") == "m1" and cache.get("alien") is None
    assert drop_affected(cache, ApplyReport()) == 0 and len(cache) == 1  # edges or other features: nothing
    assert drop_affected(cache, ApplyReport(text_changed=["m9"])) == 1 and len(cache) == 0
