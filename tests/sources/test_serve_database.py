"""`glmcot serve` over a graph database: two replicas on one FalkorDB graph give the store's
answers; when the database goes away the server stays up, /health says so and questions fail
with graph_source_error; when it is back, both answer again."""

from __future__ import annotations

import json

import httpx

from glmcot.serve.config import ServeConfig
from glmcot.serve.server import BackgroundServer
from glmcot.serve.startup import build_runtime

KEY = "test-key-sources"


def test_two_replicas_one_database_and_a_database_outage(dataset):
    from glmcot.graph.live.db_export import export_graph
    from glmcot.graph.opener import open_source
    from glmcot.graph.live.servers import start_falkordb

    records = [json.loads(line) for line in (dataset / "questions.jsonl").read_text().splitlines()][:4]
    store = open_source(dataset)
    database = start_falkordb()
    url = database.graph_url("dblp")
    export_graph(store.graph, url)
    headers = {"Authorization": f"Bearer {KEY}"}
    runtimes = []
    try:
        answers = {}
        for name, location in (("store", dataset), ("db", url)):
            config = ServeConfig(graphs={"dblp": location}, scripted=dataset / "questions.jsonl", port=0, api_key=KEY,
                                 retriever="lexical", max_concurrency=2)
            runtimes.append(build_runtime(config))
        with BackgroundServer(runtimes[0].config, runtimes[0]) as on_store, \
                BackgroundServer(runtimes[1].config, runtimes[1]) as replica_one:
            config_two = ServeConfig(graphs={"dblp": url}, scripted=dataset / "questions.jsonl", port=0, api_key=KEY,
                                     retriever="lexical", max_concurrency=2)
            runtimes.append(build_runtime(config_two))
            with BackgroundServer(config_two, runtimes[2]) as replica_two:
                servers = {"store": on_store, "one": replica_one, "two": replica_two}
                for label, server in servers.items():
                    with httpx.Client(base_url=server.url, timeout=120) as client:
                        answers[label] = [client.post("/v1/ask", headers=headers, json={
                            "graph": "dblp", "question": r["question"], "qid": r["qid"], "method": "glm"}).json()["answer"]
                            for r in records]
                assert answers["one"] == answers["store"] == answers["two"] and any(answers["store"])
                health = httpx.get(f"{replica_one.url}/health", timeout=30).json()
                assert health["graph_sources"] == {"dblp": "ok"}
                port = database.port
                database.stop()
                with httpx.Client(base_url=replica_one.url, timeout=120) as client:
                    down = client.get("/health")
                    assert down.status_code == 200 and down.json()["graph_sources"]["dblp"].startswith("unreachable")
                    assert "127.0.0.1" in down.json()["graph_sources"]["dblp"]
                    failed = client.post("/v1/ask", headers=headers, json={
                        "graph": "dblp", "question": records[0]["question"], "qid": records[0]["qid"], "method": "glm"})
                    assert failed.status_code == 200 and failed.json()["failure"] == "graph_source_error", failed.text
                database = start_falkordb(port=port)
                export_graph(store.graph, url)
                for server in (replica_one, replica_two):
                    with httpx.Client(base_url=server.url, timeout=120) as client:
                        assert client.get("/health").json()["graph_sources"] == {"dblp": "ok"}
                        again = client.post("/v1/ask", headers=headers, json={
                            "graph": "dblp", "question": records[0]["question"], "qid": records[0]["qid"], "method": "glm"})
                        assert again.json()["answer"] == answers["store"][0]
    finally:
        for runtime in runtimes:
            runtime.close()
        database.stop()
