"""Gold plans through the real primitives and the real vector retrieval (MiniLM + FAISS).

Retrieval uses each question's surface text, so near-duplicate names make a few RetrieveNode
calls land on the wrong node, as they would for a model: the share that still reproduce the gold
answer is reported per template (run with -s to see the table) and must stay high."""

from __future__ import annotations

import pytest

from glmcot.data.replay import prefetch, replay
from glmcot.data.schemas import DOMAINS
from glmcot.data.synth import build_graph
from glmcot.data.synth.generate import make_questions

# Smaller than tiny so that embedding every node stays quick on two cores.
UNITS = {"dblp": 160, "amazon": 220, "goodreads": 160, "biomedical": 350, "legal": 110}


@pytest.mark.parametrize("domain", DOMAINS)
def test_plan_replay_with_vector_retrieval(domain, embedder, tmp_path):
    from glmcot.graph.tools.primitives import GraphTools
    from glmcot.graph.index.retrieval import NodeRetriever, build_node_index
    from glmcot.graph.storage.store import Graph

    graph = build_graph(domain, seed=0, units=UNITS[domain])
    records = make_questions(graph, seed=0, per_template=3)
    graph.write_store(tmp_path / "graph")
    store = Graph.open(tmp_path / "graph")
    build_node_index(store, embedder)
    retriever = NodeRetriever.open(store, embedder=embedder)
    assert prefetch(retriever, records) > 0
    report = replay(records, GraphTools(store, retriever))
    print(f"\n{domain}: {report.correct}/{report.total} gold plans reproduce the gold answer")
    for name, t in report.templates.items():
        print(f"  {name:<16} {t.glm_correct}/{t.total}")
    glm_misses = [f for f in report.failures if f["stage"] == "glm"]
    assert len(glm_misses) == report.total - report.correct
    assert report.total >= 3 * len(report.templates)
    assert report.correct >= 0.8 * report.total
