"""GLM over the graph's real RetrieveNode: MiniLM embeddings + FAISS (session-scoped model)."""

import pytest

from glmcot.agents import AgentConfig, AgentContext, GLMAgent, ScriptedBackend
from glmcot.agents.context import open_retriever

from .fixtures import build_graph


@pytest.fixture(scope="session")
def embedded_graph_dir(tmp_path_factory):
    pytest.importorskip("faiss")
    from glmcot.graph.index.retrieval import MiniLMEmbedder, build_node_index
    from glmcot.graph.storage.store import Graph

    directory = build_graph(tmp_path_factory.mktemp("embedded") / "store")
    build_node_index(Graph.open(directory), MiniLMEmbedder())
    return directory


def test_auto_uses_the_embedding_index_and_answers(embedded_graph_dir, records):
    with AgentContext(embedded_graph_dir, retriever="auto", workers=1, domain="dblp") as context:
        assert type(context.retrieval.retriever).__name__ == "NodeRetriever"
        backend = ScriptedBackend(records, code_runner=context.run_code)
        agent = GLMAgent(backend, context, AgentConfig(domain="dblp"))
        for record in records:
            result = agent.answer(record["question"], record["qid"])
            assert result.answer == record["answer"], (record["qid"], result.failure_detail)
        # Paraphrased surface text still finds the node (the cache keys on the text).
        assert context.retrieval.resolve("sparse attention long graphs") == "p1"
        assert context.retrieval.stats["cache_hits"] > 0


def test_embedding_retriever_missing_is_a_clear_error(graph_dir, graph):
    from glmcot.graph.errors import RetrievalUnavailable

    with pytest.raises(RetrievalUnavailable, match="glmcot graph embed"):
        open_retriever("embedding", graph_dir, graph)
    assert type(open_retriever("auto", graph_dir, graph)).__name__ == "LexicalRetriever"
