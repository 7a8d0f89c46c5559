"""The OpenAI-compatible backend against a small local HTTP server."""

import json
import threading
from http.server import ThreadingHTTPServer

import pytest

from glmcot.llm import BackendSpec, LLMError, LLMRequest, Segment
from glmcot.system import make_backend
from glmcot.llm.openai_backend import OpenAIBackend
from tests.stubs import JSONHandler


class Counter:
    def count(self, text):
        return len(text.split())


class Server:
    def __init__(self):
        self.failures = 0  # next N requests answer 503
        self.truncations = 0  # next N streams close cleanly mid-answer (no finish, no [DONE])
        self.requests = []
        self.usage = True
        self.owner = None  # "glmcot" makes /models say this is glmcot serve
        self.confirm_forced = True  # glmcot serve marks forced responses in system_fingerprint
        outer = self

        class Handler(JSONHandler):
            def _json(self, status, payload):
                self.send_json(status, payload)

            def do_GET(self):
                if self.path == "/v1/models":
                    card = {"id": "tiny-model", "object": "model"}
                    if outer.owner:
                        card["owned_by"] = outer.owner
                    self._json(200, {"data": [card]})
                else:
                    self._json(404, {"error": "no"})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((self.path, body, dict(self.headers)))
                if outer.failures > 0:
                    outer.failures -= 1
                    self._json(503, {"error": "busy"})
                    return
                text = "<answer>Ada Park</answer> trailing"
                fingerprint = "glmcot"
                if body.get("forced_text") is not None:
                    text = body["forced_text"]
                    if outer.confirm_forced:
                        fingerprint = "glmcot-forced-text (scripted policy)"
                usage = {"prompt_tokens": 11, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 8}} if outer.usage else None
                chat = self.path.endswith("/chat/completions")
                if not body.get("stream"):
                    choice = {"message": {"role": "assistant", "content": text}} if chat else {"text": text}
                    choice["finish_reason"] = "stop"
                    payload = {"choices": [choice], "system_fingerprint": fingerprint}
                    if usage:
                        payload["usage"] = usage
                    self._json(200, payload)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                pieces = ["<answer>Ada", " Park\nsecond", " line</answer>"]
                if body.get("forced_text") is not None:
                    pieces = [text[:3], text[3:]]
                if outer.truncations > 0:
                    outer.truncations -= 1
                    pieces = pieces[:1]
                    for piece in pieces:
                        choice = {"delta": {"content": piece}} if chat else {"text": piece}
                        self.wfile.write(f"data: {json.dumps({'choices': [choice]})}\n\n".encode())
                    return
                for piece in pieces:
                    choice = {"delta": {"content": piece}} if chat else {"text": piece}
                    chunk = {"choices": [choice], "system_fingerprint": fingerprint}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                if usage:
                    self.wfile.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


def req(**kw):
    return LLMRequest(segments=[Segment("P1 ", 1), Segment("Question?", 4)], stop=["</answer>"], metadata={"qid": "q"}, **kw)


def test_chat_non_streaming_reads_usage(server):
    backend = make_backend(BackendSpec.parse("openai:" + server.url), counter=Counter())
    response = backend.complete(req())
    assert response.text == "<answer>Ada Park"  # cut at the stop string even if the server did not
    assert (response.prompt_tokens, response.output_tokens, response.cached_tokens) == (11, 5, 8)
    path, body, headers = server.requests[0]
    assert path == "/v1/chat/completions"
    assert body["model"] == "tiny-model"  # discovered from /models
    assert body["messages"] == [{"role": "user", "content": "P1 Question?"}]
    assert body["stop"] == ["</answer>"]
    assert headers["Authorization"] == "Bearer EMPTY"  # no key needed for a local URL


