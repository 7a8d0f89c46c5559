"""The requests the vllm+glmcot and sglang+glmcot backends send (a fake server; no vLLM needed)."""

from __future__ import annotations

import json

import httpx
import pytest

from glmcot.contract import Level
from glmcot.llm import BackendSpec
from glmcot.system import make_backend
from glmcot.llm.types import LLMRequest, Segment
from glmcot.vllm_plugin import wire

VLLM = BackendSpec.parse("vllm+glmcot:http://127.0.0.1:9/v1")  # a fake server stands behind it


class FakeServer:
    """Answers /models, /tokenize and /completions like vLLM; records the bodies."""

    def __init__(self, forces: bool = False) -> None:
        self.bodies: list[tuple[str, dict]] = []
        self.forces = forces

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path.endswith("/models"):
            return httpx.Response(200, json={"data": [{"id": "tiny", "owned_by": "vllm"}]})
        body = json.loads(request.content)
        self.bodies.append((path, body))
        if path.endswith("/tokenize"):
            return httpx.Response(200, json={"tokens": [ord(c) for c in body["prompt"]]})
        prompt = body.get("prompt") or body.get("messages")
        count = len(prompt) if isinstance(prompt, list) else 1
        forced = (body.get("vllm_xargs") or {}).get(wire.KEY_FORCED)
        if forced is not None and self.forces:  # a server with the forcing processor returns exactly those ids
            return httpx.Response(200, json={"choices": [{"text": "forced:" + ",".join(map(str, forced)),
                                                          "token_ids": forced, "finish_reason": "length"}],
                                             "usage": {"prompt_tokens": count, "completion_tokens": len(forced)}})
        return httpx.Response(200, json={"choices": [{"text": "ok", "message": {"content": "ok"}, "finish_reason": "stop",
                                                      "token_ids": [7]}],
                                         "usage": {"prompt_tokens": count, "completion_tokens": 1,
                                                   "prompt_tokens_details": {"cached_tokens": 0}}})


def with_fake(backend, forces: bool = False):
    server = FakeServer(forces)
    backend._client = httpx.Client(transport=httpx.MockTransport(server))
    return backend, server


def request(session: str | None = "q1") -> LLMRequest:
    return LLMRequest(segments=[Segment("You are the reasoning agent.\n", 1), Segment("Notebook: V1 knows V2.\n", 2),
                                Segment("Question: who?\n", 4)], max_tokens=8, session=session)


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    from glmcot.engine.models.tokenizer import trained_bpe_tokenizer

    directory = tmp_path_factory.mktemp("tokenizer")
    trained_bpe_tokenizer().save(directory)
    return directory


def test_vllm_backend_sends_token_ids_with_spans_equal_to_segment_token_counts(tokenizer_dir):
    from transformers import AutoTokenizer

    backend, server = with_fake(make_backend(VLLM.with_options(tokenizer=str(tokenizer_dir))))
    call = request()
    response = backend.complete(call)
    assert response.text == "ok"
    path, body = server.bodies[-1]
    assert path == "/v1/completions"
    hf = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    counts = [len(hf.encode(s.text, add_special_tokens=False)) for s in call.segments]
    decoded = wire.decode(body["vllm_xargs"])
    assert decoded.spans == ((1, counts[0]), (2, counts[1]), (4, counts[2]))
    assert decoded.session == "q1" and not decoded.end_session
    expected = [t for s in call.segments for t in hf.encode(s.text, add_special_tokens=False)]
    assert body["prompt"] == expected
    assert len(body["prompt"]) == decoded.num_tokens
    assert "segments" not in body and "session" not in body  # glmcot serve's fields are not sent to vLLM


def test_vllm_backend_end_session_sends_the_flag(tokenizer_dir):
    backend, server = with_fake(make_backend(VLLM.with_options(tokenizer=str(tokenizer_dir))))
    backend.end_session("q1")
    path, body = server.bodies[-1]
    decoded = wire.decode(body["vllm_xargs"])
    assert path == "/v1/completions" and decoded.end_session and decoded.session == "q1"
    assert len(body["prompt"]) == 1 and body["max_tokens"] == 1


