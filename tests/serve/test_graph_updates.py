"""Graph updates while the server answers (scripted policy: a system check, not accuracy)."""

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from glmcot.data.movies import REVERSE_SUFFIX, write_example
from glmcot.graph.importers.tables import import_tables
from glmcot.serve.config import ServeConfig
from glmcot.serve.startup import build_runtime
from glmcot.serve.server import BackgroundServer

KEY = "update-key-123"


@pytest.fixture
def movies(tmp_path):
    out = tmp_path / "movies"
    write_example(out, movies=12, people=8, count=3)
    import_tables(out / "tables", out / "store", reverse_suffix=REVERSE_SUFFIX)
    records = [json.loads(line) for line in (out / "questions.jsonl").read_text().splitlines()]
    return out, next(r for r in records if r["template"] == "movies/director")


def rename(person, name):
    return {"operations": [{"op": "upsert_node", "id": person, "features": {"name": name}}]}


def test_updates_while_answering(movies):
    out, record = movies
    question, qid = record["question"], record["qid"]
    director = None
    config = ServeConfig(graphs={"movies": out / "store"}, scripted=out / "questions.jsonl", port=0, api_key=KEY,
                         retriever="lexical", max_concurrency=4)
    runtime = build_runtime(config)
    graph = runtime.graphs["movies"].graph
    director = graph.neighbors(record["entities"]["movie"], "director")[0]
    old_name = graph.feature(director, "name")
    assert record["answer"] == old_name
    headers = {"Authorization": f"Bearer {KEY}"}
    try:
        with BackgroundServer(config, runtime) as server, httpx.Client(base_url=server.url, timeout=60) as client:
            # A question that is in flight when the update lands: held after its first LLM call.
            release, held = threading.Event(), threading.Event()

            def hold(event):
                held.set()
                release.wait(30)

            future, _ = runtime.start_question("movies", "glm", question, qid, None, hold)
            assert held.wait(30)
            refused = client.post("/v1/graphs/movies/update", json=rename(director, "X"))
            assert refused.status_code == 401  # no key, no update
            bad = client.post("/v1/graphs/movies/update", headers=headers,
                              json={"operations": [{"op": "delete_node", "id": "nobody"}]})
            assert bad.status_code == 400 and "no such node" in bad.json()["error"]["message"]
            done = client.post("/v1/graphs/movies/update", headers=headers, json=rename(director, "Renamed Director"))
            assert done.status_code == 200, done.text
            assert done.json()["version"] == 1 and done.json()["upserted_nodes"] == 1
            release.set()
            assert future.result(60).answer == old_name  # finished on the version it started with
            fresh = client.post("/v1/ask", headers=headers, json={"graph": "movies", "question": question, "qid": qid})
            assert fresh.status_code == 200 and fresh.json()["answer"] == "Renamed Director"

            # Questions and updates at once: every answer is one whole version's answer.
            names = ["Renamed Director"] + [f"Director {n}" for n in range(3)]

            def ask(_):
                response = client.post("/v1/ask", headers=headers, json={"graph": "movies", "question": question, "qid": qid})
                assert response.status_code == 200, response.text
                return response.json()["answer"]

            with ThreadPoolExecutor(4) as pool:
                answers = pool.map(ask, range(8))
                for name in names[1:]:
                    assert client.post("/v1/graphs/movies/update", headers=headers, json=rename(director, name)).status_code == 200
                assert set(answers) <= set(names)
            assert ask(0) == names[-1]
    finally:
        runtime.close()


def test_updates_need_a_server_key(movies):
    out, _ = movies
    config = ServeConfig(graphs={"movies": out / "store"}, scripted=out / "questions.jsonl", port=0, retriever="lexical")
    runtime = build_runtime(config)
    try:
        with BackgroundServer(config, runtime) as server:
            response = httpx.post(server.url + "/v1/graphs/movies/update", json=rename("person/1", "X"), timeout=30)
            assert response.status_code == 403 and response.json()["error"]["code"] == "updates_need_api_key"
    finally:
        runtime.close()
