"""A tiny dataset directory for the serve tests: graph store, meta.json, questions.jsonl with
gold GLM and Graph-CoT plans (docs/contracts.md format)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from glmcot.graph.writer import StoreWriter

PAPERS = [("p1", "Sparse Attention for Long Graphs", 2019),
          ("p2", "Learning to Rank Nodes", 2020),
          ("p3", "Fast Graph Sampling", 2021)]
AUTHORS = [("a1", "Ada Park"), ("a2", "Omar Diaz"), ("a3", "Lena Weiss")]
WRITES = [("p1", "a1"), ("p1", "a2"), ("p2", "a2"), ("p2", "a3"), ("p3", "a1"), ("p3", "a3")]
CITES = [("p2", "p1"), ("p3", "p1"), ("p3", "p2")]

QUESTIONS = [
    {"qid": "s-0", "domain": "dblp", "template": "dblp/0", "level": "easy",
     "deterministic": True,
     "question": 'Who are the authors of "Sparse Attention for Long Graphs"?',
     "answer": "Ada Park, Omar Diaz",
     "plan": {
         "glm": [{"missing": 'the names of the authors of "Sparse Attention for Long Graphs"',
                  "code": 'p = RetrieveNode("Sparse Attention for Long Graphs")\n'
                          'print(", ".join(NodeFeature(a, "name") for a in '
                          'NeighbourCheck(p, "author")))'}],
         "graphcot": [
             {"thought": "I need the paper node.",
              "action": "RetrieveNode[Sparse Attention for Long Graphs]"},
             {"thought": "Its authors are author neighbours.",
              "action": "NeighbourCheck[$0, author]"},
             {"thought": "I need their names.", "action": "NodeFeature[$1[*], name]"},
             {"thought": "I have the names.", "action": "Finish[$answer]"}]}},
    {"qid": "s-1", "domain": "dblp", "template": "dblp/3", "level": "medium",
     "deterministic": False,
     "question": 'Who are the co-authors of Lena Weiss on "Fast Graph Sampling"?',
     "answer": "Ada Park",
     "plan": {
         "glm": [{"missing": 'the author ids of the paper "Fast Graph Sampling"',
                  "code": 'p = RetrieveNode("Fast Graph Sampling")\n'
                          'print(", ".join(NeighbourCheck(p, "author")))'},
                 {"missing": 'the names of the authors of "Fast Graph Sampling" other than '
                             '"Lena Weiss"',
                  "code": 'p = RetrieveNode("Fast Graph Sampling")\n'
                          'names = [NodeFeature(a, "name") for a in NeighbourCheck(p, "author")]\n'
                          'print(", ".join(n for n in names if n != "Lena Weiss"))'}],
         "graphcot": [
             {"thought": "I need the paper node.", "action": "RetrieveNode[Fast Graph Sampling]"},
             {"thought": "Its authors.", "action": "NeighbourCheck[$0, author]"},
             {"thought": "Their names.", "action": "NodeFeature[$1[*], name]"},
             {"thought": "Drop Lena Weiss.", "action": "Finish[$answer]"}]}},
]


def build_dataset(root: Path) -> Path:
    """Writes root/graph (store), root/meta.json and root/questions.jsonl; returns root."""
    order = [p[0] for p in PAPERS] + [a[0] for a in AUTHORS]
    index = {node: position for position, node in enumerate(order)}
    with StoreWriter(root / "graph") as writer:
        writer.add_nodes("paper", [p[0] for p in PAPERS],
                         {"title": [p[1] for p in PAPERS], "year": [p[2] for p in PAPERS]})
        writer.add_nodes("author", [a[0] for a in AUTHORS], {"name": [a[1] for a in AUTHORS]})

        def edges(src_type, relation, pairs):
            writer.add_edges(src_type, relation,
                             np.array([index[s] for s, _ in pairs], dtype=np.int64),
                             np.array([index[d] for _, d in pairs], dtype=np.int64))

        edges("paper", "author", WRITES)
        edges("author", "paper", [(a, p) for p, a in WRITES])
        edges("paper", "reference", CITES)
        edges("paper", "cited_by", [(d, s) for s, d in CITES])
        writer.set_text_key("paper", "title")
        writer.set_text_key("author", "name")
    (root / "meta.json").write_text(json.dumps({"domain": "dblp", "scale": "test"}))
    with open(root / "questions.jsonl", "w", encoding="utf-8") as handle:
        for record in QUESTIONS:
            handle.write(json.dumps(record) + "\n")
    # The fixture is only useful if the store holds exactly what was written.
    from glmcot.graph.store import Graph

    graph = Graph.open(root / "graph")
    assert graph.num_nodes == len(order)
    assert graph.num_edges == 2 * (len(WRITES) + len(CITES))
    return root
