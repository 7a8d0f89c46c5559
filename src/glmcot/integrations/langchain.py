"""LangChain: `GlmcotRetriever` (a BaseRetriever: vertex chunks as Documents, node id and score
in the metadata) and `glmcot_tool` (a StructuredTool: the question's answer as its content, the
whole `GraphAnswer` as its artifact). `pip install 'glmcot[langchain]'`.

    graph = HttpGraph("http://127.0.0.1:8000", "dblp", api_key="...")   # or LocalGraph(system, "dblp")
    docs = GlmcotRetriever(graph=graph, k=4).invoke("Fast Graph Sampling")
    tool = glmcot_tool(graph)          # hand it to an agent: bind_tools([tool]) / create_agent(tools=[tool])
"""

from __future__ import annotations

from typing import Any

try:
    from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.tools import StructuredTool
except ImportError as error:  # pragma: no cover - depends on the extra
    raise ImportError("glmcot.integrations.langchain needs langchain-core: pip install 'glmcot[langchain]'") from error
from pydantic import BaseModel, ConfigDict, Field

from glmcot.integrations.client import TOOL_DESCRIPTION, Graph, GraphAnswer, GraphDocument

def to_document(document: GraphDocument) -> Document:
    return Document(id=document.node_id, page_content=document.text,
                    metadata={"node_id": document.node_id, "node_type": document.node_type, "score": document.score,
                              "graph": document.graph, "source": f"glmcot://graphs/{document.graph}/nodes/{document.node_id}"})


class GlmcotRetriever(BaseRetriever):
    """The `k` nodes whose text best matches the query, as Documents of their vertex chunks."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    graph: Any = Field(description="An HttpGraph or LocalGraph (glmcot.integrations).")
    k: int = Field(4, ge=1, le=50)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [to_document(document) for document in self.graph.search(query, self.k)]

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun) -> list[Document]:
        return [to_document(document) for document in await self.graph.asearch(query, self.k)]


class AskInput(BaseModel):
    question: str = Field(description="The question, in natural language.")


def glmcot_tool(graph: Graph, *, name: str = "ask_graph", description: str | None = None) -> StructuredTool:
    """A tool answering a question over `graph`: content = the answer and its steps (what the
    calling model reads), artifact = the GraphAnswer (steps, vertex chunks, usage)."""

    def ask(question: str) -> tuple[str, GraphAnswer]:
        answer = graph.ask(question)
        return str(answer), answer

    async def aask(question: str) -> tuple[str, GraphAnswer]:
        answer = await graph.aask(question)
        return str(answer), answer

    return StructuredTool.from_function(func=ask, coroutine=aask, name=name, args_schema=AskInput,
                                        description=description or TOOL_DESCRIPTION.format(graph=graph.name,
                                                                                           method=graph.method),
                                        response_format="content_and_artifact")


__all__ = ["GlmcotRetriever", "glmcot_tool", "to_document"]
