"""A tiny dataset directory for the serve tests: graph store, meta.json, questions.jsonl with
gold GLM and Graph-CoT plans (docs/contracts.md format)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from glmcot.graph.storage.writer import StoreWriter

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


# Hostile text for the trace page's tests: a paper whose title is markup with script in it, an
# abstract of a quarter million characters, and a question carrying a script tag, with a gold plan.
HOSTILE_TITLE = '<img src=x onerror="window.__pwned=1"><b>Bold</b> Graphs</script>'
HUGE_ABSTRACT = ("<script>window.__pwned=2</script> long text " * 6000)[:250_000]
HOSTILE_QUESTION = ('Who wrote "<img src=x onerror=\\"window.__pwned=3\\">'
                    '<b>Bold</b> Graphs"? <script>window.__pwned=4</script>')
HOSTILE = {
    "qid": "h-0", "domain": "dblp", "template": "dblp/0", "level": "easy", "deterministic": True,
    "question": HOSTILE_QUESTION, "answer": "Omar Diaz",
    "plan": {"glm": [{"missing": "the authors of the bold paper",
                      "code": f'p = RetrieveNode({HOSTILE_TITLE!r})\n'
                              'print(", ".join(NodeFeature(a, "name") for a in NeighbourCheck(p, "author")))'}],
             "graphcot": [{"thought": "I need the paper.", "action": f"RetrieveNode[{HOSTILE_TITLE}]"},
                          {"thought": "Done.", "action": "Finish[$answer]"}]}}


def build_dataset(root: Path, hostile: bool = False) -> Path:
    """Writes root/graph (store), root/meta.json and root/questions.jsonl; returns root.
    `hostile`: also the paper p4 (HOSTILE_TITLE, HUGE_ABSTRACT, written by Omar Diaz, citing p1)
    and the HOSTILE question."""
    papers = [*PAPERS, ("p4", HOSTILE_TITLE, 2022)] if hostile else PAPERS
    writes = [*WRITES, ("p4", "a2")] if hostile else WRITES
    cites = [*CITES, ("p4", "p1")] if hostile else CITES
    questions = [*QUESTIONS, HOSTILE] if hostile else QUESTIONS
    features = {"title": [p[1] for p in papers], "year": [p[2] for p in papers]}
    if hostile:
        features["abstract"] = ["short"] * len(PAPERS) + [HUGE_ABSTRACT]
    order = [p[0] for p in papers] + [a[0] for a in AUTHORS]
    index = {node: position for position, node in enumerate(order)}
    with StoreWriter(root / "graph") as writer:
        writer.add_nodes("paper", [p[0] for p in papers], features)
        writer.add_nodes("author", [a[0] for a in AUTHORS], {"name": [a[1] for a in AUTHORS]})

        def edges(src_type, relation, pairs):
            writer.add_edges(src_type, relation,
                             np.array([index[s] for s, _ in pairs], dtype=np.int64),
                             np.array([index[d] for _, d in pairs], dtype=np.int64))

        edges("paper", "author", writes)
        edges("author", "paper", [(a, p) for p, a in writes])
        edges("paper", "reference", cites)
        edges("paper", "cited_by", [(d, s) for s, d in cites])
        writer.set_text_key("paper", "title")
        writer.set_text_key("author", "name")
    (root / "meta.json").write_text(json.dumps({"domain": "dblp", "scale": "test"}))
    with open(root / "questions.jsonl", "w", encoding="utf-8") as handle:
        for record in questions:
            handle.write(json.dumps(record) + "\n")
    # The fixture is only useful if the store holds exactly what was written.
    from glmcot.graph.storage.store import Graph

    graph = Graph.open(root / "graph")
    assert graph.num_nodes == len(order)
    assert graph.num_edges == 2 * (len(writes) + len(cites))
    return root
