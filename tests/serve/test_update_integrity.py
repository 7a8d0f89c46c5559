"""Integrity through a real server (scripted policy: a system check, not accuracy): a snippet that
changes a returned value changes nothing for the next question, a question keeps its version
across an update even in a sandbox worker started after it, and updates are all or nothing
(issue 30)."""

import json
import re
import threading

import httpx
import pytest

from glmcot.agents.trace import SnippetRun
from glmcot.data.movies import REVERSE_SUFFIX, write_example
from glmcot.graph.storage.store import Graph
from glmcot.graph.importers.tables import import_tables
from glmcot.serve.config import ServeConfig
from glmcot.serve.server import BackgroundServer
from glmcot.serve.startup import build_runtime

KEY = "integrity-key-123"
HEADERS = {"Authorization": f"Bearer {KEY}"}


def record(qid, question, answer, *codes):
    steps = [{"missing": f"step {number} of {question}", "code": code} for number, code in enumerate(codes, 1)]
    return {"qid": qid, "domain": "movies", "template": "test", "params": {}, "level": "easy", "question": question,
            "answer": answer, "deterministic": True, "plan": {"glm": steps, "graphcot": []}}


QUESTIONS = [
    record("mutate", "Change the genres of The Midnight Archive?", "x",
           'g = NodeFeature(RetrieveNode("The Midnight Archive"), "genres")\ng.append("FORGED")\n'
           'm = NodeFeature("movie/1", "meta")\nm.update({"studio": "FORGED"})\nm["cast"].append("FORGED")\nprint("; ".join(g))'),
    record("read", "Which genres does The Midnight Archive have?", "Drama; Heist",
           'print("; ".join(NodeFeature(RetrieveNode("The Midnight Archive"), "genres")))'),
    record("meta", "What is the meta of The Midnight Archive?", "x", 'print(NodeFeature("movie/1", "meta"))'),
    record("info", "Is anything forged in The Midnight Archive?", "False", 'print("FORGED" in NodeInfo("movie/1"))'),
    record("two-rounds", "Who directed The Midnight Archive, asked twice?", "x",
           'print(NodeFeature(NeighbourCheck("movie/1", "director")[0], "name"))',
           'print(NodeFeature(NeighbourCheck("movie/1", "director")[0], "name"))'),
]


@pytest.fixture
def served(tmp_path):
    out = tmp_path / "movies"
    write_example(out, movies=12, people=8, count=3)
    import_tables(out / "tables", out / "store", reverse_suffix=REVERSE_SUFFIX)
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps(row) + "\n" for row in QUESTIONS))
    config = ServeConfig(graphs={"movies": out / "store"}, scripted=questions, port=0, api_key=KEY,
                         retriever="lexical", max_concurrency=1)  # one sandbox worker
    runtime = build_runtime(config)
    try:
        with BackgroundServer(config, runtime) as server, httpx.Client(base_url=server.url, timeout=120) as client:
            yield runtime, client, out / "store"
    finally:
        runtime.close()


def ask(client, qid):
    question = next(row["question"] for row in QUESTIONS if row["qid"] == qid)
    response = client.post("/v1/ask", headers=HEADERS, json={"graph": "movies", "question": question, "qid": qid})
    assert response.status_code == 200, response.text
    return response.json()["answer"]


def update(client, *operations):
    return client.post("/v1/graphs/movies/update", headers=HEADERS, json={"operations": list(operations)})


def lookups(client):
    text = client.get("/metrics", headers=HEADERS).text
    match = re.search(r'^glmcot_retrieve_node_lookups\{graph="movies"\} (\S+)$', text, re.M)
    assert match, text
    return float(match.group(1))


def test_a_snippet_that_changes_returned_values_changes_nothing_for_later_questions(served):
    runtime, client, _ = served
    before = lookups(client)
    response = update(client, {"op": "upsert_node", "id": "movie/1", "features": {
        "genres": ["Drama", "Heist"], "meta": {"cast": ["Al"], "studio": "Warner"}}})
    assert response.status_code == 200, response.text
    assert "FORGED" in ask(client, "mutate")
    for _ in range(3):
        assert ask(client, "read") == "Drama; Heist"
        assert ask(client, "meta") == "{'cast': ['Al'], 'studio': 'Warner'}"
        assert ask(client, "info") == "False"
    assert lookups(client) >= before + 4  # the RetrieveNode counters keep moving after an update
    assert len(runtime.graphs["movies"].context.executor.worker_pids()) == 1  # one worker ran them all


