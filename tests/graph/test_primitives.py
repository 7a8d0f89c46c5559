import pytest

from glmcot.graph.tools.primitives import (
    PRIMITIVES,
    FeatureNotFound,
    GraphToolError,
    GraphTools,
    NeighbourList,
    NodeNotFound,
    RelationNotFound,
    RetrievalUnavailable,
)


class FixedRetriever:
    def retrieve(self, text: str) -> str:
        return {"graph chain of thought": "p1"}.get(text.lower(), "a1")


def test_primitives_return_plain_values(tiny):
    tools = GraphTools(tiny, retriever=FixedRetriever())
    assert tools.RetrieveNode("Graph Chain of Thought") == "p1"
    assert tools.NodeFeature("p1", "title") == "Graph Chain of Thought"
    assert tools.NodeFeature("p1", "year") == 2024
    assert tools.NeighbourCheck("p3", "author") == ["a1", "a2", "a3"]
    assert tools.NodeDegree("a1", "paper") == 3
    assert tools.NodeInfo("p1").startswith("[node p1 | paper]\n")
    assert set(tools.functions()) == set(PRIMITIVES)
    assert tools.functions()["NodeDegree"]("p3", "author") == 3


def test_errors_list_valid_choices(tiny):
    tools = GraphTools(tiny)
    with pytest.raises(NodeNotFound, match="no such node: 'p9'"):
        tools.NodeFeature("p9", "title")
    with pytest.raises(FeatureNotFound, match="author features: name, organization"):
        tools.NodeFeature("a1", "title")
    with pytest.raises(RelationNotFound, match="author relations: paper"):
        tools.NeighbourCheck("a1", "author")
    with pytest.raises(RelationNotFound, match="venue relations: paper"):
        tools.NodeDegree("pub_1", "cited_by")
    with pytest.raises(GraphToolError, match="got a list of 2; call it once per id"):
        tools.NodeFeature(["p1", "p2"], "title")
    with pytest.raises(GraphToolError, match="feature name string"):
        tools.NodeFeature("p1", 3)
    with pytest.raises(RetrievalUnavailable, match="glmcot graph embed"):
        tools.RetrieveNode("anything")
    assert issubclass(RetrievalUnavailable, GraphToolError)


def test_neighbour_bound_notes_omitted(tiny):
    tools = GraphTools(tiny, neighbour_limit=2)
    result = tools.NeighbourCheck("a1", "paper")
    assert isinstance(result, NeighbourList) and isinstance(result, list)
    assert list(result) == ["p1", "p2"] and result.total == 3 and result.omitted == 1
    assert str(result) == "['p1', 'p2'] (1 more of 3 left out; NodeDegree gives the count)"
    unbounded = GraphTools(tiny, neighbour_limit=None).NeighbourCheck("a1", "paper")
    assert str(unbounded) == "['p1', 'p2', 'p3']"
    with pytest.raises(ValueError):
        GraphTools(tiny, neighbour_limit=0)


def test_touched_records_subjects_in_first_touch_order(tiny):
    tools = GraphTools(tiny, retriever=FixedRetriever())
    tools.RetrieveNode("graph chain of thought")
    tools.NeighbourCheck("p1", "author")
    tools.NodeFeature("a2", "name")
    tools.NodeDegree("p1", "author")
    with pytest.raises(NodeNotFound):
        tools.NodeInfo("nope")
    assert tools.touched == ["p1", "a2"]
    tools.reset_touched()
    assert tools.touched == []


def test_numeric_ids_are_accepted(tmp_path):
    from glmcot.graph.storage.store import Graph
    from glmcot.graph.storage.writer import StoreWriter

    with StoreWriter(tmp_path / "g") as writer:
        writer.add_nodes("book", ["21366268"], {"title": ["A Book"]})
    tools = GraphTools(Graph.open(tmp_path / "g"))
    assert tools.NodeFeature(21366268, "title") == "A Book"