def test_vllm_backend_without_a_tokenizer_uses_the_servers_tokenize():
    backend, server = with_fake(make_backend(VLLM))
    call = request(session=None)
    backend.complete(call)
    backend.complete(call)
    tokenized = [body["prompt"] for path, body in server.bodies if path == "/tokenize"]
    assert tokenized == [s.text for s in call.segments]  # each segment once (memoised)
    _, body = server.bodies[-1]
    decoded = wire.decode(body["vllm_xargs"])
    assert [n for _, n in decoded.spans] == [len(s.text) for s in call.segments]
    assert decoded.session is None


def test_vllm_backend_chat_template_adds_a_level_1_head_and_transient_tail(tokenizer_dir):
    backend, server = with_fake(make_backend(VLLM.with_options(tokenizer=str(tokenizer_dir), chat_template=True)))
    ids, spans = backend.prompt_spans(request())
    assert spans[0][0] == 1 and spans[-1][0] == 4 and len(spans) == 5
    assert sum(n for _, n in spans) == len(ids)


def test_vllm_backend_sends_forced_text_as_forced_token_ids(tokenizer_dir):
    from transformers import AutoTokenizer

    backend, server = with_fake(make_backend(VLLM.with_options(tokenizer=str(tokenizer_dir))),
                                forces=True)
    call = request()
    call.forced_text = "Needed: the author of V1"
    call.stop = ["\n"]
    call.max_tokens = 64
    lines = []
    call.on_line = lines.append
    response = backend.complete(call)
    path, body = server.bodies[-1]
    ids = AutoTokenizer.from_pretrained(str(tokenizer_dir)).encode(call.forced_text, add_special_tokens=False)
    assert path == "/v1/completions" and body["stream"] is False and body["return_token_ids"] is True
    assert wire.decode_forced(body["vllm_xargs"]) == tuple(ids)
    assert body["max_tokens"] == len(ids) and "stop" not in body  # forced text already ends where a stop would cut
    assert wire.decode(body["vllm_xargs"]).session == "q1"  # the levels travel with it
    assert response.text == "forced:" + ",".join(map(str, ids)) and lines == [response.text]
    assert response.output_tokens == len(ids) and response.finish_reason == "stop"


def test_vllm_backend_caps_forced_text_at_max_tokens_and_sends_the_empty_text(tokenizer_dir):
    backend, server = with_fake(make_backend(VLLM.with_options(tokenizer=str(tokenizer_dir))),
                                forces=True)
    call = request()
    call.forced_text = "a long forced reply " * 4
    call.max_tokens = 3
    response = backend.complete(call)
    assert len(wire.decode_forced(server.bodies[-1][1]["vllm_xargs"])) == 3
    assert response.output_tokens == 3 and response.finish_reason == "length"
    call.forced_text = ""
    call.max_tokens = 8
    backend.complete(call)
    body = server.bodies[-1][1]
    assert wire.decode_forced(body["vllm_xargs"]) == () and body["max_tokens"] == 1  # the end token at once


def test_vllm_backend_refuses_text_a_server_did_not_force(tokenizer_dir):
    from glmcot.llm.types import LLMError

    backend, _ = with_fake(make_backend(VLLM.with_options(tokenizer=str(tokenizer_dir))))
    call = request()
    call.forced_text = "x"
    with pytest.raises(LLMError, match="did not force-decode.*--logits-processors"):
        backend.complete(call)


