"""NativeBackend passes segments, sessions, hooks and forced text through to the engine."""

from concurrent.futures import Future
from types import SimpleNamespace

import pytest

from glmcot.llm import LLMError, LLMRequest, Segment
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


class RefusingEngine(FakeEngine):
    """Refuses at submit (as AsyncEngine does for a prompt that can never fit) or fails later."""

    def __init__(self, refuse=None, fail=None):
        super().__init__()
        self.refuse, self.fail = refuse, fail

    def submit(self, prompt, sampling, **kw):
        if self.refuse is not None:
            raise self.refuse
        future = Future()
        future.set_exception(self.fail)
        return future


def test_request_errors_become_llm_errors_with_the_engine_message():
    from glmcot.engine import PromptTooLongError

    message = "prompt of 9000 tokens cannot fit: max_model_len is 8192"
    for engine, kind in ((RefusingEngine(refuse=PromptTooLongError(message)), "PromptTooLongError"),
                         (RefusingEngine(refuse=ValueError("empty prompt")), "ValueError"),
                         (RefusingEngine(fail=ValueError("bad token id")), "ValueError")):
        with pytest.raises(LLMError, match=kind) as caught:
            NativeBackend(engine).complete(LLMRequest([Segment("x", 4)]))
        assert str(engine.refuse or engine.fail) in str(caught.value)
    # a request the engine cannot even build (negative max_tokens) is one too
    with pytest.raises(LLMError, match="max_tokens must be >= 0"):
        NativeBackend(FakeEngine()).complete(LLMRequest([Segment("x", 4)], max_tokens=-1))


def test_a_timed_out_request_is_aborted():
    class SlowEngine(FakeEngine):
        aborted = []

        def submit(self, prompt, sampling, **kw):
            future = Future()
            future.request_id = "r-1"
            return future

        def abort(self, request_id):
            self.aborted.append(request_id)

    engine = SlowEngine()
    with pytest.raises(LLMError, match="no answer within 0.05 s"):
        NativeBackend(engine, timeout_s=0.05).complete(LLMRequest([Segment("x", 4)]))
    assert engine.aborted == ["r-1"]


def test_real_engine_refusing_a_long_prompt_is_an_llm_error():
    """The tiny random-weight engine with a 64-token limit: the agents' over-long prompt case."""
    pytest.importorskip("glmcot.engine.async_engine")
    backend = NativeBackend(model="random:qwen3:tiny", max_model_len=64, kv_cache_tokens=256, num_threads=1)
    try:
        with pytest.raises(LLMError, match=r"PromptTooLongError: prompt of \d+ tokens cannot fit: max_model_len is 64"):
            backend.complete(LLMRequest([Segment("word " * 200, 4)], max_tokens=4))
        # the engine still serves what fits
        assert backend.complete(LLMRequest([Segment("word", 4)], max_tokens=2)).prompt_tokens >= 1
    finally:
        backend.close()


def test_a_dead_engine_process_is_an_llm_error_naming_its_exit():
    """The agents' view of `glmcot serve --engine-process` losing its engine: a backend_error
    with the reason, for the request in flight and every later one."""
    import os
    import signal
    import threading

    pytest.importorskip("glmcot.engine.process_engine")
    from glmcot.engine import EngineConfig, ProcessEngine

    engine = ProcessEngine(EngineConfig(model="random:qwen3:tiny", num_threads=1), start_timeout_s=600)
    try:
        backend = NativeBackend(engine)
        started, failures = threading.Event(), []

        def ask() -> None:
            try:
                backend.complete(LLMRequest([Segment("word", 4)], max_tokens=4000, on_delta=lambda _: started.set()))
            except LLMError as error:
                failures.append(str(error))

        asking = threading.Thread(target=ask)
        asking.start()
        assert started.wait(120)
        os.kill(engine.pid, signal.SIGKILL)
        asking.join(120)
        assert len(failures) == 1 and "EngineClosedError" in failures[0] and "SIGKILL" in failures[0]
        with pytest.raises(LLMError, match="refused the request: EngineClosedError: .*SIGKILL"):
            backend.complete(LLMRequest([Segment("word", 4)], max_tokens=2))
    finally:
        engine.shutdown()
