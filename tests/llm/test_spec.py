"""BackendSpec: the one reader of the backend text form, and its writer."""

from __future__ import annotations

import pytest

from glmcot.llm.spec import FORMS, SPEC_HELP, BackendKind, BackendSpec, BackendSpecError, ServerOptions

# Every accepted form, with what it means.
ACCEPTED = {
    "scripted": BackendSpec(kind=None, scripted=True),
    "scripted+native:random:qwen3:tiny": BackendSpec(BackendKind.NATIVE, "random:qwen3:tiny", scripted=True),
    "scripted+openai+glmcot:http://127.0.0.1:8000/v1": BackendSpec(BackendKind.OPENAI, "http://127.0.0.1:8000/v1",
                                                                   scripted=True, glmcot_wire=True),
    "scripted+replay:runs/traces.jsonl": BackendSpec(BackendKind.REPLAY, "runs/traces.jsonl", scripted=True),
    "openai:http://127.0.0.1:8000/v1": BackendSpec(BackendKind.OPENAI, "http://127.0.0.1:8000/v1"),
    "openai-chat:http://h:1/v1": BackendSpec(BackendKind.OPENAI_CHAT, "http://h:1/v1"),
    "openai-completions:http://h:1/v1": BackendSpec(BackendKind.OPENAI_COMPLETIONS, "http://h:1/v1"),
    "openai+glmcot:http://h:1/v1": BackendSpec(BackendKind.OPENAI, "http://h:1/v1", glmcot_wire=True),
    "openai-chat+glmcot:http://h:1/v1": BackendSpec(BackendKind.OPENAI_CHAT, "http://h:1/v1", glmcot_wire=True),
    "openai-completions+glmcot:http://h:1/v1": BackendSpec(BackendKind.OPENAI_COMPLETIONS, "http://h:1/v1",
                                                           glmcot_wire=True),
    "vllm+glmcot:http://h:1/v1": BackendSpec(BackendKind.VLLM, "http://h:1/v1", glmcot_wire=True),
    "sglang+glmcot:http://h:1/v1": BackendSpec(BackendKind.SGLANG, "http://h:1/v1", glmcot_wire=True),
    "native:random:qwen3:tiny": BackendSpec(BackendKind.NATIVE, "random:qwen3:tiny"),
    "native:/models/qwen3-8b": BackendSpec(BackendKind.NATIVE, "/models/qwen3-8b"),
    "native:glmcot-mini": BackendSpec(BackendKind.NATIVE, "glmcot-mini"),
    "replay:runs/glm.jsonl": BackendSpec(BackendKind.REPLAY, "runs/glm.jsonl"),
}


@pytest.mark.parametrize("text", sorted(ACCEPTED))
def test_every_accepted_form_parses_and_round_trips(text):
    spec = BackendSpec.parse(text)
    assert spec == ACCEPTED[text]
    assert str(spec) == text
    assert BackendSpec.parse(str(spec)) == spec


def test_every_kind_and_the_wire_flag_are_covered():
    kinds = {spec.kind for spec in ACCEPTED.values()}
    assert kinds == set(BackendKind) | {None}
    # the help text names a form for every kind
    assert all(kind.value + ":" in SPEC_HELP or kind.value + "+glmcot:" in SPEC_HELP for kind in BackendKind)
    assert len(FORMS) == len(set(FORMS))


def test_surrounding_space_is_ignored_and_options_are_not_part_of_the_text():
    spec = BackendSpec.parse("  openai:http://h:1/v1 ")
    assert str(spec) == "openai:http://h:1/v1"
    tuned = spec.with_options(model="m", api_key="sk-secret", timeout_s=3.0, max_retries=0)
    assert tuned.options == ServerOptions(model="m", api_key="sk-secret", timeout_s=3.0, max_retries=0)
    assert str(tuned) == str(spec) and BackendSpec.parse(str(tuned)) == spec
    assert "sk-secret" not in repr(tuned)   # a key never reaches a log line
    assert BackendSpec.openai("http://h:1/v1", model="m") == spec.with_options(model="m")


def test_the_scripted_flag_over_a_model():
    spec = BackendSpec.parse("scripted+native:random:qwen3:tiny")
    assert spec.scripted and spec.model == BackendSpec.parse("native:random:qwen3:tiny")
    assert BackendSpec.parse("scripted").model is None
    assert BackendSpec.parse("vllm+glmcot:http://h/v1").is_server
    assert not BackendSpec.parse("native:random:qwen3:tiny").is_server


@pytest.mark.parametrize("text, message", [
    ("gpt5", "unknown backend 'gpt5'; expected scripted | scripted+SPEC | openai:URL"),
    ("", "unknown backend ''; expected"),
    ("openai", "openai: give the server URL, e.g. openai:http://127.0.0.1:8000/v1"),
    ("openai:", "give the server URL"),
    ("native", "native: give a model, e.g. native:random:qwen3:tiny"),
    ("replay:", "give the recorded file, e.g. replay:traces.jsonl"),
    ("vllm:http://h/v1", r"did you mean vllm\+glmcot:URL \(or openai:URL for a plain server\)"),
    ("sglang:http://h/v1", r"did you mean sglang\+glmcot:URL"),
    ("vllm+other:http://h/v1", r"did you mean vllm\+glmcot:URL"),
    ("vllm+glmcot:", "vllm\\+glmcot: give the server URL"),
    ("openai+vllm:http://h/v1", r"did you mean openai\+glmcot:URL"),
    ("native+glmcot:random:qwen3:tiny", "the co-design wire is a server's"),
    ("scripted:random:qwen3:tiny", r"did you mean scripted\+native:random:qwen3:tiny"),
    ("scripted+scripted", "unknown backend"),
    ("scripted+gpt5:x", "unknown backend 'scripted\\+gpt5:x'"),
])
def test_bad_specs_say_what_is_accepted(text, message):
    with pytest.raises(BackendSpecError, match=message):
        BackendSpec.parse(text)


def test_an_unknown_form_lists_every_accepted_one():
    with pytest.raises(ValueError) as caught:   # a ValueError: the command lines report those as usage errors
        BackendSpec.parse("gpt5:x")
    assert all(form in str(caught.value) for form in FORMS)


def test_a_spec_is_checked_when_built_in_code_too():
    with pytest.raises(BackendSpecError, match="scripted"):
        BackendSpec(kind=None)
    with pytest.raises(BackendSpecError, match="sglang"):
        BackendSpec(BackendKind.SGLANG, "http://h/v1")
