"""Read deadlines on a real server: connections that send their request head or body too slowly
(slowloris) are answered 408 and closed, however they trickle; normal requests are unaffected.
Raw loopback sockets; every wait is bounded and generous (nothing asserts a speed)."""

from __future__ import annotations

import selectors
import socket
import time

import httpx
import pytest

from glmcot.serve.config import ServeConfig
from glmcot.serve.runtime import Runtime
from glmcot.serve.server import BackgroundServer

from .conftest import API_KEY

WAIT_S = 120.0   # generous bound for a loaded machine; the server's deadlines are 1 s


@pytest.fixture(scope="module")
def server():
    config = ServeConfig(port=0, api_key=API_KEY, header_timeout_s=1.0, body_timeout_s=1.0)
    runtime = Runtime(config=config)
    with BackgroundServer(config, runtime) as server:
        yield server
    runtime.close()


def _trickle_until_closed(sockets: list[socket.socket], drip: bytes | None) -> dict[socket.socket, bytes]:
    """Sends `drip` to every socket every 50 ms (None: sends nothing) until the server has closed
    each one; returns what each received."""
    received = {sock: b"" for sock in sockets}
    selector = selectors.DefaultSelector()
    for sock in sockets:
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
    open_ = set(sockets)
    deadline = time.monotonic() + WAIT_S
    while open_ and time.monotonic() < deadline:
        for key, _ in selector.select(timeout=0.05):
            sock = key.fileobj
            try:
                data = sock.recv(65536)
            except (ConnectionResetError, BlockingIOError):
                data = b""
            if data:
                received[sock] += data
            else:
                selector.unregister(sock)
                open_.discard(sock)
        if drip is not None:
            for sock in list(open_):
                try:
                    sock.send(drip)
                except (BrokenPipeError, ConnectionResetError, BlockingIOError):
                    pass
    selector.close()
    assert not open_, f"{len(open_)} slow connection(s) still open after {WAIT_S} s"
    return received


def _connect(server, count: int) -> list[socket.socket]:
    return [socket.create_connection(("127.0.0.1", server.config.port), timeout=WAIT_S) for _ in range(count)]


def test_connections_trickling_their_headers_are_answered_408_and_closed(server):
    sockets = _connect(server, 200)
    try:
        for sock in sockets:
            sock.sendall(b"POST /v1/ask HTTP/1.1\r\nHost: x\r\n")
        received = _trickle_until_closed(sockets, b"X")   # an endless header line, a byte at a time
    finally:
        for sock in sockets:
            sock.close()
    assert all(data.startswith(b"HTTP/1.1 408 Request Timeout") for data in received.values())
    assert b"the request headers did not arrive within 1 s" in received[sockets[0]]
    assert httpx.get(server.url + "/health", timeout=WAIT_S).status_code in (200, 503)


def test_a_silent_connection_is_closed(server):
    sockets = _connect(server, 20)
    try:
        received = _trickle_until_closed(sockets, None)
    finally:
        for sock in sockets:
            sock.close()
    assert set(received.values()) == {b""}


def test_a_body_sent_too_slowly_is_answered_408(server):
    sockets = _connect(server, 20)
    try:
        for sock in sockets:
            sock.sendall(b"POST /v1/ask HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + API_KEY.encode()
                         + b"\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"q")
        received = _trickle_until_closed(sockets, b" ")
    finally:
        for sock in sockets:
            sock.close()
    assert all(data.startswith(b"HTTP/1.1 408 Request Timeout") for data in received.values())
    assert b"the request body did not arrive within 1 s" in received[sockets[0]]


def test_a_kept_alive_connection_gets_the_head_deadline_again_and_normal_requests_pass(server):
    with httpx.Client(base_url=server.url, timeout=WAIT_S) as client:
        for _ in range(3):   # one connection, several requests: each head arrives in time
            assert client.get("/health").status_code in (200, 503)
    sock = socket.create_connection(("127.0.0.1", server.config.port), timeout=WAIT_S)
    try:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        first = b""
        while b"\r\n\r\n" not in first:
            first += sock.recv(65536)
        sock.sendall(b"GET /health HTTP/1.1\r\n")   # the next request's head, never finished
        received = _trickle_until_closed([sock], b"Y")
    finally:
        sock.close()
    assert b"408 Request Timeout" in received[sock]
