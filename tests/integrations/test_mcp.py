"""`glmcot mcp` with the MCP SDK's own client, over stdio (a subprocess, as an MCP host runs it)
and streamable HTTP (a real `glmcot mcp --transport http` process): every tool listed and called,
the schema resource read, and bad input: unknown tools and graphs, missing and huge arguments,
malformed messages, a key without the graph, a cancelled call (scripted policy: a system check)."""

from __future__ import annotations

import json
import sys

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from .conftest import BY_QID, KEYS, child_env

pytestmark = pytest.mark.slow
TOOLS = {"list_graphs", "graph_schema", "ask_graph", "search_nodes", "RetrieveNode", "NodeInfo", "NodeFeature",
         "NeighbourCheck", "NodeDegree"}


def run(scenario):
    anyio.run(scenario)


def stdio_client(dataset) -> Client:
    params = StdioServerParameters(command=sys.executable, env=child_env(), args=[
        "-m", "glmcot.cli", "mcp", "--graph", f"dblp={dataset}", "--scripted", str(dataset / "questions.jsonl"),
        "--retriever", "lexical", "--max-question-chars", "2000"])
    return Client(params, read_timeout_seconds=120)


def http_client(url: str, key: str | None) -> Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return Client(streamable_http_client(url + "/mcp", http_client=httpx2.AsyncClient(headers=headers, timeout=120)),
                  read_timeout_seconds=120)


def text(result) -> str:
    return result.content[0].text


async def exercise(client: Client) -> None:
    """Lists and calls every tool, and reads the schema resource."""
    assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
    graphs = await client.call_tool("list_graphs", {})
    assert not graphs.is_error and [g["name"] for g in graphs.structured_content["result"]] == ["dblp"]
    schema = await client.call_tool("graph_schema", {"graph": "dblp"})
    assert [t["name"] for t in schema.structured_content["node_types"]] == ["paper", "author"]
    record = BY_QID["s-1"]
    answer = (await client.call_tool("ask_graph", {"question": record["question"], "graph": "dblp"})).structured_content
    assert answer["answer"] == record["answer"] and answer["failure"] is None
    assert any("RetrieveNode(" in step for step in answer["steps"])
    assert {chunk["node_id"] for chunk in answer["chunks"]} >= {"p3", "a1", "a3"}
    assert answer["usage"]["llm_calls"] >= 3
    graphcot = (await client.call_tool("ask_graph", {"question": record["question"], "graph": "dblp",
                                                     "method": "graphcot"})).structured_content
    assert graphcot["answer"] == record["answer"]
    found = await client.call_tool("search_nodes", {"graph": "dblp", "query": "Fast Graph Sampling", "k": 2})
    assert [d["node_id"] for d in found.structured_content["result"]] == ["p3"]
    node = (await client.call_tool("RetrieveNode", {"graph": "dblp", "text": "Omar Diaz"})).structured_content["result"]
    assert node == "a2"
    info = await client.call_tool("NodeInfo", {"graph": "dblp", "node_id": "a2"})
    assert "name: Omar Diaz" in info.structured_content["result"]
    name = await client.call_tool("NodeFeature", {"graph": "dblp", "node_id": "p2", "feature": "year"})
    assert name.structured_content["result"] == 2020
    neighbours = await client.call_tool("NeighbourCheck", {"graph": "dblp", "node_id": "a2", "relation": "paper"})
    assert neighbours.structured_content == {"neighbours": ["p1", "p2"], "total": 2}
    degree = await client.call_tool("NodeDegree", {"graph": "dblp", "node_id": "p1", "relation": "cited_by"})
    assert degree.structured_content["result"] == 2
    resource = await client.read_resource("glmcot://graphs/dblp/schema")
    assert json.loads(resource.contents[0].text)["num_nodes"] == 6


async def bad_calls(client: Client) -> None:
    unknown_tool = await client.call_tool("DropGraph", {"graph": "dblp"})
    assert unknown_tool.is_error and "Unknown tool" in text(unknown_tool)
    unknown_graph = await client.call_tool("NodeInfo", {"graph": "nowhere", "node_id": "p1"})
    assert unknown_graph.is_error and "404" in text(unknown_graph) and "unknown graph 'nowhere'" in text(unknown_graph)
    missing = await client.call_tool("NodeFeature", {"graph": "dblp", "node_id": "p1"})
    assert missing.is_error and "feature" in text(missing)
    wrong_type = await client.call_tool("NodeDegree", {"graph": "dblp", "node_id": {"a": 1}, "relation": "x"})
    assert wrong_type.is_error
    no_relation = await client.call_tool("NodeDegree", {"graph": "dblp", "node_id": "p1", "relation": "wrote"})
    assert no_relation.is_error and "author, reference, cited_by" in text(no_relation)
    bad_method = await client.call_tool("ask_graph", {"question": "hi", "graph": "dblp", "method": "magic"})
    assert bad_method.is_error and "unknown method 'magic'" in text(bad_method)
    big_k = await client.call_tool("search_nodes", {"graph": "dblp", "query": "x", "k": 10_000})
    assert big_k.is_error and "k must be between 1 and 50" in text(big_k)
    long_text = await client.call_tool("RetrieveNode", {"graph": "dblp", "text": "x" * 5000})
    assert long_text.is_error and "at most 2000" in text(long_text)


