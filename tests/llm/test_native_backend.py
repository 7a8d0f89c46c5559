"""NativeBackend passes segments, sessions, hooks and forced text through to the engine."""

from concurrent.futures import Future
from types import SimpleNamespace

from glmcot.llm import LLMRequest, Segment
from glmcot.llm.native import NativeBackend


class FakeEngine:
    def __init__(self):
        self.calls, self.ended = [], []

    def submit(self, prompt, sampling, session=None, priority=0, on_delta=None, on_line=None):
        self.calls.append(SimpleNamespace(prompt=prompt, sampling=sampling, session=session, priority=priority))
        if on_line:
            on_line("first line")
        future = Future()
        future.set_result(SimpleNamespace(text="out", token_ids=[1, 2, 3], prompt_tokens=40, cached_tokens=32,
                                          finish_reason="stop", metrics=SimpleNamespace(ttft=0.01)))
        return future

    def end_session(self, session):
        self.ended.append(session)

    def stats(self):
        return {}


def test_segments_sessions_and_hooks_pass_through():
    from glmcot.engine import Segment as EngineSegment

    engine = FakeEngine()
    backend = NativeBackend(engine)
    lines = []
    request = LLMRequest(
        [Segment("P1", 1), Segment("chunk", 2, "vertex:x"), Segment("Q", 4)],
        max_tokens=12, stop=["</code>"], session="q#1", on_line=lines.append,
    )
    response = backend.complete(request)
    call = engine.calls[0]
    assert call.prompt == [EngineSegment("P1", 1), EngineSegment("chunk", 2, "vertex:x"), EngineSegment("Q", 4)]
    assert call.session == "q#1" and call.sampling.stop == ["</code>"] and call.sampling.max_tokens == 12
    assert lines == ["first line"]
    assert (response.text, response.prompt_tokens, response.cached_tokens, response.output_tokens) == ("out", 40, 32, 3)
    assert response.ttft_s == 0.01
    backend.end_session("q#1")
    assert engine.ended == ["q#1"]


def test_forced_text_drops_the_stop_strings():
    engine = FakeEngine()
    NativeBackend(engine).complete(LLMRequest([Segment("x", 4)], stop=["</code>"], forced_text="<code>\nprint(1)\n"))
    sampling = engine.calls[0].sampling
    assert sampling.forced_text == "<code>\nprint(1)\n" and sampling.stop == []
