"""The graph over HTTP against a real `glmcot serve` process: primitives (one and a batch), vertex
chunks, search, schema; per-graph keys (404 alike for unknown and not granted, the update and
admin rights, per-key rates); graphs added and removed while serving; a store version committed
by another process noticed; JSON bodies without a JSON Content-Type; bad input."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx
import pytest

from .conftest import BY_QID, auth

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client(served):
    with httpx.Client(base_url=served, timeout=120) as client:
        yield client


def call(client, graph, body, key="reader"):
    return client.post(f"/v1/graphs/{graph}/call", headers=auth(key), json=body)


def test_one_primitive_and_a_batch(client):
    one = call(client, "dblp", {"primitive": "RetrieveNode", "arguments": {"text": "Fast Graph Sampling"}})
    assert one.status_code == 200, one.text
    assert one.json()["results"] == [{"primitive": "RetrieveNode", "ok": True, "value": "p3", "error": None,
                                      "total": None}]
    batch = call(client, "dblp", {"calls": [
        {"primitive": "NodeInfo", "arguments": {"node_id": "p1"}},
        {"primitive": "NodeFeature", "arguments": {"node_id": "a2", "feature": "name"}},
        {"primitive": "NeighbourCheck", "arguments": {"node_id": "p1", "relation": "author"}},
        {"primitive": "NodeDegree", "arguments": {"node_id": "p3", "relation": "reference"}},
        {"primitive": "NodeDegree", "arguments": {"node_id": "p1", "relation": "wrote"}},
        {"primitive": "NodeInfo", "arguments": {"node_id": "nobody"}},
    ]}).json()["results"]
    assert batch[0]["ok"] and batch[0]["value"].startswith("[node p1 | paper]\ntitle: Sparse Attention for Long Graphs")
    assert batch[1]["value"] == "Omar Diaz"
    assert batch[2]["value"] == ["a1", "a2"] and batch[2]["total"] == 2
    assert batch[3]["value"] == 2
    # a primitive's own error is that call's outcome, with the choices an agent needs
    assert not batch[4]["ok"] and "author, reference, cited_by" in batch[4]["error"]
    assert not batch[5]["ok"] and "no such node" in batch[5]["error"]


def test_chunks_search_and_schema(client):
    chunk = client.get("/v1/graphs/dblp/nodes/a3", headers=auth("reader"))
    assert chunk.status_code == 200
    assert chunk.json()["node_type"] == "author" and "name: Lena Weiss" in chunk.json()["text"]
    missing = client.get("/v1/graphs/dblp/nodes/zzz", headers=auth("reader"))
    assert missing.status_code == 404 and "no such node" in missing.json()["error"]["message"]
    found = client.post("/v1/graphs/dblp/search", headers=auth("reader"), json={"query": "Learning to Rank Nodes", "k": 3})
    documents = found.json()["documents"]
    assert [d["node_id"] for d in documents] == ["p2"] and documents[0]["score"] == 1.0   # lexical: one match
    assert "Learning to Rank Nodes" in documents[0]["text"]
    nothing = client.post("/v1/graphs/dblp/search", headers=auth("reader"), json={"query": "zebra migrations"})
    assert nothing.status_code == 200 and nothing.json()["documents"] == []
    schema = client.get("/v1/graphs/dblp/schema", headers=auth("reader")).json()
    paper = next(t for t in schema["node_types"] if t["name"] == "paper")
    assert paper == {"name": "paper", "count": 3, "text_feature": "title", "features": ["title", "year"],
                     "relations": ["author", "reference", "cited_by"]}


@pytest.mark.parametrize("body, needle", [
    ({"primitive": "DropTables", "arguments": {}}, "unknown primitive 'DropTables'"),
    ({"primitive": "NodeInfo", "arguments": {}}, "NodeInfo takes (node_id); missing node_id"),
    ({"primitive": "NodeInfo", "arguments": {"node_id": "p1", "x": 1}}, "unknown x"),
    ({"primitive": "NodeInfo", "arguments": {"node_id": ["p1"]}}, "node_id must be a string"),
    ({"primitive": "RetrieveNode", "arguments": {"text": "x" * 5000}}, "at most 2000"),
    ({"calls": []}, "calls is empty"),
    ({}, "give a primitive"),
    ({"calls": [{"primitive": "NodeInfo", "arguments": {"node_id": "p1"}}] * 33}, "33 calls in one request; at most 32"),
    ({"primitive": "NodeInfo", "arguments": {"node_id": "p1"}, "extra": True}, "extra"),
])
def test_malformed_calls_get_400_with_what_is_wrong(client, body, needle):
    response = call(client, "dblp", body)
    assert response.status_code == 400, response.text
    assert needle in response.json()["error"]["message"]


def test_a_huge_body_gets_413_and_the_server_serves_on(client):
    response = call(client, "dblp", {"primitive": "RetrieveNode", "arguments": {"text": "x" * 100_000}})
    assert response.status_code == 413
    assert call(client, "dblp", {"primitive": "NodeDegree", "arguments": {"node_id": "p1", "relation": "author"}}
                ).json()["results"][0]["value"] == 2


def test_a_graph_the_key_does_not_see_is_unknown(client):
    for path in ("/v1/graphs/secret/schema", "/v1/graphs/nowhere/schema", "/v1/graphs/secret/nodes/p1"):
        response = client.get(path, headers=auth("reader"))
        assert response.status_code == 404
        # the same message for a graph that exists and one that does not: no existence leak
        assert "secret" not in response.json()["error"]["message"].replace("'secret'", "")
    unknown = client.get("/v1/graphs/nowhere/schema", headers=auth("reader")).json()["error"]["message"]
    hidden = client.get("/v1/graphs/secret/schema", headers=auth("reader")).json()["error"]["message"]
    assert unknown.replace("nowhere", "X") == hidden.replace("secret", "X")
    listed = client.get("/v1/graphs", headers=auth("reader")).json()["data"]
    assert [g["name"] for g in listed] == ["dblp"]
    ask = client.post("/v1/ask", headers=auth("reader"), json={"question": BY_QID["s-0"]["question"], "graph": "secret"})
    assert ask.status_code == 404
    assert client.get("/v1/graphs/secret/schema", headers=auth("ops")).status_code == 200
    assert client.get("/health").json()["graphs"] == []   # /health needs no key: it names no graphs


def test_keys_401_and_a_per_key_rate_that_harms_no_other_key(client):
    assert client.get("/v1/graphs").status_code == 401
    assert client.get("/v1/graphs", headers={"Authorization": "Bearer wrong-key-123"}).status_code == 401
    statuses = [client.get("/v1/graphs/dblp/schema", headers=auth("limited")).status_code for _ in range(5)]
    assert statuses[:3] == [200, 200, 200] and statuses[3:] == [429, 429]
    refused = client.get("/v1/graphs/dblp/schema", headers=auth("limited"))
    assert int(refused.headers["retry-after"]) >= 1 and "3 requests per minute" in refused.json()["error"]["message"]
    assert client.get("/v1/graphs/dblp/schema", headers=auth("reader")).status_code == 200


def test_updates_need_the_update_right(client):
    operations = {"operations": [{"op": "upsert_node", "id": "a1", "features": {"name": "Ada Park"}}]}
    refused = client.post("/v1/graphs/dblp/update", headers=auth("reader"), json=operations)
    assert refused.status_code == 403 and "no update right" in refused.json()["error"]["message"]
    hidden = client.post("/v1/graphs/secret/update", headers=auth("reader"), json=operations)
    assert hidden.status_code == 404


def test_graphs_added_and_removed_while_serving(client, dataset):
    body = {"name": "added", "path": str(dataset)}
    refused = client.post("/v1/admin/graphs", headers=auth("reader"), json=body)
    assert refused.status_code == 403 and "admin right" in refused.json()["error"]["message"]
    bad = client.post("/v1/admin/graphs", headers=auth("ops"), json={"name": "bad", "path": str(dataset / "nowhere")})
    assert bad.status_code == 400 and "not found" in bad.json()["error"]["message"]
    assert client.post("/v1/admin/graphs", headers=auth("ops"), json={"name": "../x", "path": "/"}).status_code == 400
    added = client.post("/v1/admin/graphs", headers=auth("ops"), json=body)
    assert added.status_code == 201 and added.json()["num_nodes"] == 6
    assert client.post("/v1/admin/graphs", headers=auth("ops"), json=body).status_code == 409
    answer = client.post("/v1/ask", headers=auth("ops"), json={"question": BY_QID["s-0"]["question"], "graph": "added"})
    assert answer.status_code == 200 and answer.json()["answer"] == BY_QID["s-0"]["answer"]
    assert client.get("/v1/graphs/added/schema", headers=auth("reader")).status_code == 404   # not in its grant
    removed = client.delete("/v1/admin/graphs/added", headers=auth("ops"))
    assert removed.status_code == 200 and "added" not in removed.json()["graphs"]
    assert client.get("/v1/graphs/added/schema", headers=auth("ops")).status_code == 404


def test_a_version_committed_by_another_process_is_noticed(client, dataset):
    code = ("import sys; from glmcot.graph.updates.delta import parse_operation; from glmcot.graph.updates.versions import apply_update; "
            "apply_update(sys.argv[1], [parse_operation({'op': 'upsert_node', 'id': 'p9', 'type': 'paper', "
            "'features': {'title': 'Replicated Paper', 'year': 2024}}, 'op')])")
    from .conftest import child_env

    subprocess.run([sys.executable, "-c", code, str(dataset.parent / "replica" / "graph")], check=True, env=child_env(),
                   timeout=120)
    deadline = time.monotonic() + 60
    while True:
        response = client.get("/v1/graphs/replica/nodes/p9", headers=auth("ops"))
        if response.status_code == 200:
            break
        assert time.monotonic() < deadline, "the server did not notice the new store version"
        time.sleep(0.2)
    assert "title: Replicated Paper" in response.json()["text"]
    assert client.get("/v1/graphs/dblp/nodes/p9", headers=auth("ops")).status_code == 404   # another store


def test_the_readme_curl_without_a_json_content_type(client):
    body = json.dumps({"question": BY_QID["s-0"]["question"], "graph": "dblp", "method": "glm"})
    for headers in ({"Content-Type": "application/x-www-form-urlencoded"}, {}):   # curl -d's type, and none
        response = client.post("/v1/ask", headers={**auth("reader"), **headers}, content=body)
        assert response.status_code == 200, response.text
        assert response.json()["answer"] == BY_QID["s-0"]["answer"]
    broken = client.post("/v1/ask", headers={**auth("reader"), "Content-Type": "application/x-www-form-urlencoded"},
                         content="question=hello")
    assert broken.status_code == 400 and broken.json()["error"]["message"] == "malformed JSON body"


def test_the_trace_page_needs_no_key_under_a_keys_file(client):
    # the page holds no secret; the API calls it makes send the key
    page = client.get("/ui")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert client.get("/uiother").status_code == 401   # a prefix match is a whole path segment
    assert client.get("/v1/graphs").status_code == 401


@pytest.mark.parametrize("path, body, field", [
    ("/v1/graphs/dblp/call", {"primitive": "NodeInfo", "arguments": {"node_id": "p\ud8001"}}, "arguments"),
    ("/v1/graphs/dblp/call", {"calls": [{"primitive": "NodeDegree", "arguments": {"node_id": "\udfff"}}]}, "calls"),
    ("/v1/graphs/dblp/search", {"query": "graph \ud800 mining"}, "query"),
])
def test_a_lone_surrogate_is_a_400_naming_it(client, path, body, field):
    # JSON's \ud800 escape decodes to a lone surrogate: refused where the body is read, never a 500
    raw = json.dumps(body, ensure_ascii=True)
    response = client.post(path, headers={**auth("ops"), "Content-Type": "application/json"}, content=raw)
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert field in message
    # a plain text field is refused by the JSON parser itself; text inside arguments by RequestBody
    assert "lone surrogate" in message or "unable to parse raw data as a unicode string" in message
