"""POST /v1/ask end to end: real server, real engine (tiny random weights), real agents, the
scripted policy (which measures the system, never model accuracy)."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from glmcot.serve import sse
from glmcot.serve.config import ServeConfig
from glmcot.serve.startup import build_runtime
from glmcot.serve.server import BackgroundServer

from .conftest import idle
from .dataset import QUESTIONS, build_dataset

KEY = "ask-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
BY_QID = {q["qid"]: q for q in QUESTIONS}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return build_dataset(tmp_path_factory.mktemp("serve") / "data")


@pytest.fixture(scope="module")
def server(engine, dataset):
    # two names for the same store: one process serving several graphs
    config = ServeConfig(graphs={"dblp": dataset, "mirror": dataset}, model="random:qwen3:tiny",
                         scripted=dataset / "questions.jsonl", port=0, api_key=KEY,
                         timeout_s=120)
    runtime = build_runtime(config, engine=engine)
    with BackgroundServer(config, runtime) as server:
        yield server
    runtime.close()


@pytest.fixture()
def client(server):
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
        yield client


def ask(client, qid, method="glm", graph="dblp", **extra):
    body = {"question": BY_QID[qid]["question"], "graph": graph, "method": method, **extra}
    response = client.post("/v1/ask", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def test_glm_and_graphcot_give_the_gold_answers(client):
    for qid, record in BY_QID.items():
        glm = ask(client, qid, "glm")
        graphcot = ask(client, qid, "graphcot")
        for answer in (glm, graphcot):
            assert answer["answer"] == record["answer"] and answer["failure"] is None
            assert answer["qid"] == qid                      # matched by question text
            assert answer["policy"] == "scripted policy"
            assert answer["backend"].startswith("scripted policy on native")
            usage = answer["usage"]
            assert usage["prompt_tokens"] > 0 and usage["output_tokens"] > 0
            assert usage["total_tokens"] == usage["prompt_tokens"] + usage["output_tokens"]
            assert answer["timing"]["server_s"] >= answer["timing"]["latency_s"] > 0
        assert glm["version"] == "glmcot.serve.ask/1"
        # Graph-CoT's ReAct loop makes more calls and re-sends its growing prompt
        assert graphcot["usage"]["llm_calls"] > glm["usage"]["llm_calls"]
        assert graphcot["usage"]["prompt_tokens"] > glm["usage"]["prompt_tokens"]


def test_trace_on_request(client):
    answer = ask(client, "s-0", options={"include_trace": True})
    kinds = [event["type"] for event in answer["trace"]]
    assert kinds[0] == "llm" and "exec" in kinds and kinds[-1] == "result"
    assert ask(client, "s-0")["trace"] is None


def test_stream_sends_each_glm_step_then_the_result(client):
    body = {"question": BY_QID["s-1"]["question"], "graph": "dblp", "stream": True}
    with client.stream("POST", "/v1/ask", json=body) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        mode = response.headers["x-glmcot-events"]
        events = sse.parse(response.read().decode())
    names = [event["event"] for event in events]
    assert mode == "live"
    assert names[0] == "start" and names[-1] == "result"
    for name in ("classification", "snippet", "retrieval", "missing", "answer"):
        assert name in names, names
    # causal order: classify, then act, run, reason about what is still missing
    assert names.index("classification") < names.index("snippet") < names.index("retrieval")
    assert names.index("retrieval") < names.index("missing") < names.index("answer")
    snippet = json.loads(events[names.index("snippet")]["data"])
    assert "RetrieveNode(" in snippet["code"]
    retrieval = json.loads(events[names.index("retrieval")]["data"])
    assert retrieval["result"]["ok"] is True
    result = json.loads(events[-1]["data"])
    assert result["answer"] == BY_QID["s-1"]["answer"]
    assert result["policy"] == "scripted policy"


def test_stream_graphcot_steps(client):
    body = {"question": BY_QID["s-0"]["question"], "graph": "mirror", "method": "graphcot",
            "stream": True}
    events = sse.parse(client.post("/v1/ask", json=body).text)
    names = [event["event"] for event in events]
    assert {"thought", "action", "step", "answer"} <= set(names)
    assert json.loads(events[-1]["data"])["answer"] == BY_QID["s-0"]["answer"]


def test_graph_and_question_errors(client):
    listed = client.get("/v1/graphs").json()["data"]
    assert [g["name"] for g in listed] == ["dblp", "mirror"]
    assert listed[0]["num_nodes"] == 6
    question = BY_QID["s-0"]["question"]
    response = client.post("/v1/ask", json={"question": question})
    assert response.status_code == 400 and "name a graph" in response.json()["error"]["message"]
    response = client.post("/v1/ask", json={"question": question, "graph": "nope"})
    assert response.status_code == 404 and "unknown graph 'nope'" in response.text
    response = client.post("/v1/ask", json={"question": "What is the meaning of life?",
                                            "graph": "dblp"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "unknown_scripted_question"
    response = client.post("/v1/ask", json={"question": question, "graph": "dblp", "qid": "s-1"})
    assert response.status_code == 400 and response.json()["error"]["code"] == "qid_mismatch"
    # the per-call output limit is capped by the server's --max-tokens-limit (4096 by default)
    response = client.post("/v1/ask", json={"question": question, "graph": "dblp",
                                            "options": {"max_tokens": 100_000}})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "max_tokens_too_large" and "--max-tokens-limit" in error["message"]
    assert ask(client, "s-0", options={"max_tokens": 64})["failure"] is None
    # temperatures too small to divide by are greedy, not a failure of every request in flight
    assert ask(client, "s-0", options={"temperature": 1e-300})["failure"] is None


def test_metrics_report_questions_engine_and_retrieval(client):
    ask(client, "s-0")
    text = client.get("/metrics").text
    assert ('glmcot_questions_total{graph="dblp",method="glm",policy="scripted policy",'
            'outcome="answered"}') in text
    assert 'glmcot_server_info{policy="scripted policy",model="random:qwen3:tiny"} 1' in text
    for name in ("glmcot_engine_blocks_total", "glmcot_engine_prefix_hits_tokens",
                 "glmcot_engine_evictions_p4", 'glmcot_retrieve_node_lookups{graph="dblp"}',
                 'glmcot_tokens_total{endpoint="/v1/ask",kind="cached"}',
                 'glmcot_question_llm_calls_total{graph="dblp",method="glm"}'):
        assert name in text, name
    hits = [line for line in text.splitlines()
            if line.startswith("glmcot_engine_prefix_hits_tokens ")]
    assert float(hits[0].split()[1]) > 0      # shared agent prompts are reused


def test_client_disconnecting_mid_stream_stops_the_question(server, client, engine):
    state = server.app.state.serve
    body = {"question": BY_QID["s-1"]["question"], "graph": "dblp", "method": "graphcot",
            "stream": True}
    with client.stream("POST", "/v1/ask", json=body) as response:
        for line in response.iter_lines():
            if line.startswith("event: thought"):
                break                      # leave after the first step
    deadline = time.monotonic() + 600
    while state.admission.running:
        assert time.monotonic() < deadline, "the question kept its slot"
        time.sleep(0.05)
    stats = idle(engine)
    assert stats["blocks_used"] == 0
    text = client.get("/metrics").text
    assert 'method="graphcot",policy="scripted policy",outcome="client_disconnected"} 1' in text
    assert ask(client, "s-0")["answer"] == BY_QID["s-0"]["answer"]   # still serving


class SlowEngine:
    """The real engine, with every LLM call held back a while: questions then outlast a client's
    patience or the server's timeout whatever the machine's speed or the cache's warmth."""

    def __init__(self, engine, delay_s: float = 0.6):
        self._engine = engine
        self._delay_s = delay_s

    def submit(self, *args, **kwargs):
        time.sleep(self._delay_s)
        return self._engine.submit(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._engine, name)


