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
