"""The OpenAI-compatible endpoints against the real engine, through the official `openai` client."""

from __future__ import annotations

import contextlib
import json
import threading
import time

import httpx
import openai
import pytest

from glmcot.serve.config import ServeConfig
from glmcot.serve.runtime import Runtime
from glmcot.serve.server import BackgroundServer

from .conftest import MODEL, idle
KEY = "openai-test-key"
PROMPT = "The graph has a node called"


@pytest.fixture(scope="module")
def server(engine):
    config = ServeConfig(model=MODEL, port=0, api_key=KEY, max_tokens_limit=50_000)
    runtime = Runtime(config=config, engine=engine, owns_engine=False)
    with BackgroundServer(config, runtime) as server:
        yield server


@pytest.fixture()
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=60)


def test_models_lists_the_served_model(client):
    assert [m.id for m in client.models.list().data] == [MODEL]


def test_completion_matches_the_in_process_engine(client, engine):
    from glmcot.engine import SamplingParams

    reply = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=12, temperature=0)
    local = engine.submit(PROMPT, SamplingParams(temperature=0, max_tokens=12)).result(60)
    assert reply.choices[0].text == local.text
    assert reply.choices[0].finish_reason in ("stop", "length")
    assert reply.usage.prompt_tokens == local.prompt_tokens
    assert reply.usage.completion_tokens == len(local.token_ids)
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens


def test_streamed_completion_equals_the_plain_one(client):
    plain = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=12, temperature=0)
    chunks = list(client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=12,
                                            temperature=0, stream=True,
                                            stream_options={"include_usage": True}))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == plain.choices[0].text
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and
                c.choices[0].finish_reason]
    assert finishes == [plain.choices[0].finish_reason]
    assert chunks[-1].usage.completion_tokens == plain.usage.completion_tokens


def test_chat_plain_and_streaming_agree(client):
    messages = [{"role": "system", "content": "You answer briefly."},
                {"role": "user", "content": "Who wrote the paper?"}]
    plain = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=10,
                                           temperature=0)
    assert plain.choices[0].message.role == "assistant"
    chunks = list(client.chat.completions.create(model=MODEL, messages=messages, max_tokens=10,
                                                 temperature=0, stream=True))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text == plain.choices[0].message.content
    assert chunks[-1].choices[0].finish_reason == plain.choices[0].finish_reason


def test_extra_body_segments_session_and_forced_text(client, engine):
    segments = [{"text": "Shared agent instructions. ", "level": 1},
                {"text": "Node A: a paper about graphs. ", "level": 2, "key": "node:A"},
                {"text": "Question: who?", "level": 4}]
    reply = client.completions.create(
        model=MODEL, prompt="", max_tokens=20, temperature=0,
        extra_body={"segments": segments, "session": "s-1", "end_session": True,
                    "forced_text": "Alice, Bob"})
    assert reply.choices[0].text == "Alice, Bob"
    assert reply.system_fingerprint == "glmcot-forced-text (scripted policy)"
    joined = client.completions.create(model=MODEL, prompt="".join(s["text"] for s in segments),
                                       max_tokens=1, temperature=0)
    # segments are tokenised one by one, so the count may differ slightly from the joined text
    assert abs(reply.usage.prompt_tokens - joined.usage.prompt_tokens) <= len(segments)
    chat = client.chat.completions.create(
        model=MODEL, max_tokens=20, temperature=0,
        messages=[{"role": "user", "content": "", "segments": segments}],
        extra_body={"forced_text": "forced"})
    assert chat.choices[0].message.content == "forced"


def test_client_errors_are_typed(client, server):
    with pytest.raises(openai.NotFoundError, match="not served here"):
        client.completions.create(model="gpt-4", prompt=PROMPT, max_tokens=2)
    with pytest.raises(openai.BadRequestError, match="exceeds the server's limit"):
        client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=1_000_000)
    with pytest.raises(openai.BadRequestError, match="not supported"):
        client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=2, echo=True)
    with pytest.raises(openai.BadRequestError, match="empty prompt"):
        client.completions.create(model=MODEL, prompt="", max_tokens=2)
    bad = openai.OpenAI(base_url=server.url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError, match="invalid API key"):
        bad.models.list()