def test_client_leaving_a_plain_request_stops_the_question(engine, dataset):
    config = ServeConfig(graphs={"dblp": dataset}, model="random:qwen3:tiny",
                         scripted=dataset / "questions.jsonl", port=0, timeout_s=120)
    runtime = build_runtime(config, engine=SlowEngine(engine))
    try:
        with BackgroundServer(config, runtime) as server:
            state = server.app.state.serve
            body = {"question": BY_QID["s-1"]["question"], "graph": "dblp", "method": "glm"}
            with pytest.raises(httpx.ReadTimeout):
                httpx.post(server.url + "/v1/ask", json=body, timeout=0.3)
            deadline = time.monotonic() + 600
            while state.admission.running:
                assert time.monotonic() < deadline, "the question kept its slot"
                time.sleep(0.05)
            text = httpx.get(server.url + "/metrics").text
            assert 'method="glm",policy="scripted policy",outcome="client_disconnected"} 1' in text
    finally:
        runtime.close()
    idle(engine)


def test_openai_backend_over_http_matches_the_in_process_backend(server, engine, dataset):
    """The engine served over HTTP, the agents consuming it through glmcot.llm's own OpenAI
    backend: same answers and calls as the in-process backend, on the scripted policy."""
    from glmcot.agents import AgentContext
    from glmcot.agents.runner import make_agent
    from glmcot.llm import LLMRequest, Segment
    from glmcot.llm.native import NativeBackend
    from glmcot.llm.openai_backend import OpenAIBackend
    from glmcot.agents.scripted import ScriptedBackend

    http = OpenAIBackend(server.url + "/v1", mode="completions", api_key=KEY, max_retries=0)
    assert http.glmcot_extras          # found out from /v1/models: segments, sessions, forced text
    probe = http.complete(LLMRequest([Segment("probe", 4)], max_tokens=4, forced_text="ok"))
    assert probe.text == "ok"
    # a session's notebook blocks fall to P3 when the backend ends it over HTTP
    before = idle(engine)["sessions_demoted_blocks"]
    http.complete(LLMRequest([Segment("notebook line " * 40, 2), Segment("next?", 4)],
                             max_tokens=1, session="probe-session"))
    http.end_session("probe-session")
    assert idle(engine)["sessions_demoted_blocks"] > before
    with AgentContext(dataset, retriever="lexical", workers=1) as context:
        local = ScriptedBackend(QUESTIONS, inner=NativeBackend(engine),
                                code_runner=context.run_code)
        remote = ScriptedBackend(QUESTIONS, inner=http, code_runner=context.run_code)
        for method in ("glm", "graphcot"):
            for record in QUESTIONS:
                here = make_agent(method, local, context).answer(record["question"],
                                                                 record["qid"])
                there = make_agent(method, remote, context).answer(record["question"],
                                                                   record["qid"])
                assert here.answer == there.answer == record["answer"]
                assert here.failure is None and there.failure is None
                assert here.llm_calls == there.llm_calls
                assert here.output_tokens == there.output_tokens
    http.close()


