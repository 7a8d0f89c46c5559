"""glmcot inside agent frameworks: a retriever (question -> vertex-chunk documents with node ids
and scores) and a tool (question -> the agents' answer with its steps) for LangChain
(`glmcot.integrations.langchain`, `pip install 'glmcot[langchain]'`) and LlamaIndex
(`glmcot.integrations.llamaindex`, `pip install 'glmcot[llamaindex]'`), over a running
`glmcot serve` (`HttpGraph`) or a system built in this process (`LocalGraph`)."""

from glmcot.integrations.client import GlmcotError, GraphAnswer, GraphDocument, HttpGraph, LocalGraph

__all__ = ["GlmcotError", "GraphAnswer", "GraphDocument", "HttpGraph", "LocalGraph"]