async def cancelled_call(client: Client) -> None:
    """A call the client gives up on mid-way is cancelled; the server answers the next ones."""
    with anyio.move_on_after(0.05):
        await client.call_tool("ask_graph", {"question": BY_QID["s-1"]["question"], "graph": "dblp"})
    again = await client.call_tool("ask_graph", {"question": BY_QID["s-0"]["question"], "graph": "dblp"})
    assert again.structured_content["answer"] == BY_QID["s-0"]["answer"]


def test_stdio_every_tool_and_bad_input(dataset):
    async def scenario():
        async with stdio_client(dataset) as client:
            await exercise(client)
            await bad_calls(client)
            huge = await client.call_tool("ask_graph", {"question": "x" * 100_000, "graph": "dblp"})
            assert huge.is_error and "413" in text(huge) and "limit of 2000" in text(huge)
            await cancelled_call(client)
            assert not (await client.call_tool("list_graphs", {})).is_error

    run(scenario)


def test_http_every_tool_with_keys_and_bad_input(mcp_http):
    async def scenario():
        async with http_client(mcp_http, KEYS["reader"]) as client:
            await exercise(client)    # the reader key sees dblp only
            await bad_calls(client)
            hidden = await client.call_tool("NodeInfo", {"graph": "secret", "node_id": "p1"})
            assert hidden.is_error and "unknown graph 'secret'" in text(hidden)
            await cancelled_call(client)
        async with http_client(mcp_http, KEYS["ops"]) as client:
            graphs = await client.call_tool("list_graphs", {})
            assert [g["name"] for g in graphs.structured_content["result"]] == ["dblp", "secret"]

    run(scenario)
    # without a key, and with malformed or huge messages: refused over plain HTTP, server unharmed
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with httpx.Client(base_url=mcp_http, timeout=30) as http:
        assert http.post("/mcp", headers=headers, content=b"{}").status_code == 401
        keyed = {**headers, "Authorization": f"Bearer {KEYS['reader']}"}
        malformed = http.post("/mcp", headers=keyed, content=b"{not json")
        assert 400 <= malformed.status_code < 500
        huge = http.post("/mcp", headers=keyed, content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                         "params": {"name": "RetrieveNode", "arguments": {"graph": "dblp", "text": "x" * 100_000}}}))
        assert huge.status_code == 413
        assert http.get("/health").status_code == 200
        assert http.get("/v1/graphs", headers={"Authorization": f"Bearer {KEYS['reader']}"}).status_code == 200


def test_stdio_malformed_messages_and_a_clean_exit(dataset):
    """Raw JSON-RPC lines as a broken host might send them: the server answers what it can,
    refuses the rest with JSON-RPC errors, keeps serving, and exits 0 when stdin closes."""
    import subprocess

    process = subprocess.Popen([sys.executable, "-m", "glmcot.cli", "mcp", "--graph", f"dblp={dataset}", "--scripted",
                                str(dataset / "questions.jsonl"), "--retriever", "lexical"], env=child_env(),
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def send(message) -> None:
        process.stdin.write((message if isinstance(message, str) else json.dumps(message)) + "\n")
        process.stdin.flush()

    def reply() -> dict:
        return json.loads(process.stdout.readline())

    try:
        send("this is not JSON")   # dropped, with a note on stderr; nothing is answered for it
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
        assert reply()["id"] == 1
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "NodeInfo", "arguments": "p1"}})
        assert reply()["error"]["code"] == -32602
        send({"jsonrpc": "2.0", "id": 3, "method": "graphs/drop"})
        assert reply()["error"]["code"] == -32601
        send({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
            "name": "NodeDegree", "arguments": {"graph": "dblp", "node_id": "p1", "relation": "author"}}})
        assert reply()["result"]["structuredContent"] == {"result": 2}
        process.stdin.close()
        assert process.wait(60) == 0
        assert "Traceback" not in process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