def test_disconnect_mid_stream_frees_the_engine_blocks(server, engine):
    baseline = idle(engine)
    body = {"model": MODEL, "prompt": PROMPT, "max_tokens": 50_000, "temperature": 0,
            "ignore_eos": True, "stream": True}
    with httpx.Client(base_url=server.url, timeout=30,
                      headers={"Authorization": f"Bearer {KEY}"}) as http:
        with http.stream("POST", "/v1/completions", json=body) as response:
            assert response.status_code == 200
            lines = response.iter_lines()
            got = [line for line, _ in zip(lines, range(6)) if line.startswith("data:")]
            assert got and json.loads(got[0][5:])["object"] == "text_completion"
            assert engine.stats()["running"] >= 1
        # leaving the block closes the connection mid-stream
    stats = idle(engine)
    assert stats["blocks_used"] == baseline["blocks_used"]
    # the aborted request stopped early: it never reached the engine's context length, which
    # would end it otherwise (idle() itself generates one token per call)
    limit = stats["max_model_len"]
    assert stats["generated_tokens"] - baseline["generated_tokens"] < limit - 16


@pytest.fixture()
def narrow_server(engine):
    """One slot, no queue, a short timeout: to see 429 and 504."""
    config = ServeConfig(model=MODEL, port=0, max_engine_requests=1, max_queue=0, timeout_s=2.0,
                         max_tokens_limit=100_000)
    runtime = Runtime(config=config, engine=engine, owns_engine=False)
    with BackgroundServer(config, runtime) as server:
        yield server


def test_full_server_answers_429_and_slow_requests_504(narrow_server, engine):
    long_body = {"model": MODEL, "prompt": PROMPT, "max_tokens": 20_000, "temperature": 0,
                 "ignore_eos": True}
    results = {}

    def slow():
        with httpx.Client(base_url=narrow_server.url, timeout=30) as http:
            results["slow"] = http.post("/v1/completions", json=long_body)

    thread = threading.Thread(target=slow)
    thread.start()
    deadline = time.monotonic() + 600
    while narrow_server.app.state.serve.engine_admission.running == 0:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    client = openai.OpenAI(base_url=narrow_server.url + "/v1", api_key="none", max_retries=0)
    with pytest.raises(openai.RateLimitError, match="server is full"):
        client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=2)
    thread.join(30)
    assert results["slow"].status_code == 504
    assert results["slow"].json()["error"]["type"] == "timeout_error"
    idle(engine)
    metrics = httpx.get(narrow_server.url + "/metrics").text
    assert 'glmcot_requests_rejected_total{reason="busy"} 1' in metrics
    assert 'glmcot_requests_total{endpoint="/v1/completions",status="504"} 1' in metrics


def test_shutdown_cancels_in_flight_streams_cleanly(engine):
    config = ServeConfig(model=MODEL, port=0, shutdown_grace_s=0.5, max_tokens_limit=100_000)
    runtime = Runtime(config=config, engine=engine, owns_engine=False)
    server = BackgroundServer(config, runtime).start()
    received: list[str] = []

    def stream():
        body = {"model": MODEL, "prompt": PROMPT, "max_tokens": 20_000, "temperature": 0,
                "ignore_eos": True, "stream": True}
        try:
            with httpx.stream("POST", server.url + "/v1/completions", json=body,
                              timeout=30) as response:
                for line in response.iter_lines():
                    received.append(line)
        except httpx.HTTPError as exc:
            received.append(f"closed: {type(exc).__name__}")

    thread = threading.Thread(target=stream)
    thread.start()
    deadline = time.monotonic() + 600
    while len(received) < 3:
        assert time.monotonic() < deadline, "the stream never started"
        time.sleep(0.01)
    server.stop(timeout=600)
    assert not server.thread.is_alive()   # the drain cancelled the endless stream
    thread.join(600)
    assert not thread.is_alive()
    stats = idle(engine)
    assert stats["running"] == 0


def post(server, path, body, key=KEY):
    with httpx.Client(base_url=server.url, timeout=120,
                      headers={"Authorization": f"Bearer {key}"}) as http:
        return http.post(path, json=body)


def test_tiny_temperature_is_greedy_and_other_requests_are_unharmed(server, client):
    greedy = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=3, temperature=0)
    results = {}

    def other():
        results["other"] = post(server, "/v1/completions", {"prompt": "x", "max_tokens": 8,
                                                              "temperature": 0.8, "seed": 3})

    thread = threading.Thread(target=other)
    thread.start()
    tiny = post(server, "/v1/completions", {"prompt": PROMPT, "max_tokens": 3,
                                           "temperature": 1e-300})
    thread.join(120)
    assert tiny.status_code == 200, tiny.text
    assert tiny.json()["choices"][0]["text"] == greedy.choices[0].text
    assert results["other"].status_code == 200, results["other"].text


