"""A request's grammar goes to an OpenAI-compatible server as vLLM's structured outputs when the
server takes them; a server that refuses the field gets the request again without it, and no
later request carries it."""

import json
import threading
from http.server import ThreadingHTTPServer

import pytest

from glmcot.contract import Level, Segment
from glmcot.llm.openai_backend import OpenAIBackend
from glmcot.llm.types import Grammar, LLMRequest
from tests.stubs import JSONHandler

GRAMMAR = Grammar('root ::= "<label>" ("deterministic" | "non-deterministic") "</label>"\n', "classify")


def _server(refuse: bool):
    bodies = []

    class Handler(JSONHandler):
        def do_GET(self):
            self.send_json(200, {"object": "list", "data": [{"id": "m", "object": "model"}]})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            bodies.append(body)
            if refuse and "structured_outputs" in body:
                self.send_json(400, {"error": {"message": "Unrecognized request argument supplied: structured_outputs"}})
                return
            self.send_json(200, {"id": "x", "object": "text_completion", "model": "m",
                                 "choices": [{"index": 0, "text": "<label>deterministic", "finish_reason": "stop"}],
                                 "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, bodies


@pytest.mark.parametrize("refuse", [False, True])
def test_grammar_is_sent_as_structured_outputs_or_dropped_when_refused(refuse):
    server, bodies = _server(refuse)
    backend = OpenAIBackend(f"http://127.0.0.1:{server.server_port}/v1", model="m", mode="completions",
                            glmcot_extras=False, max_retries=0)
    try:
        request = LLMRequest([Segment("Question: q\n", Level.TRANSIENT)], stop=["</label>"], grammar=GRAMMAR,
                             metadata={"agent": "classify"})
        assert backend.complete(request).text == "<label>deterministic"
        assert bodies[0]["structured_outputs"] == {"grammar": GRAMMAR.ebnf}
        assert backend.structured_outputs is (not refuse)
        backend.complete(request)
        assert ("structured_outputs" in bodies[-1]) is (not refuse)
        assert len(bodies) == (3 if refuse else 2)  # a refusal costs one extra request, once
        backend.complete(LLMRequest([Segment("x", Level.TRANSIENT)]))
        assert "structured_outputs" not in bodies[-1]  # no grammar, no field
    finally:
        backend.close()
        server.shutdown()
        server.server_close()