def test_streaming_feeds_hooks_and_counts_without_usage(server):
    server.usage = False
    lines, deltas = [], []
    backend = OpenAIBackend(server.url, mode="completions", model="m", counter=Counter())
    response = backend.complete(req(on_line=lines.append, on_delta=deltas.append))
    assert response.text == "<answer>Ada Park\nsecond line"
    assert lines == ["<answer>Ada Park", "second line</answer>"]
    assert "".join(deltas).startswith("<answer>Ada Park")
    assert server.requests[0][0] == "/v1/completions"
    assert server.requests[0][1]["prompt"] == "P1 Question?"
    assert response.prompt_tokens == 2  # counted locally (the stub counter splits on spaces)
    assert response.ttft_s is not None


def test_transient_errors_are_retried(server):
    server.failures = 2
    backend = OpenAIBackend(server.url, model="m", backoff_s=0.01, counter=Counter())
    assert backend.complete(req()).text == "<answer>Ada Park"
    assert len(server.requests) == 3


def test_retries_are_bounded(server):
    server.failures = 10
    backend = OpenAIBackend(server.url, model="m", backoff_s=0.01, max_retries=2, counter=Counter())
    with pytest.raises(LLMError, match="503"):
        backend.complete(req())
    assert len(server.requests) == 3


def test_unreachable_server_is_an_llm_error():
    backend = OpenAIBackend("http://127.0.0.1:9/v1", model="m", backoff_s=0.01, max_retries=1, timeout_s=2)
    with pytest.raises(LLMError):
        backend.complete(req())


def test_remote_url_needs_a_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(LLMError, match="API key"):
        OpenAIBackend("https://api.example.com/v1", model="m")
    assert OpenAIBackend("https://api.example.com/v1", model="m", api_key="k")._headers["Authorization"] == "Bearer k"


def test_forced_text_is_refused_by_other_servers(server):
    backend = OpenAIBackend(server.url, model="m")
    with pytest.raises(LLMError, match="not a glmcot server.*openai\\+glmcot:URL"):
        backend.complete(req(forced_text="x"))
    assert not backend.glmcot_extras and server.requests == []
    backend.end_session("q#1")  # other servers keep no sessions: nothing is sent
    assert server.requests == []
    plain = make_backend(BackendSpec.parse("openai-completions:" + server.url), counter=Counter())
    plain.complete(req(session="q#1"))
    body = server.requests[0][1]
    assert body["prompt"] == "P1 Question?"
    assert not {"segments", "session", "forced_text", "end_session"} & set(body)


def glmcot_req(**kw):
    segments = [Segment("P1 ", 1), Segment("node text ", 2, "vertex:7"), Segment("Question?", 4)]
    return LLMRequest(segments=segments, stop=["</answer>"], session="q#1",
                      metadata={"qid": "q"}, priority=2, **kw)


def test_glmcot_server_is_detected_and_gets_segments_session_and_forced_text(server):
    server.owner = "glmcot"
    backend = OpenAIBackend(server.url, mode="completions", model="tiny-model", counter=Counter())
    response = backend.complete(glmcot_req(forced_text="<answer>Ada</answer> and more"))
    # forced text comes back whole, as from the native engine: no stop string is sent or cut
    assert response.text == "<answer>Ada</answer> and more"
    path, body, _ = server.requests[0]
    assert path == "/v1/completions" and backend.glmcot_extras
    assert body["prompt"] == ""
    assert body["segments"] == [{"text": "P1 ", "level": 1},
                                {"text": "node text ", "level": 2, "key": "vertex:7"},
                                {"text": "Question?", "level": 4}]
    assert body["session"] == "q#1" and body["priority"] == 2
    assert body["forced_text"] == "<answer>Ada</answer> and more" and "stop" not in body
    # without forced text the stop strings go as usual, and the answer is cut at them
    assert backend.complete(glmcot_req()).text == "<answer>Ada Park"
    body = server.requests[1][1]
    assert body["stop"] == ["</answer>"] and "forced_text" not in body
    backend.end_session("q#1")
    path, body, _ = server.requests[2]
    assert path == "/v1/completions"
    assert body["session"] == "q#1" and body["end_session"] is True and body["max_tokens"] == 0
    assert body["segments"] and body["prompt"] == ""