def test_prompt_count_n_session_and_seed_are_bounded(server, engine):
    baseline = idle(engine)
    cases = [({"prompt": ["a"] * 20_000, "max_tokens": 2}, "too_many_prompts", "--max-prompts"),
             ({"prompt": "a", "max_tokens": 2, "n": 9}, "n_too_large", "--max-n"),
             ({"prompt": "a", "max_tokens": 2, "session": "s" * 300}, "session_too_long",
              "--max-session-chars"),
             ({"prompt": "a", "max_tokens": 2, "seed": 2**70}, "invalid_request", "seed"),
             ({"prompt": "a", "max_tokens": 2, "stop": ["ab"] * 5000}, "too_many_stop_strings", "16"),
             ({"segments": [{"text": "a", "key": "k" * 100_000}], "max_tokens": 2}, "invalid_request",
              "segments.0.key")]
    for body, code, named in cases:
        response = post(server, "/v1/completions", body)
        assert response.status_code == 400, (body, response.text)
        error = response.json()["error"]
        assert error["code"] == code and named in error["message"], error
    chat = post(server, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                                 "max_tokens": 2, "n": 9})
    assert chat.status_code == 400 and chat.json()["error"]["code"] == "n_too_large"
    image = post(server, "/v1/chat/completions", {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "http://x"}}]}], "max_tokens": 2})
    assert image.status_code == 400 and "'image_url' is not supported" in image.json()["error"]["message"]
    stats = idle(engine)
    assert stats["generated_tokens"] - baseline["generated_tokens"] == 1   # idle()'s own token
    # at the limits it works; the largest seed wraps instead of overflowing for later choices
    ok = post(server, "/v1/completions", {"prompt": ["a", "b"], "max_tokens": 2, "n": 8,
                                          "seed": 2**63 - 1, "temperature": 1.0})
    assert ok.status_code == 200, ok.text
    assert len(ok.json()["choices"]) == 16


def test_a_timed_out_many_choice_request_frees_everything_it_queued(engine):
    config = ServeConfig(model=MODEL, port=0, max_engine_requests=2, timeout_s=1.0,
                         max_tokens_limit=100_000)
    runtime = Runtime(config=config, engine=engine, owns_engine=False)
    baseline = idle(engine)
    with BackgroundServer(config, runtime) as narrow:
        response = post(narrow, "/v1/completions", {"prompt": [PROMPT] * 32, "n": 8,
                                                    "max_tokens": 20_000, "ignore_eos": True})
        assert response.status_code == 504 and response.json()["error"]["type"] == "timeout_error"
        admission = narrow.app.state.serve.engine_admission
        assert admission.in_use == 0 and admission.running == 0
    stats = idle(engine)
    assert stats["running"] == 0 and stats["waiting"] == 0
    assert stats["blocks_used"] == baseline["blocks_used"]


def test_engine_requests_are_admitted_up_to_the_engines_batch_not_the_question_slots(engine):
    """The tail fix: OpenAI-endpoint requests have their own admission lane, as wide as the
    engine's batch (max_num_seqs) by default. With one question slot, four streams still all run
    in the engine at once; none waits at the door (it used to wait for the stream before it)."""
    config = ServeConfig(model=MODEL, port=0, max_concurrency=1, max_tokens_limit=100_000)
    assert config.max_engine_requests == engine.config.max_num_seqs == 64
    assert ServeConfig(model=MODEL, engine_options={"max_num_seqs": 5}).max_engine_requests == 5
    runtime = Runtime(config=config, engine=engine, owns_engine=False)
    body = {"model": MODEL, "prompt": PROMPT, "max_tokens": 2000, "temperature": 0,
            "ignore_eos": True, "stream": True}   # four of them fit the 8192-token pool
    with BackgroundServer(config, runtime) as wide, httpx.Client(base_url=wide.url,
                                                                 timeout=600) as http:
        lane = wide.app.state.serve.engine_admission
        readers = []   # held: a dropped line reader closes its stream
        with contextlib.ExitStack() as streams:
            for _ in range(4):
                response = streams.enter_context(http.stream("POST", "/v1/completions",
                                                             json=body))
                assert response.status_code == 200
                readers.append(response.iter_lines())
                first = next(line for line in readers[-1] if line.startswith("data:"))
                assert json.loads(first[5:])["choices"][0]["text"] is not None
            # every stream has its first token while all four are still generating
            assert lane.running == 4 and lane.waiting == 0
            assert wide.app.state.serve.admission.running == 0   # the question lane is untouched
        # leaving the streams aborts their engine requests
    stats = idle(engine)
    assert stats["running"] == 0 and lane.rejected["busy"] == 0


