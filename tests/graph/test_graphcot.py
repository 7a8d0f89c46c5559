from glmcot.graph.tools.graphcot import INVALID_ACTION, MISSING_KEY, NO_MATCH, GraphCoTObserver


class FixedRetriever:
    def retrieve(self, text):
        if text == "fail":
            raise RuntimeError("index down")
        return "p1"


def test_observation_sentences(tiny):
    observer = GraphCoTObserver(tiny, FixedRetriever())
    assert observer.observe("RetrieveNode", ["Graph Chain of Thought"]) == "The ID of this retrieval target node is p1."
    assert observer.observe("NodeFeature", ["p1", "title"]) == "The title feature of p1 are: Graph Chain of Thought. "
    assert observer.observe("NodeFeature", ["p1", "keywords"]) == "The keywords feature of p1 are: ['graphs', 'llm']. "
    assert observer.observe("NodeFeature", ["'p1'", " year"]) == "The year feature of p1 are: 2024. "
    assert observer.observe("NeighbourCheck", ["a1", "paper"]) == "The paper neighbors of a1 are: ['p1', 'p2', 'p3']. "
    assert observer.observe("NodeDegree", ["a1", "paper"]) == "The paper neighbor node degree of a1 are: 3. "


def test_error_sentences(tiny):
    observer = GraphCoTObserver(tiny, FixedRetriever())
    assert observer.observe("RetrieveNode", ["fail"]) == NO_MATCH
    assert GraphCoTObserver(tiny).observe("RetrieveNode", ["x"]) == NO_MATCH
    assert observer.observe("NodeFeature", ["p9", "title"]) == MISSING_KEY
    assert observer.observe("NodeFeature", ["p1", "abstract"]) == MISSING_KEY
    assert observer.observe("NodeFeature", ["p4", "year"]) == MISSING_KEY  # absent on this node
    assert observer.observe("NeighbourCheck", ["p1", "writer"]) == MISSING_KEY
    assert "takes two values" in observer.observe("NodeFeature", ["p1"])
    assert "neighbor type" in observer.observe("NodeDegree", ["p1", "author", "x"])
    assert observer.observe("Search", ["x"]) == INVALID_ACTION


def test_neighbour_lists_are_never_cut(tmp_path):
    import numpy as np

    from glmcot.graph.storage.store import Graph
    from glmcot.graph.storage.writer import StoreWriter

    ids = [f"n{i}" for i in range(120)]
    with StoreWriter(tmp_path / "g") as writer:
        writer.add_nodes("n", ids, {})
        writer.add_edges("n", "r", np.zeros(119, dtype=np.int64), np.arange(1, 120))
    sentence = GraphCoTObserver(Graph.open(tmp_path / "g")).observe("NeighbourCheck", ["n0", "r"])
    assert sentence == f"The r neighbors of n0 are: {ids[1:]}. "
