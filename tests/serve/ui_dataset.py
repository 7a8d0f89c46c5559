"""The serve dataset plus hostile text for the trace page's tests: a paper whose title is markup
with script in it, an abstract of a quarter million characters, and a question carrying a script
tag, each with a gold plan so the scripted policy answers it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from glmcot.graph.writer import StoreWriter

from .dataset import AUTHORS, CITES, PAPERS, QUESTIONS, WRITES

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
QUESTIONS_UI = [*QUESTIONS, HOSTILE]


def build_ui_dataset(root: Path) -> Path:
    """root/graph, root/meta.json and root/questions.jsonl (the serve dataset and the hostile
    paper p4, written by Omar Diaz, citing p1)."""
    papers = [*PAPERS, ("p4", HOSTILE_TITLE, 2022)]
    writes = [*WRITES, ("p4", "a2")]
    cites = [*CITES, ("p4", "p1")]
    order = [p[0] for p in papers] + [a[0] for a in AUTHORS]
    index = {node: position for position, node in enumerate(order)}
    with StoreWriter(root / "graph") as writer:
        writer.add_nodes("paper", [p[0] for p in papers],
                         {"title": [p[1] for p in papers], "year": [p[2] for p in papers],
                          "abstract": ["short"] * len(PAPERS) + [HUGE_ABSTRACT]})
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
        for record in QUESTIONS_UI:
            handle.write(json.dumps(record) + "\n")
    return root