def test_admission_counts_engine_requests():
    import asyncio

    from glmcot.serve.limits import Admission

    async def scenario():
        admission = Admission(max_concurrency=4, max_queue=4, timeout_s=30)
        big = await admission.acquire("x", cost=16)    # capped at the whole capacity
        assert admission.in_use == 4
        small = asyncio.create_task(admission.acquire("x", cost=1))
        await asyncio.sleep(0.05)
        assert not small.done() and admission.waiting == 1
        big.release()
        ticket = await asyncio.wait_for(small, 30)
        assert admission.in_use == 1
        ticket.release()
        assert admission.in_use == 0

    asyncio.run(scenario())


@pytest.mark.parametrize("name,value", [
    ("response_format", {"type": "json_object"}), ("tools", [{"type": "function", "function":
                                                              {"name": "f"}}]),
    ("tool_choice", "auto"), ("logit_bias", {"5": 10}), ("suffix", " end"),
    ("repetition_penalty", 1.3), ("echo", True), ("presence_penalty", 0.5)])
def test_unsupported_parameters_are_refused_by_name(server, name, value):
    response = post(server, "/v1/completions", {"prompt": "a", "max_tokens": 2, name: value})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "unsupported_parameter" and repr(name) in error["message"]
    if name != "echo":
        chat = post(server, "/v1/chat/completions", {"messages": [{"role": "user", "content": "a"}],
                                                     "max_tokens": 2, name: value})
        assert chat.status_code == 400 and repr(name) in chat.json()["error"]["message"]


def test_parameters_at_their_off_value_are_accepted(server):
    body = {"prompt": "a", "max_tokens": 2, "response_format": {"type": "text"}, "tools": [],
            "logit_bias": None, "suffix": "", "store": False, "repetition_penalty": 1.0}
    assert post(server, "/v1/completions", body).status_code == 200


def test_completion_logprobs_are_the_engines(client, engine):
    from glmcot.engine import SamplingParams

    reply = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=6, temperature=0,
                                      logprobs=3, extra_body={"ignore_eos": True})
    local = engine.submit(PROMPT, SamplingParams(max_tokens=6, ignore_eos=True, logprobs=3)
                          ).result(120)
    lp = reply.choices[0].logprobs
    assert len(lp.token_logprobs) == len(lp.tokens) == len(lp.top_logprobs) == 6
    assert lp.token_logprobs == pytest.approx([e.logprob for e in local.logprobs], abs=1e-5)
    for chosen, top in zip(lp.token_logprobs, lp.top_logprobs):
        assert chosen <= 0 and chosen == pytest.approx(max(top.values()), abs=1e-6)  # greedy
    assert lp.text_offset[0] == 0 and lp.text_offset == sorted(lp.text_offset)
    zero = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=3, temperature=0,
                                     logprobs=0)
    assert len(zero.choices[0].logprobs.token_logprobs) == zero.usage.completion_tokens
    assert zero.choices[0].logprobs.top_logprobs is None
    plain = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=3, temperature=0)
    assert plain.choices[0].logprobs is None


def test_chat_logprobs_and_their_limits(client, server):
    messages = [{"role": "user", "content": "Who wrote the paper?"}]
    reply = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=5,
                                           temperature=0, logprobs=True, top_logprobs=2)
    content = reply.choices[0].logprobs.content
    assert len(content) == reply.usage.completion_tokens
    for entry in content:
        assert len(entry.top_logprobs) == 2
        assert entry.logprob == pytest.approx(max(t.logprob for t in entry.top_logprobs), abs=1e-6)
        assert entry.bytes == list(entry.token.encode("utf-8"))
    for body, named in [({"logprobs": True, "stream": True}, "logprobs"),
                        ({"top_logprobs": 2}, "top_logprobs"),
                        ({"logprobs": True, "top_logprobs": 21}, "top_logprobs")]:
        response = post(server, "/v1/chat/completions", {"messages": messages, "max_tokens": 2,
                                                         **body})
        assert response.status_code == 400 and named in response.json()["error"]["message"]
