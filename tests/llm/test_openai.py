"""The OpenAI-compatible backend against a small local HTTP server."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from glmcot.llm import LLMError, LLMRequest, Segment, make_backend
from glmcot.llm.openai_backend import OpenAIBackend


class Counter:
    def count(self, text):
        return len(text.split())


class Server:
    def __init__(self):
        self.failures = 0  # next N requests answer 503
        self.requests = []
        self.usage = True
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _json(self, status, payload):
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path == "/v1/models":
                    self._json(200, {"data": [{"id": "tiny-model"}]})
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
                usage = {"prompt_tokens": 11, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 8}} if outer.usage else None
                chat = self.path.endswith("/chat/completions")
                if not body.get("stream"):
                    choice = {"message": {"role": "assistant", "content": text}} if chat else {"text": text}
                    choice["finish_reason"] = "stop"
                    payload = {"choices": [choice]}
                    if usage:
                        payload["usage"] = usage
                    self._json(200, payload)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for piece in ["<answer>Ada", " Park\nsecond", " line</answer>"]:
                    choice = {"delta": {"content": piece}} if chat else {"text": piece}
                    self.wfile.write(f"data: {json.dumps({'choices': [choice]})}\n\n".encode())
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
    backend = make_backend("openai:" + server.url, counter=Counter())
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


def test_forced_text_is_refused(server):
    backend = OpenAIBackend(server.url, model="m")
    with pytest.raises(LLMError, match="force"):
        backend.complete(req(forced_text="x"))
