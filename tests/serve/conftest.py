"""Servers for the serve tests: real uvicorn on a free loopback port, always stopped."""

from __future__ import annotations

import pytest

from glmcot.serve.config import ServeConfig
from glmcot.serve.runtime import Runtime
from glmcot.serve.server import BackgroundServer

API_KEY = "test-key-0123"


@pytest.fixture(scope="module")
def bare_server():
    """A server with no engine and no graphs: everything in front of the handlers is real."""
    config = ServeConfig(port=0, api_key=API_KEY, max_body_bytes=4096, max_question_chars=100)
    runtime = Runtime(config=config)
    with BackgroundServer(config, runtime) as server:
        yield server
    runtime.close()


MODEL = "random:qwen3:tiny"


@pytest.fixture(scope="session")
def engine():
    """One tiny random-weight engine shared by the tests that need one."""
    pytest.importorskip("glmcot.engine.async_engine", reason="glmcot.engine.AsyncEngine missing")
    from glmcot.engine import AsyncEngine, EngineConfig

    engine = AsyncEngine(EngineConfig(model=MODEL, num_threads=1, kv_cache_tokens=8192))
    yield engine
    engine.shutdown()


def idle(engine, timeout=600.0):
    """Waits until the engine runs nothing and returns its stats. `AsyncEngine.stats()` is a
    snapshot taken after each step, so a one-token request is run first to refresh it."""
    import time

    from glmcot.engine import SamplingParams

    deadline = time.monotonic() + timeout
    while True:
        engine.submit("x", SamplingParams(max_tokens=1)).result(timeout)
        stats = engine.stats()
        if stats.get("running", 0) == 0 and stats.get("waiting", 0) == 0:
            return stats
        if time.monotonic() > deadline:
            raise AssertionError(f"engine still busy: {stats}")
        time.sleep(0.05)


def wait_for_health(process, url: str, timeout_s: float = 600.0) -> None:
    """Waits until a `glmcot serve` subprocess answers /health with 200 (generous: the first start
    may build the CPU kernels on a busy machine); fails with its output if it exits first."""
    import time

    import httpx

    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            pytest.fail(f"glmcot serve exited early:\n{process.stdout.read()}")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "glmcot serve did not come up"
        time.sleep(0.2)
