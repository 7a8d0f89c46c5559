"""LangChain and LlamaIndex with the real packages: the retrievers and tools over a running
`glmcot serve` (HttpGraph) and over a system built in this process (LocalGraph), through their
own invoke / retrieve / tool-call paths, sync and async; `await agent.aanswer(...)`."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import ToolMessage
from llama_index.core.schema import NodeWithScore, QueryBundle

from glmcot.integrations import GlmcotError, HttpGraph, LocalGraph
from glmcot.integrations import langchain as lc
from glmcot.integrations import llamaindex as li

from .conftest import BY_QID, KEYS

pytestmark = pytest.mark.slow
RECORD = BY_QID["s-1"]   # needs reasoning: two A-Agent rounds


@pytest.fixture(scope="module")
def local(dataset):
    from glmcot.llm import BackendSpec
    from glmcot.system import SystemConfig, build_system

    config = SystemConfig(backend=BackendSpec.parse("scripted"), graphs={"dblp": dataset}, retriever="lexical",
                          scripted_questions=dataset / "questions.jsonl")
    with build_system(config) as system:
        yield system


@pytest.fixture(params=["http", "local"])
def graph(request, served, local):
    if request.param == "http":
        return HttpGraph(served, "dblp", api_key=KEYS["reader"])
    return LocalGraph(local, "dblp")


def test_langchain_retriever(graph):
    documents = lc.GlmcotRetriever(graph=graph, k=3).invoke("Sparse Attention for Long Graphs")
    assert [d.id for d in documents] == ["p1"]
    assert documents[0].metadata == {"node_id": "p1", "node_type": "paper", "score": 1.0, "graph": "dblp",
                                     "source": "glmcot://graphs/dblp/nodes/p1"}
    assert "title: Sparse Attention for Long Graphs" in documents[0].page_content
    again = asyncio.run(lc.GlmcotRetriever(graph=graph).ainvoke("Omar Diaz"))
    assert [d.id for d in again] == ["a2"]


def test_langchain_tool_call(graph):
    tool = lc.glmcot_tool(graph)
    assert tool.name == "ask_graph" and set(tool.args) == {"question"}
    message = tool.invoke({"type": "tool_call", "id": "call-1", "name": "ask_graph",
                           "args": {"question": RECORD["question"]}})   # what an agent's tool node sends
    assert isinstance(message, ToolMessage) and message.tool_call_id == "call-1"
    assert message.content.startswith(RECORD["answer"] + "\n\nHow glmcot found it:")
    answer = message.artifact
    assert answer.answer == RECORD["answer"] and answer.llm_calls >= 3
    assert {chunk.node_id for chunk in answer.chunks} >= {"p3", "a1", "a3"}
    text = asyncio.run(tool.ainvoke({"question": BY_QID["s-0"]["question"]}))
    assert text.startswith(BY_QID["s-0"]["answer"])


def test_llamaindex_retriever_and_tool(graph):
    nodes = li.GlmcotRetriever(graph, k=2).retrieve("Learning to Rank Nodes")
    assert isinstance(nodes[0], NodeWithScore) and nodes[0].node.node_id == "p2" and nodes[0].score == 1.0
    assert nodes[0].node.metadata["node_type"] == "paper"
    later = asyncio.run(li.GlmcotRetriever(graph).aretrieve(QueryBundle("Lena Weiss")))
    assert later[0].node.node_id == "a3"
    tool = li.glmcot_tool(graph)
    assert tool.metadata.name == "ask_graph"
    output = tool.call(question=RECORD["question"])
    assert output.raw_output.answer == RECORD["answer"] and output.content.startswith(RECORD["answer"])
    output = asyncio.run(tool.acall(question=RECORD["question"]))
    assert output.raw_output.steps and output.raw_output.chunks


def test_a_refused_request_raises_with_the_servers_message(served):
    hidden = HttpGraph(served, "secret", api_key=KEYS["reader"])
    with pytest.raises(GlmcotError, match="HTTP 404") as error:
        lc.GlmcotRetriever(graph=hidden).invoke("anything")
    assert error.value.status == 404
    with pytest.raises(GlmcotError, match="HTTP 401"):
        HttpGraph(served, "dblp", api_key="not-a-key-123").search("Omar Diaz")


def test_await_aanswer_answers_without_blocking_the_loop(local):
    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.001)
                ticks += 1

        running = asyncio.ensure_future(ticker())
        results = await asyncio.gather(*(local.agent(method).aanswer(RECORD["question"], RECORD["qid"])
                                         for method in ("glm", "graphcot")))
        running.cancel()
        return results, ticks

    results, ticks = asyncio.run(main())
    assert [r.answer for r in results] == [RECORD["answer"]] * 2
    assert ticks > 0   # the loop ran other tasks while the agents worked
