"""ProcessEngine: AsyncEngine's interface with the engine loop in a child process. Same outputs,
streaming, aborts and errors as AsyncEngine, and a dead or stopped child never leaves a caller
waiting."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from glmcot.engine import (AsyncEngine, EngineClosedError, EngineConfig, ProcessEngine, PromptTooLongError,
                           RequestFailedError, SamplingParams, Segment)

MODEL = "random:qwen3:tiny"
START_S = 600.0    # generous: the first start may build the CPU kernels on a busy machine
RESULT_S = 120.0
PROMPTS = ["The knowledge graph holds papers, authors and venues.", "Who wrote", "café 北京 →",
           [Segment("System prompt.", level=1), Segment(" The question?", level=4)]]


def config(**overrides) -> EngineConfig:
    return EngineConfig(**{"model": MODEL, "num_threads": 1, "max_model_len": 256, **overrides})


@pytest.fixture(scope="module")
def engine():
    with ProcessEngine(config(), start_timeout_s=START_S) as engine:
        yield engine


def wait_idle(engine) -> dict:
    """The engine's stats once it runs nothing: a one-token request refreshes the snapshot."""
    deadline = time.monotonic() + RESULT_S
    while True:
        engine.submit("x", SamplingParams(max_tokens=1)).result(RESULT_S)
        stats = engine.stats()
        if stats["running"] == 0 and stats["waiting"] == 0:
            return stats
        assert time.monotonic() < deadline, stats
        time.sleep(0.05)


