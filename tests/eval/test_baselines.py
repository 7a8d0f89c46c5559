from pathlib import Path

import numpy as np
import pytest

from glmcot.eval.baselines import Baseline, ego_graph_lines, node_record, truncate_lines
from glmcot.graph.storage.store import Graph
from glmcot.graph.storage.writer import StoreWriter
from glmcot.llm import BackendSpec
from glmcot.system import make_backend


@pytest.fixture
def tiny_graph(tmp_path: Path) -> Graph:
    with StoreWriter(tmp_path / "g") as w:
        w.add_nodes("paper", ["p1", "p2"], {"title": ["Graph Agents at Scale", "Caching for LLMs"],
                                            "year": [2024, 2023]})
        w.add_nodes("author", ["a1", "a2", "a3"], {"name": ["Ann Lee", "Bob Ray", "Cy Dee"]})
        w.add_edges("paper", "author", np.array([0, 0, 1]), np.array([2, 3, 4]))
        w.add_edges("author", "paper", np.array([2, 3, 4]), np.array([0, 0, 1]))
    return Graph.open(tmp_path / "g")


def test_ego_graph_linearises_hop_by_hop(tiny_graph):
    lines = ego_graph_lines(tiny_graph, "p1", hops=2)
    assert lines[0].startswith("paper p1:") and "title: Graph Agents at Scale." in lines[0]
    assert "p1 --author--> a1 (Ann Lee); a2 (Bob Ray)" in lines
    # second hop: the authors' papers (p1 again, listed but not expanded twice)
    assert any(line.startswith("a1 --paper--> p1") for line in lines)
    assert len(ego_graph_lines(tiny_graph, "p1", hops=0)) == 1
    assert "year: 2024." in node_record(tiny_graph, "p1")


def test_truncation_keeps_whole_lines_within_budget():
    count = lambda text: len(text.split())  # noqa: E731
    text = truncate_lines(["one two three", "four five", "six seven eight nine"], 6, count)
    assert text == "one two three\nfour five"
    assert truncate_lines(["a b c d e f g h"], 4, count) == "a b c d"


def test_graph_rag_and_base_prompts_reach_the_model(tiny_graph, table_server):
    url, table = table_server
    table.answers["Who wrote Graph Agents at Scale?"] = "Ann Lee, Bob Ray"
    backend = make_backend(BackendSpec.openai(url, model="table-model"))
    retrieve = lambda text, k: ["p1", "p2"][:k]  # noqa: E731 - the retriever is tested in glmcot.graph
    graph_rag = Baseline("graph-rag", tiny_graph, backend, retrieve, token_budget=200, count_tokens=lambda t: len(t.split()))
    result = graph_rag.answer("Who wrote Graph Agents at Scale?", qid="0")
    assert result.answer == "Ann Lee, Bob Ray" and result.llm_calls == 1 and result.failure is None
    prompt = table.calls[-1]
    assert "a1 (Ann Lee); a2 (Bob Ray)" in prompt and "Answer:" in prompt and "best guess" in prompt
    text_rag = Baseline("text-rag", tiny_graph, backend, retrieve, top_k=2, count_tokens=lambda t: len(t.split()))
    text_rag.answer("Who wrote Graph Agents at Scale?")
    assert "Caching for LLMs" in table.calls[-1] and "Bob Ray" not in table.calls[-1]
    base = Baseline("base", None, backend, None, count_tokens=len)
    empty = base.answer("Unknown question?")
    assert empty.answer == "I do not know"
    assert "Graph Agents" not in table.calls[-1]
    with pytest.raises(ValueError, match="needs a graph"):
        Baseline("graph-rag", None, backend, None, count_tokens=len)