def test_timeout_answers_504_and_stops_the_agent(engine, dataset):
    config = ServeConfig(graphs={"dblp": dataset}, model="random:qwen3:tiny",
                         scripted=dataset / "questions.jsonl", port=0, timeout_s=0.5,
                         max_concurrency=1, max_queue=0)
    runtime = build_runtime(config, engine=SlowEngine(engine))
    try:
        with BackgroundServer(config, runtime) as server, \
                httpx.Client(base_url=server.url, timeout=60) as client:
            body = {"question": BY_QID["s-1"]["question"], "method": "graphcot"}
            response = client.post("/v1/ask", json=body)
            assert response.status_code == 504
            assert response.json()["error"]["type"] == "timeout_error"
            # the abandoned agent keeps its slot until it stops, at its next LLM call
            state = server.app.state.serve
            deadline = time.monotonic() + 600
            while state.admission.running:
                assert time.monotonic() < deadline, "the timed-out agent did not stop"
                time.sleep(0.05)
            text = client.get("/metrics").text
            assert 'method="graphcot",policy="scripted policy",outcome="timeout"} 1' in text
    finally:
        runtime.close()
    idle(engine)


def test_upstream_llm_mode_answers_through_another_server(server, dataset):
    """`--llm URL`: this server's agents call an OpenAI-compatible server (here the module's own
    server, which runs the engine) through glmcot.llm's OpenAI backend. Random weights write no
    valid agent output, so the question ends with a failure reason, reported cleanly."""
    config = ServeConfig(graphs={"dblp": dataset}, llm_url=server.url + "/v1", llm_api_key=KEY,
                         port=0, timeout_s=120)
    runtime = build_runtime(config)
    try:
        with BackgroundServer(config, runtime) as front, \
                httpx.Client(base_url=front.url, timeout=120) as client:
            body = {"question": BY_QID["s-0"]["question"], "options": {"max_tokens": 8}}
            response = client.post("/v1/ask", json=body)
            assert response.status_code == 200, response.text
            answer = response.json()
            assert answer["policy"] == "model"
            assert answer["backend"].startswith("openai http://127.0.0.1")
            assert answer["usage"]["llm_calls"] >= 1 and answer["usage"]["prompt_tokens"] > 0
            assert answer["failure"] in (None, "unexpected_output", "code_error",
                                         "retrieval_error", "step_limit")
            assert client.post("/v1/completions", json={"prompt": "x"}).status_code == 501
    finally:
        runtime.close()
    upstream = httpx.get(server.url + "/metrics", headers=AUTH).text
    assert 'glmcot_requests_total{endpoint="/v1/chat/completions",status="200"}' in upstream


def test_upstream_timeout_and_retries_are_settings_and_a_dead_upstream_is_logged(dataset, caplog):
    config = ServeConfig(graphs={"dblp": dataset}, llm_url="http://127.0.0.1:9/v1", llm_model="m",
                         llm_timeout_s=5.0, llm_retries=0, port=0)
    with caplog.at_level("WARNING", logger="glmcot.serve"):
        runtime = build_runtime(config)
    try:
        assert (runtime.backend.timeout_s, runtime.backend.max_retries) == (5.0, 0)
        assert "cannot answer yet: cannot connect to http://127.0.0.1:9/v1" in caplog.text
    finally:
        runtime.close()
    with pytest.raises(ValueError, match="llm_retries"):
        ServeConfig(llm_url="http://127.0.0.1:9/v1", llm_retries=-1)