def process_gone(pid: int) -> bool:
    """True once `pid` has exited (a zombie nobody reaped counts as exited)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True
    return state in ("Z", "X")


def test_greedy_outputs_equal_the_threaded_engines(engine):
    sampling = SamplingParams(max_tokens=12, ignore_eos=True)
    with AsyncEngine(config()) as local:
        expected = [local.submit(p, sampling).result(RESULT_S) for p in PROMPTS]
    futures = [engine.submit(p, sampling) for p in PROMPTS]
    outputs = [f.result(RESULT_S) for f in futures]
    assert [o.text for o in outputs] == [o.text for o in expected]
    assert [o.token_ids for o in outputs] == [o.token_ids for o in expected]
    assert [o.prompt_tokens for o in outputs] == [o.prompt_tokens for o in expected]
    assert all(o.finish_reason == "length" for o in outputs)
    assert len({f.request_id for f in futures}) == len(futures)


def test_deltas_and_lines_arrive_in_order_and_make_the_text(engine):
    text = "first line\nsecond 北京 line\n\nlast é"
    deltas, lines = [], []
    out = engine.submit("go", SamplingParams(forced_text=text, max_tokens=100), on_delta=deltas.append,
                        on_line=lines.append).result(RESULT_S)
    assert out.text == text and "".join(deltas) == text and len(deltas) > 3
    assert lines == ["first line", "second 北京 line", "", "last é"]

    async def collect():
        return [d async for d in engine.stream("hi", SamplingParams(forced_text="stream me, 北京"))]

    assert "".join(asyncio.run(collect())) == "stream me, 北京"
    assert asyncio.run(engine.generate("hi", SamplingParams(forced_text="ok"))).text == "ok"


def test_abort_frees_the_request(engine):
    started = threading.Event()
    future = engine.submit("x", SamplingParams(max_tokens=200, ignore_eos=True), on_delta=lambda _: started.set())
    assert started.wait(RESULT_S)
    engine.abort(future.request_id)
    out = future.result(RESULT_S)
    assert out.finish_reason == "abort" and len(out.token_ids) < 200
    assert wait_idle(engine)["blocks_used"] == 0


def test_impossible_prompts_are_refused_in_submit(engine):
    with pytest.raises(PromptTooLongError, match="max_model_len is 256"):
        engine.submit(list(range(1, 300)))
    with pytest.raises(ValueError, match="empty prompt"):
        engine.submit([])
    with pytest.raises(ValueError, match="out of range"):
        engine.submit([1, 2, 10**6])
    with pytest.raises(TypeError):
        engine.submit([1.5])
    assert engine.failure is None


def test_a_raising_callback_and_a_session_end_harm_nothing(engine):
    engine.end_session("s1")
    bad = engine.submit("x", SamplingParams(forced_text="ok"), on_delta=lambda d: 1 / 0)
    assert bad.result(RESULT_S).text == "ok"
    assert engine.stats()["generated_tokens"] > 0


def explode_on_marked_requests() -> None:
    """Runs in the engine process (ProcessEngine's process_setup): seed 666 fails in sampling,
    a "BOOM" stop string in detokenising."""
    from glmcot.engine.core import detokenizer, sampler
    from tests.engine.conftest import exploding_parts

    sampler.sample_row, detokenizer.TextStream.add_token = exploding_parts()


def test_one_requests_failure_fails_it_alone():
    with ProcessEngine(config(), start_timeout_s=START_S, process_setup=explode_on_marked_requests) as engine:
        good = [engine.submit(f"prompt {i}", SamplingParams(temperature=1.0, seed=i, max_tokens=6, ignore_eos=True))
                for i in range(3)]
        bad_sample = engine.submit("x", SamplingParams(temperature=1.0, seed=666, max_tokens=6))
        bad_text = engine.submit("y", SamplingParams(max_tokens=6, stop=["BOOM"]))
        with pytest.raises(RequestFailedError, match="sampler exploded"):
            bad_sample.result(RESULT_S)
        with pytest.raises(RequestFailedError, match="detokeniser exploded"):
            bad_text.result(RESULT_S)
        assert [len(f.result(RESULT_S).token_ids) for f in good] == [6, 6, 6]
        assert engine.failure is None
        assert wait_idle(engine)["blocks_used"] == 0


def test_a_killed_engine_process_fails_pending_and_later_requests():
    engine = ProcessEngine(config(max_model_len=4096), start_timeout_s=START_S)
    try:
        started = threading.Event()
        futures = [engine.submit(f"p {i}", SamplingParams(max_tokens=4000, ignore_eos=True),
                                 on_delta=lambda _: started.set()) for i in range(3)]
        assert started.wait(RESULT_S)
        os.kill(engine.pid, signal.SIGKILL)
        for future in futures:
            with pytest.raises(EngineClosedError, match=r"SIGKILL \(exit code -9\)"):
                future.result(RESULT_S)
        assert "SIGKILL" in engine.failure
        with pytest.raises(EngineClosedError, match="SIGKILL"):
            engine.submit("again")
    finally:
        engine.shutdown()
    assert process_gone(engine.pid)


def test_shutdown_stops_the_process_and_fails_what_was_running():
    engine = ProcessEngine(config(max_model_len=4096), start_timeout_s=START_S)
    started = threading.Event()
    running = engine.submit("p", SamplingParams(max_tokens=4000, ignore_eos=True), on_delta=lambda _: started.set())
    assert started.wait(RESULT_S)
    engine.shutdown()
    with pytest.raises(EngineClosedError, match="shut down"):
        running.result(RESULT_S)
    assert engine.exitcode == 0   # it left on the stop message, not a signal
    assert process_gone(engine.pid)
    with pytest.raises(EngineClosedError, match="shut down"):
        engine.submit("x")
    engine.shutdown()   # twice is harmless


def test_start_up_is_bounded_and_says_what_it_waited_for():
    with pytest.raises(TimeoutError, match=r"engine process \(pid \d+\) to load random:qwen3:tiny"):
        ProcessEngine(config(), start_timeout_s=0.01)


def fail_in_setup() -> None:
    raise ValueError("no such device here")


def test_a_failed_start_raises_the_childs_error():
    with pytest.raises(ValueError, match="no such device here"):
        ProcessEngine(config(), start_timeout_s=START_S, process_setup=fail_in_setup)


def test_the_engine_process_exits_when_its_parent_dies(tmp_path):
    script = textwrap.dedent(f"""
        import os, signal
        from glmcot.engine import EngineConfig, ProcessEngine, SamplingParams
        if __name__ == "__main__":
            engine = ProcessEngine(EngineConfig(model={MODEL!r}, num_threads=1, max_model_len=256),
                                   start_timeout_s={START_S})
            engine.submit("busy", SamplingParams(max_tokens=4000, ignore_eos=True))
            print(engine.pid, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
    """)
    path = tmp_path / "parent.py"
    path.write_text(script)
    parent = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=START_S,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert parent.returncode == -signal.SIGKILL, parent.stderr
    child = int(parent.stdout.split()[0])
    deadline = time.monotonic() + RESULT_S
    try:
        while not process_gone(child):
            assert time.monotonic() < deadline, f"engine process {child} outlived its parent"
            time.sleep(0.1)
    finally:
        if not process_gone(child):
            os.kill(child, signal.SIGKILL)