def test_forced_wire_round_trip_and_errors():
    xargs = wire.encode_forced([5, 0, 17])
    assert xargs == {"glmcot_wire": 1, "glmcot_forced": [5, 0, 17]}
    assert wire.decode_forced(xargs) == (5, 0, 17)
    assert wire.decode_forced({**wire.encode([(1, 4)]), **xargs}) == (5, 0, 17)  # with levels: both read
    assert wire.decode_forced(wire.encode([(1, 4)])) is None and wire.decode_forced(None) is None
    assert wire.decode_forced(wire.encode_forced([])) == ()
    for bad in ({"glmcot_wire": 2, "glmcot_forced": [1]}, {"glmcot_forced": [1]}, {"glmcot_wire": 1, "glmcot_forced": 3},
                {"glmcot_wire": 1, "glmcot_forced": [1, -2]}, {"glmcot_wire": 1, "glmcot_forced": ["a"]},
                {"glmcot_wire": 1, "glmcot_forced": [True]}, {"glmcot_wire": 1, "glmcot_forced": [2**40]}):
        with pytest.raises(wire.WireError):
            wire.decode_forced(bad)
    with pytest.raises(wire.WireError):
        wire.encode_forced([-1])


def test_unknown_engine_flavour_is_a_clear_error():
    with pytest.raises(ValueError, match="vllm\\+glmcot:URL"):
        BackendSpec.parse("vllm+other:http://127.0.0.1:9/v1")
    with pytest.raises(ValueError, match="server URL"):
        BackendSpec.parse("vllm+glmcot:")


def test_wire_round_trip_and_errors():
    xargs = wire.encode([(Level.SHARED_PROMPT, 5), (1, 3), (2, 0), (4, 2)], "s", end_session=True)
    assert xargs == {"glmcot_wire": 1, "glmcot_levels": [1, 4], "glmcot_tokens": [8, 2], "glmcot_session": "s",
                     "glmcot_end_session": 1}
    assert all(not isinstance(v, dict) for v in xargs.values())  # vllm_xargs takes flat values only
    decoded = wire.decode(xargs)
    assert decoded.spans == ((1, 8), (4, 2)) and decoded.session == "s" and decoded.end_session
    assert wire.decode({"other": 1}) is None
    assert wire.decode({"glmcot_wire": 1, "glmcot_levels": [], "glmcot_tokens": []}, session_id="v").session == "v"
    for bad in ({"glmcot_wire": 2}, {"glmcot_wire": 1, "glmcot_levels": [5], "glmcot_tokens": [1]},
                {"glmcot_wire": 1, "glmcot_levels": [1], "glmcot_tokens": [-1]},
                {"glmcot_wire": 1, "glmcot_levels": [1], "glmcot_tokens": []}):
        with pytest.raises(wire.WireError):
            wire.decode(bad)


def test_block_levels_push_protection_to_the_head():
    from glmcot.vllm_plugin.levels import block_levels

    # 4-token blocks: [P1 P1 P1 P1][P1 P1 P4 P4][P2 ...] -> the P4 block before a notebook rises to 2
    assert block_levels([(1, 6), (4, 2), (2, 4)], 12, 3, 4) == [1, 1, 2]
    assert block_levels([(1, 4)], 4, 3, 4) == [1, 4, 4]  # generated tokens are transient
    assert block_levels([], 8, 2, 4) == [4, 4]


def test_sglang_priorities_follow_the_levels():
    from glmcot.llm.sglang_backend import NOTEBOOK_PRIORITY, SHARED_PRIORITY, TRANSIENT_PRIORITY, request_priority

    assert request_priority(request()) == NOTEBOOK_PRIORITY
    act = LLMRequest(segments=[Segment("You act.\n", 1), Segment("Needed: x\n", 4)])
    assert request_priority(act) == TRANSIENT_PRIORITY
    backend, server = with_fake(make_backend(BackendSpec.parse("sglang+glmcot:http://127.0.0.1:9/v1").with_options(model="tiny")))
    backend.complete(act)
    backend.complete(act)
    sent = [body for _, body in server.bodies]
    # the level-1 head alone first, at the highest priority, once; then the call at its own priority
    assert [body["priority"] for body in sent] == [SHARED_PRIORITY, TRANSIENT_PRIORITY, TRANSIENT_PRIORITY]
    assert sent[0]["messages"][-1]["content"] == "You act.\n" and sent[0]["max_tokens"] == 1
    assert sent[1]["messages"][-1]["content"] == "You act.\nNeeded: x\n"