def test_a_two_round_question_keeps_its_version_across_an_update(served):
    runtime, client, store = served
    graph = runtime.graphs["movies"].graph
    director = graph.neighbors("movie/1", "director")[0]
    old_name = graph.feature(director, "name")
    old_context = runtime.graphs["movies"].context
    release, held = threading.Event(), threading.Event()
    outputs = []

    def hold(event):
        if isinstance(event, SnippetRun):
            outputs.append(event.result["output"])
            if len(outputs) == 1:  # between the rounds
                held.set()
                release.wait(60)

    question = next(row["question"] for row in QUESTIONS if row["qid"] == "two-rounds")
    future, _ = runtime.start_question("movies", "glm", question, "two-rounds", None, hold)
    try:
        assert held.wait(120)
        assert update(client, {"op": "upsert_node", "id": director, "features": {"name": "Renamed Director"}}).status_code == 200
        assert update(client, {"op": "upsert_node", "id": director, "features": {"name": "Twice Renamed"}}).status_code == 200
        for worker in list(old_context.executor._all):  # round 2 runs in a worker started after the updates
            worker.process.kill()
            worker.process.wait(30)
    finally:
        release.set()
    answer = future.result(120).answer
    assert outputs == [old_name + "\n", old_name + "\n"] and answer == old_name
    assert old_context.executor.replaced == 1
    assert ask(client, "two-rounds") == "Twice Renamed"
    assert Graph.open(store).feature(director, "name") == "Twice Renamed"


@pytest.mark.parametrize("bad, message", [
    ({"op": "upsert_node", "id": "movie/2", "features": {"year": 2000}, "replace": "false"}, "field 'replace' must be true or false"),
    ({"op": "upsert_node", "id": "movie/2", "features": {"title": "\ud800"}}, "lone surrogate"),
    ({"op": "upsert_node", "id": "movie/\udc00", "type": "Movie"}, "lone surrogate"),
    ({"op": "delete_edge", "source": "nobody", "relation": "director", "target": "person/1"}, "no node 'nobody'"),
    ({"op": "upsert_node", "id": "movie/2", "features": {"": 1}}, "empty feature name"),
    ({"op": "upsert_node", "id": "movie/2", "features": {"year": [1]}}, "holds int values"),
])
def test_bad_updates_are_400_and_apply_nothing(served, bad, message):
    runtime, client, store = served
    good = {"op": "upsert_node", "id": "movie/1", "features": {"year": 1800}}
    # the surrogates travel as JSON escapes, as a client would send them
    body = json.dumps({"operations": [good, bad]}, ensure_ascii=True)
    response = client.post("/v1/graphs/movies/update", headers=HEADERS | {"Content-Type": "application/json"}, content=body)
    assert response.status_code == 400, response.text
    assert message in response.json()["error"]["message"] and "operation 2" in response.json()["error"]["message"]
    assert Graph.open(store).feature("movie/1", "year") != 1800 and not (store / "CURRENT.json").exists()


def test_reverse_edges_follow_updates_through_the_server(served):
    runtime, client, store = served
    assert update(client, {"op": "upsert_edge", "source": "movie/2", "relation": "director", "target": "person/1"}).status_code == 200
    assert "movie/2" in Graph.open(store).neighbors("person/1", "director" + REVERSE_SUFFIX)


def test_through_the_glmcot_serve_command(tmp_path):
    """The same checks against `glmcot serve` as a user runs it (a subprocess, stopped with SIGTERM)."""
    import os
    import signal
    import subprocess
    import sys

    from glmcot.serve.server import free_port

    from .conftest import wait_for_health

    out = tmp_path / "movies"
    write_example(out, movies=12, people=8, count=3)
    import_tables(out / "tables", out / "store", reverse_suffix=REVERSE_SUFFIX)
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps(row) + "\n" for row in QUESTIONS))
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "glmcot.cli", "serve", "--graph", f"movies={out / 'store'}", "--scripted", str(questions),
         "--retriever", "lexical", "--port", str(port), "--max-concurrency", "1"],
        env={**os.environ, "GLMCOT_API_KEY": KEY}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(process, url, 600)
        with httpx.Client(base_url=url, timeout=120) as client:
            bad = update(client, {"op": "upsert_node", "id": "movie/1", "features": {"genres": ["X"]}, "replace": "false"})
            assert bad.status_code == 400 and "field 'replace' must be true or false" in bad.json()["error"]["message"]
            assert update(client, {"op": "upsert_node", "id": "movie/1", "features": {
                "genres": ["Drama", "Heist"], "meta": {"cast": ["Al"], "studio": "Warner"}}}).status_code == 200
            assert "FORGED" in ask(client, "mutate")
            assert ask(client, "read") == "Drama; Heist" and ask(client, "info") == "False"
            assert ask(client, "meta") == "{'cast': ['Al'], 'studio': 'Warner'}"
            assert Graph.open(out / "store").feature("movie/1", "title") == "The Midnight Archive"  # replace was refused
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            output, _ = process.communicate(timeout=600)
            assert "Traceback" not in output
