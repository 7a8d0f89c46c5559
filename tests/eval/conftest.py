"""Shared fixtures: a small OpenAI-compatible HTTP server whose "model" is a fixed answer table.

It stands in for a user's vLLM/Ollama server (none can run here); the client side (glmcot.llm's
OpenAI backend, the eval runner, the judge) is the real code."""

from __future__ import annotations

import json
import re
import threading
from http.server import ThreadingHTTPServer

import pytest

from tests.stubs import JSONHandler


class AnswerTable:
    def __init__(self, answers: dict[str, str]):
        self.answers = answers
        self.calls: list[str] = []
        self.lock = threading.Lock()

    def reply(self, prompt: str) -> str:
        with self.lock:
            self.calls.append(prompt)
        if "Reference answer:" in prompt or "Ground truth:" in prompt:  # the lenient or the original judge
            lenient = "Reference answer:" in prompt
            model = re.search(r"Model answer: (.*)" if lenient else r"Model prediction: (.*)", prompt).group(1)
            gold = re.search(r"Reference answer: (.*)" if lenient else r"Ground truth: (.*)\.", prompt).group(1)
            model, gold = model.strip().lower().rstrip("."), gold.strip().lower().rstrip(".")
            if "weather" in prompt:
                return "It depends"
            return "Yes" if model == gold else "No"
        question = re.findall(r"Question: (.*)", prompt)[-1].strip()
        return self.answers.get(question, "I do not know")


def _handler(table: AnswerTable):
    class Handler(JSONHandler):
        def _send(self, data: dict) -> None:
            self.send_json(200, data)

        def do_GET(self):
            self._send({"object": "list", "data": [{"id": "table-model", "object": "model"}]})

        def do_POST(self):
            length = int(self.headers.get("Content-Length", 0))
            request = json.loads(self.rfile.read(length))
            prompt = request["messages"][-1]["content"] if "messages" in request else request["prompt"]
            text = table.reply(prompt)
            self._send({"id": "x", "object": "chat.completion", "model": "table-model",
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                     "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": len(text.split()),
                                  "total_tokens": len(prompt.split()) + len(text.split())}})

    return Handler


@pytest.fixture
def table_server():
    """Yields (base_url, table); set table.answers before calling."""
    table = AnswerTable({})
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(table))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", table
    finally:
        server.shutdown()
        server.server_close()
