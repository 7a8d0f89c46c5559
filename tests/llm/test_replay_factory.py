import json

import pytest

from glmcot.llm import BackendSpec, LLMError, LLMRequest, LLMResponse, Segment
from glmcot.system import make_backend
from glmcot.llm.replay import RecordingBackend, ReplayBackend
from glmcot.agents.scripted import ScriptedBackend


class Echo:
    label = "echo"

    def complete(self, request):
        return LLMResponse(f"echo {request.metadata['step']}", 7, 2, 3, 0.01)

    def end_session(self, session):
        pass

    def close(self):
        pass


def request(step, attempt=0, prompt="p"):
    return LLMRequest([Segment(prompt, 4)], metadata={"qid": "q", "agent": "act", "step": step, "attempt": attempt})


def test_record_then_replay(tmp_path):
    path = tmp_path / "calls.jsonl"
    recorder = RecordingBackend(Echo(), path)
    for step in range(3):
        recorder.complete(request(step))
    recorder.close()
    with open(path, "a") as handle:
        handle.write('{"torn": ')  # a crash mid-write
    replay = ReplayBackend(path)
    assert len(replay) == 3
    lines = []
    out = replay.complete(LLMRequest([Segment("p", 4)], metadata={"qid": "q", "agent": "act", "step": 1}, on_line=lines.append))
    assert (out.text, out.prompt_tokens, out.cached_tokens, out.output_tokens) == ("echo 1", 7, 2, 3)
    assert lines == ["echo 1"]
    with pytest.raises(LLMError, match="no recorded call"):
        replay.complete(request(9))
    with pytest.raises(LLMError, match="differs"):
        ReplayBackend(path, strict=True).complete(request(1, prompt="another prompt"))


def test_replay_reads_question_traces(tmp_path):
    path = tmp_path / "traces.jsonl"
    event = {"type": "llm", "metadata": {"qid": "q", "agent": "reason", "step": 0, "attempt": 0},
             "response": {"text": "<answer>x</answer>", "prompt_tokens": 5, "output_tokens": 2}}
    path.write_text(json.dumps({"qid": "q", "trace": [event, {"type": "exec"}]}) + "\n")
    out = ReplayBackend(path).complete(LLMRequest([Segment("p", 4)], metadata={"qid": "q", "agent": "reason", "step": 0}))
    assert out.text == "<answer>x</answer>"


def test_make_backend_builds_what_the_spec_names(tmp_path):
    assert isinstance(make_backend(BackendSpec.parse("scripted"), questions=[{"qid": "a", "plan": {}}]), ScriptedBackend)
    with pytest.raises(ValueError, match="questions"):
        make_backend(BackendSpec.parse("scripted"))
    with pytest.raises(FileNotFoundError):
        make_backend(BackendSpec.parse(f"replay:{tmp_path / 'none.jsonl'}"))
    backend = make_backend(BackendSpec.openai("http://127.0.0.1:1/v1", model="m"), record=tmp_path / "rec.jsonl")
    assert isinstance(backend, RecordingBackend)
    backend.close()
    scripted = make_backend(BackendSpec.parse("scripted+openai:http://127.0.0.1:1/v1"), questions=[{"qid": "a"}],
                            record=tmp_path / "scripted.jsonl")
    assert isinstance(scripted, RecordingBackend) and isinstance(scripted.inner, ScriptedBackend)
    assert scripted.inner.inner.base_url.startswith("http://127.0.0.1:1")
    scripted.close()
