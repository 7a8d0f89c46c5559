"""The size of an upstream LLM reply is bounded: a real local HTTP server answers far more than
the cap (with a Content-Length, without one, and as an endless stream); that call fails with a
clear reason, is not retried, and the backend keeps serving."""

from __future__ import annotations

import json
import threading
from http.server import ThreadingHTTPServer

import pytest

from glmcot.llm import LLMError, LLMRequest, Segment
from glmcot.llm.bounded_http import DEFAULT_MAX_REPLY_BYTES, MAX_REPLY_BYTES_ENV, ReplyTooLarge
from glmcot.llm.openai_backend import OpenAIBackend
from tests.stubs import JSONHandler

LIMIT = 64 * 1024
HUGE = 1_000_000   # characters of answer


class HugeServer:
    """/v1/chat/completions answers `mode`: "small", "sized" (a huge JSON reply with its
    Content-Length), "unsized" (the same, ended by closing the connection) or "stream" (SSE
    deltas until the client goes away)."""

    def __init__(self) -> None:
        self.mode = "sized"
        self.posts = 0
        outer = self

        class Handler(JSONHandler):
            def do_GET(self):
                self.send_json(200, {"data": [{"id": "m", "object": "model"}]})

            def do_POST(self):
                streamed = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0)))).get("stream")
                outer.posts += 1
                if outer.mode == "small" and streamed:
                    body = ("data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": "ok"},
                                                               "finish_reason": "stop"}]}) + "\n\ndata: [DONE]\n\n").encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                text = "ok" if outer.mode == "small" else "x" * HUGE
                reply = {"choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                      "finish_reason": "stop"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}
                if outer.mode in ("small", "sized"):
                    self.send_json(200, reply)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream" if outer.mode == "stream" else "application/json")
                self.end_headers()   # HTTP/1.0, no Content-Length: the body ends when the connection closes
                try:
                    if outer.mode == "unsized":
                        self.wfile.write(json.dumps(reply).encode())
                        return
                    chunk = ("data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": "y" * 1000}}]})
                             + "\n\n").encode()
                    for _ in range(HUGE // 1000):
                        self.wfile.write(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def server():
    server = HugeServer()
    yield server
    server.close()


def _request() -> LLMRequest:
    return LLMRequest(segments=[Segment("Question: who?", 4)], max_tokens=8)


@pytest.mark.parametrize("mode,stream", [("sized", False), ("unsized", False), ("stream", True)])
def test_a_reply_over_the_cap_fails_that_call_with_a_clear_reason(server, mode, stream):
    backend = OpenAIBackend(server.url, model="m", stream=stream, max_retries=3, backoff_s=0.0,
                            max_reply_bytes=LIMIT)
    try:
        server.mode = mode
        with pytest.raises(ReplyTooLarge) as raised:
            backend.complete(_request())
        assert isinstance(raised.value, LLMError)
        assert str(raised.value) == (f"the reply from {server.url}/chat/completions is larger than 65,536 bytes, "
                                     f"the limit for one LLM reply (set {MAX_REPLY_BYTES_ENV} to change it); "
                                     "the call was stopped")
        assert server.posts == 1   # not retried
        server.mode = "small"
        assert backend.complete(_request()).text == "ok"   # the backend serves on
    finally:
        backend.close()


def test_the_cap_comes_from_the_environment_and_a_bad_value_is_named(server, monkeypatch):
    assert OpenAIBackend(server.url, model="m").max_reply_bytes == DEFAULT_MAX_REPLY_BYTES
    monkeypatch.setenv(MAX_REPLY_BYTES_ENV, str(LIMIT))
    backend = OpenAIBackend(server.url, model="m")
    try:
        assert backend.max_reply_bytes == LIMIT
        server.mode = "sized"
        with pytest.raises(ReplyTooLarge):
            backend.complete(_request())
    finally:
        backend.close()
    monkeypatch.setenv(MAX_REPLY_BYTES_ENV, "lots")
    with pytest.raises(LLMError, match=f"{MAX_REPLY_BYTES_ENV}='lots': expected a whole number of bytes"):
        OpenAIBackend(server.url, model="m")
