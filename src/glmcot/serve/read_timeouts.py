"""Read deadlines for HTTP requests: uvicorn reads a request head and body for as long as the
client takes, so slow or silent connections (slowloris) would stay open indefinitely and use
up the connection limit.

`read_deadline_protocol` returns uvicorn's h11 protocol with two deadlines:
- the request head (request line and headers) must be complete within `header_timeout_s` of the
  connection opening, or of the previous response on a kept-alive connection;
- the body within `body_timeout_s` of the head.
Each deadline runs from the start of its phase: trickling a byte at a time does not extend it.
Past one, the client gets `408 Request Timeout` (when no response has started) and the
connection is closed. Handling the request (the agents' work, a stream) is bounded by the
server's request timeout, not by these."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("glmcot.serve")

_TIMEOUT_RESPONSE = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
                     b"content-length: %d\r\n\r\n%s")


def _timeout_body(what: str, seconds: float) -> bytes:
    import json

    return json.dumps({"error": {"message": f"the request {what} did not arrive within {seconds:g} s",
                                 "type": "timeout_error", "code": "request_read_timeout"}}).encode()


class ReadDeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol with the head and body read deadlines (class attributes, set by
    `read_deadline_protocol`)."""

    header_timeout_s: float = 20.0
    body_timeout_s: float = 60.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._phase: str | None = None   # "head", "body" or None (handling or closed)
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._follow_phase()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._follow_phase()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow_phase()

    def connection_lost(self, exc: Exception | None) -> None:
        self._set_phase(None)
        super().connection_lost(exc)

    def _follow_phase(self) -> None:
        cycle = self.cycle
        if self.transport is None or self.transport.is_closing():
            phase = None
        elif cycle is None or cycle.response_complete:
            phase = "head"
        elif cycle.more_body and not cycle.response_started:
            phase = "body"
        else:
            phase = None
        if phase != self._phase:
            self._set_phase(phase)

    def _set_phase(self, phase: str | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._phase = phase
        if phase is not None:
            seconds = self.header_timeout_s if phase == "head" else self.body_timeout_s
            self._deadline = self.loop.call_later(seconds, self._expired, phase, seconds)

    def _expired(self, phase: str, seconds: float) -> None:
        self._deadline = None
        if self._phase != phase or self.transport.is_closing():
            return
        cycle = self.cycle
        responding = cycle is not None and not cycle.response_complete and cycle.response_started
        # a connection that sent nothing of a request is just closed (as uvicorn closes an idle
        # kept-alive one); one that sent part of a request is told why
        if not responding and (phase == "body" or self.conn.trailing_data[0]):
            body = _timeout_body("headers" if phase == "head" else "body", seconds)
            self.transport.write(_TIMEOUT_RESPONSE % (len(body), body))
        log.info("closed a connection from %s: its request %s took longer than %g s",
                 self.client, "head" if phase == "head" else "body", seconds)
        self._phase = None
        self.transport.close()


def read_deadline_protocol(header_timeout_s: float, body_timeout_s: float) -> type[ReadDeadlineProtocol]:
    """The protocol class for uvicorn.Config(http=...) with these deadlines."""
    return type("ReadDeadlineProtocol", (ReadDeadlineProtocol,),
                {"header_timeout_s": float(header_timeout_s), "body_timeout_s": float(body_timeout_s)})
