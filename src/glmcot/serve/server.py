"""Running the app under uvicorn: in the foreground (`glmcot serve`) or in a background thread
(tests, benchmarks)."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn

from glmcot.serve.app import create_app
from glmcot.serve.config import ServeConfig
from glmcot.serve.read_timeouts import read_deadline_protocol


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def uvicorn_config(app: Any, config: ServeConfig, log_level: str = "info") -> uvicorn.Config:
    return uvicorn.Config(app, host=config.host, port=config.port, log_level=log_level,
                          timeout_graceful_shutdown=max(1, int(config.shutdown_grace_s)),
                          # connections beyond this get 503 from uvicorn itself
                          limit_concurrency=(config.max_concurrency + config.max_engine_requests
                                             + 2 * config.max_queue + 64),   # both lanes, queues
                          server_header=False, lifespan="on",
                          # read deadlines for request heads and bodies (slow clients)
                          http=read_deadline_protocol(config.header_timeout_s, config.body_timeout_s))


class BackgroundServer:
    """Serves the app on a loopback port in a daemon thread; a context manager that always
    stops it."""

    def __init__(self, config: ServeConfig, runtime: Any = None, log_level: str = "warning"
                 ) -> None:
        if config.port == 0:
            config.port = free_port(config.host)
        self.config = config
        self.app = create_app(config, runtime)
        self.server = uvicorn.Server(uvicorn_config(self.app, config, log_level))
        self.thread = threading.Thread(target=self.server.run, name="glmcot-serve", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.config.host}:{self.config.port}"

    def start(self, timeout: float = 600.0) -> "BackgroundServer":
        """Waits (generously: a loaded machine may be slow) until the server accepts requests."""
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive():
                raise RuntimeError("the server failed to start (see its log)")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError("the server did not start in time")
            time.sleep(0.02)
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)

    def __enter__(self) -> "BackgroundServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
