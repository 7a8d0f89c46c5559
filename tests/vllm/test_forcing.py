"""Forced decoding in a real vLLM engine (`vllm serve` on a tiny random checkpoint, the eviction
plugin enforcing, the forcing logits processor loaded with --logits-processors): a forced request
returns exactly its tokens, an unforced one beside it is what it would have been anyway, bad
forced ids are refused with a reason and never stop the server; and the scripted policy runs GLM
questions end to end through it."""

from __future__ import annotations

import concurrent.futures
import json

import pytest

from tests.vllm.conftest import FORCING, glmcot_cli, needs_vllm, vllm_server

needs_vllm()


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from glmcot.benchmarks.tiny_checkpoint import tiny_qwen3

    return tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3"))


@pytest.fixture(scope="module")
def server(checkpoint, tmp_path_factory):
    # GLM's prompts are about 1k tokens: a 4k model length (and a pool of as much)
    with vllm_server(checkpoint, tmp_path_factory.mktemp("serve-forcing"), extra=("--logits-processors", FORCING),
                     blocks=129, max_model_len=4096) as (url, _):
        yield url, checkpoint


@pytest.fixture(scope="module")
def tokenizer(checkpoint):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(checkpoint))


def completion(url: str, prompt: list[int], max_tokens: int, xargs: dict | None = None):
    import httpx

    body = {"model": "tiny", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0, "return_token_ids": True}
    if xargs is not None:
        body["vllm_xargs"] = xargs
    return httpx.post(url + "/v1/completions", json=body, timeout=120)


def test_a_forced_request_returns_exactly_the_forced_text(server, tokenizer):
    from glmcot.vllm_plugin import wire

    url, _ = server
    text = "Needed: the authors of the paper\n<code>print(graph.neighbours('P1'))</code>"
    ids = tokenizer.encode(text, add_special_tokens=False)
    prompt = tokenizer.encode("You are the reasoning agent. Question: who wrote P1?", add_special_tokens=False)
    answer = completion(url, prompt, len(ids), wire.encode_forced(ids))
    assert answer.status_code == 200, answer.text
    choice = answer.json()["choices"][0]
    assert choice["token_ids"] == ids and choice["text"] == tokenizer.decode(ids)
    # past the forced ids comes the end token: a longer limit stops there
    longer = completion(url, prompt, len(ids) + 5, wire.encode_forced(ids)).json()["choices"][0]
    assert longer["token_ids"][: len(ids)] == ids and longer["finish_reason"] == "stop"
    assert len(longer["token_ids"]) <= len(ids) + 1 and longer["text"] == choice["text"]
    # nothing forced: the end token at once, no text
    empty = completion(url, prompt, 4, wire.encode_forced([])).json()["choices"][0]
    assert empty["text"] == "" and empty["finish_reason"] == "stop" and len(empty["token_ids"]) <= 1


def test_an_unforced_request_in_the_same_batch_is_unaffected(server, tokenizer):
    from glmcot.vllm_plugin import wire

    url, _ = server
    plain = tokenizer.encode("Notebook: author A wrote P1 and P3.", add_special_tokens=False)
    other = tokenizer.encode("Question: which venue published P2?", add_special_tokens=False)
    forced = tokenizer.encode(" a reply the model would never write " * 2, add_special_tokens=False)
    steps = len(forced)
    # the same two prompts at the same time, once with the second forced and once without: the
    # first one's greedy tokens must not change
    runs = []
    for xargs in (None, wire.encode_forced(forced), None):
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            first = pool.submit(completion, url, plain, steps, {"note": "plain"})
            second = pool.submit(completion, url, other, steps, xargs)
            runs.append((first.result().json()["choices"][0], second.result().json()["choices"][0]))
    (alone, free_other), (beside, forced_other), (again, _) = runs
    assert forced_other["token_ids"] == forced
    assert free_other["token_ids"] != forced
    assert alone["token_ids"] == again["token_ids"]  # greedy decoding here is repeatable
    assert beside["token_ids"] == alone["token_ids"]


@pytest.mark.parametrize("bad", [[-1], ["a"], [1.5], 7])
def test_malformed_forced_ids_are_refused_with_the_reason(server, tokenizer, bad):
    url, _ = server
    prompt = tokenizer.encode("hello", add_special_tokens=False)
    answer = completion(url, prompt, 4, {"glmcot_wire": 1, "glmcot_forced": bad})
    assert answer.status_code == 400, answer.text
    assert "glmcot_forced" in answer.text and "glmcot forced decoding" in answer.text


def test_an_unknown_wire_version_is_refused(server, tokenizer):
    url, _ = server
    answer = completion(url, tokenizer.encode("hello", add_special_tokens=False), 4,
                        {"glmcot_wire": 9, "glmcot_forced": [5]})
    assert answer.status_code == 400 and "glmcot_wire" in answer.text


def test_ids_past_the_vocabulary_end_the_request_and_the_server_goes_on(server, tokenizer):
    from glmcot.vllm_plugin import wire

    url, _ = server
    prompt = tokenizer.encode("hello", add_special_tokens=False)
    answer = completion(url, prompt, 4, wire.encode_forced([5, 50_000]))
    assert answer.status_code == 200, answer.text
    choice = answer.json()["choices"][0]
    assert choice["text"] == "" and choice["finish_reason"] == "stop"
    ids = tokenizer.encode(" still forcing", add_special_tokens=False)
    assert completion(url, prompt, len(ids), wire.encode_forced(ids)).json()["choices"][0]["token_ids"] == ids


def test_the_backend_refuses_ids_its_tokenizer_does_not_have(server):
    from glmcot.llm import BackendSpec
    from glmcot.llm.types import LLMError
    from glmcot.system import make_backend

    url, checkpoint = server
    backend = make_backend(BackendSpec.parse(f"vllm+glmcot:{url}/v1").with_options(tokenizer=str(checkpoint)))
    backend.tokens.encode = lambda text: [len(backend._hf) + 3]
    with pytest.raises(LLMError, match="outside the tokenizer"):
        backend.forced_ids("x")


def test_scripted_glm_questions_run_end_to_end_through_vllm(server, tmp_path):
    """`glmcot eval --method glm --scripted --llm vllm+glmcot:URL`: the gold plans' replies come
    back from vLLM exactly (the backend checks every reply's token ids), so no call fails."""
    url, checkpoint = server
    data = tmp_path / "dblp"
    code, output = glmcot_cli(["data", "synth", "-d", "dblp", "-o", str(data), "-q", "1"], {})
    assert code == 0, output
    out = tmp_path / "eval"
    code, output = glmcot_cli(["eval", "--method", "glm", "--scripted", "--llm", f"vllm+glmcot:{url}/v1",
                               "--llm-model", "tiny", "--questions", str(data / "questions.jsonl"),
                               "--graph", str(data / "graph"), "--out", str(out), "--limit", "3",
                               "--no-judge", "--concurrency", "2"], {"GLMCOT_LLM_TOKENIZER": str(checkpoint)})
    assert code == 0, output
    rows = [json.loads(line) for line in (out / "glm.jsonl").read_text().splitlines() if line.strip()]
    assert len(rows) == 3
    assert not [row for row in rows if row.get("failure") == "backend_error"], rows
    summary = json.loads((out / "summary.json").read_text())
    assert "scripted policy force-decoded" in summary["backend"]
    glm = summary["methods"]["glm"]
    # the gold answers come out only when every code and answer reply came back token for token
    assert glm["em_count"] == 3 and glm["failures"]["unexpected_output"] == 0 and glm["llm_calls_per_question"] >= 2