def test_glmcot_chat_sends_segments_in_the_message_and_streams_forced_text(server):
    server.owner = "glmcot"
    lines = []
    backend = make_backend(BackendSpec.openai(server.url, system_prompt="Be brief."), counter=Counter())
    response = backend.complete(glmcot_req(forced_text="line one\nline two", on_line=lines.append))
    assert response.text == "line one\nline two" and lines == ["line one", "line two"]
    path, body, _ = server.requests[0]
    assert path == "/v1/chat/completions" and body["stream"] is True
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    user = body["messages"][1]
    assert user["content"] == "" and [s["level"] for s in user["segments"]] == [1, 2, 4]
    assert body["forced_text"] == "line one\nline two" and body["session"] == "q#1"


def test_forced_text_the_server_does_not_confirm_is_an_error(server):
    server.owner = "glmcot"
    server.confirm_forced = False  # e.g. a proxy that dropped the extra field
    backend = OpenAIBackend(server.url, mode="completions", counter=Counter())
    with pytest.raises(LLMError, match="did not confirm forced decoding"):
        backend.complete(glmcot_req(forced_text="x"))


def test_spec_openai_glmcot_forces_the_extras(server):
    backend = make_backend(BackendSpec.parse("openai-completions+glmcot:" + server.url).with_options(model="m"),
                           counter=Counter())
    assert backend.glmcot_extras  # no /models needed: the spec says so
    assert backend.complete(glmcot_req(forced_text="done")).text == "done"
    assert server.requests[0][1]["segments"][1]["key"] == "vertex:7"
    assert not make_backend(BackendSpec.openai(server.url, glmcot_extras=False, model="m")).glmcot_extras
    with pytest.raises(ValueError, match="openai\\+glmcot"):
        BackendSpec.parse("openai+vllm:" + server.url)

    scripted = make_backend(BackendSpec.parse("scripted+openai+glmcot:" + server.url).with_options(model="m"),
                            questions=[{"qid": "q"}])
    assert scripted.inner.glmcot_extras and scripted.inner.mode == "chat"


def test_a_stream_cut_short_is_retried_never_taken_as_the_answer(server):
    server.truncations = 1
    backend = OpenAIBackend(server.url, mode="completions", model="m", backoff_s=0.01, counter=Counter(),
                            stream=True)
    assert backend.complete(req()).text == "<answer>Ada Park\nsecond line"
    assert len(server.requests) == 2
    server.truncations = 5
    stubborn = OpenAIBackend(server.url, model="m", backoff_s=0.01, max_retries=1, counter=Counter(), stream=True)
    with pytest.raises(LLMError, match="without \\[DONE\\] or a finish reason"):
        stubborn.complete(req())


def test_timeout_and_retries_are_options(server):
    server.failures = 10
    backend = make_backend(BackendSpec.openai(server.url, model="m", max_retries=0, timeout_s=7.5), counter=Counter())
    assert backend.timeout_s == 7.5
    with pytest.raises(LLMError, match="503"):
        backend.complete(req())
    assert len(server.requests) == 1


def test_check_says_why_a_backend_cannot_answer(server):
    OpenAIBackend(server.url, model="tiny-model").check()
    OpenAIBackend(server.url).check()
    with pytest.raises(LLMError, match="'other' is not served .* it serves tiny-model"):
        OpenAIBackend(server.url, model="other").check()
    with pytest.raises(LLMError, match="404.*try .*/v1"):
        OpenAIBackend(server.url[: -len("/v1")]).check()
    with pytest.raises(LLMError, match="cannot connect to http://127.0.0.1:9/v1"):
        OpenAIBackend("http://127.0.0.1:9/v1", model="m").check()
