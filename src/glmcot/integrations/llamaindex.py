"""LlamaIndex: `GlmcotRetriever` (a BaseRetriever: vertex chunks as TextNodes with node ids and
scores) and `glmcot_tool` (a FunctionTool: the answer and its steps as content, the
`GraphAnswer` as raw output). `pip install 'glmcot[llamaindex]'`.

    graph = HttpGraph("http://127.0.0.1:8000", "dblp", api_key="...")   # or LocalGraph(system, "dblp")
    nodes = GlmcotRetriever(graph, k=4).retrieve("Fast Graph Sampling")
    tool = glmcot_tool(graph)          # an agent's tools=[tool]
"""

from __future__ import annotations

try:
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from llama_index.core.tools import FunctionTool
except ImportError as error:  # pragma: no cover - depends on the extra
    raise ImportError("glmcot.integrations.llamaindex needs llama-index-core: pip install 'glmcot[llamaindex]'") from error

from glmcot.integrations.client import TOOL_DESCRIPTION, Graph, GraphAnswer, GraphDocument


def to_node(document: GraphDocument) -> NodeWithScore:
    node = TextNode(id_=document.node_id, text=document.text,
                    metadata={"node_id": document.node_id, "node_type": document.node_type, "graph": document.graph})
    return NodeWithScore(node=node, score=document.score)


class GlmcotRetriever(BaseRetriever):
    """The `k` nodes whose text best matches the query, as scored TextNodes of their vertex chunks."""

    def __init__(self, graph: Graph, k: int = 4, **kwargs) -> None:
        if not 1 <= k <= 50:
            raise ValueError("k must be between 1 and 50")
        self.graph = graph
        self.k = k
        super().__init__(**kwargs)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [to_node(document) for document in self.graph.search(query_bundle.query_str, self.k)]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [to_node(document) for document in await self.graph.asearch(query_bundle.query_str, self.k)]


def glmcot_tool(graph: Graph, *, name: str = "ask_graph", description: str | None = None) -> FunctionTool:
    """A tool answering a question over `graph`; its output's content is the answer and its steps,
    its raw_output the GraphAnswer (steps, vertex chunks, usage)."""

    def ask_graph(question: str) -> GraphAnswer:
        """Answers a question over the knowledge graph."""
        return graph.ask(question)

    async def aask_graph(question: str) -> GraphAnswer:
        """Answers a question over the knowledge graph."""
        return await graph.aask(question)

    return FunctionTool.from_defaults(fn=ask_graph, async_fn=aask_graph, name=name,
                                      description=description or TOOL_DESCRIPTION.format(graph=graph.name,
                                                                                         method=graph.method))


__all__ = ["GlmcotRetriever", "glmcot_tool", "to_node"]
