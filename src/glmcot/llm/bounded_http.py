"""An httpx transport that bounds the size of every reply from an LLM server.

A server (or whatever answers at its address) may send any number of bytes; read whole, a
30-million-character reply grew the client's memory by hundreds of MB. Every response body this
transport returns stops with `ReplyTooLarge` once it passes `max_bytes` (a Content-Length over
it fails before anything is read). The client asks for uncompressed replies, so the bytes
counted are the bytes kept."""

from __future__ import annotations

import os
from typing import Iterator

import httpx

from glmcot.llm.types import LLMError

MAX_REPLY_BYTES_ENV = "GLMCOT_LLM_MAX_REPLY_BYTES"
DEFAULT_MAX_REPLY_BYTES = 8 * 1024 * 1024


def max_reply_bytes(value: int | None = None) -> int:
    """The cap: `value`, else $GLMCOT_LLM_MAX_REPLY_BYTES, else 8 MiB."""
    if value is None:
        raw = os.environ.get(MAX_REPLY_BYTES_ENV)
        if raw is None or not raw.strip():
            return DEFAULT_MAX_REPLY_BYTES
        try:
            value = int(raw)
        except ValueError:
            raise LLMError(f"{MAX_REPLY_BYTES_ENV}={raw!r}: expected a whole number of bytes") from None
    if value < 1:
        raise LLMError(f"the LLM reply size limit must be at least 1 byte, not {value}")
    return value


class ReplyTooLarge(LLMError):
    """A reply passed the size cap: that call fails (not retried: the same request would most
    likely get as large a reply again)."""

    def __init__(self, url: httpx.URL, limit: int) -> None:
        super().__init__(f"the reply from {url} is larger than {limit:,} bytes, the limit for one LLM "
                         f"reply (set {MAX_REPLY_BYTES_ENV} to change it); the call was stopped")


class _BoundedStream(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, limit: int, url: httpx.URL) -> None:
        self._inner, self._limit, self._url = inner, limit, url

    def __iter__(self) -> Iterator[bytes]:
        received = 0
        for chunk in self._inner:
            received += len(chunk)
            if received > self._limit:
                raise ReplyTooLarge(self._url, self._limit)
            yield chunk

    def close(self) -> None:
        self._inner.close()


class BoundedTransport(httpx.BaseTransport):
    """Wraps a transport so each response body is at most `limit` bytes."""

    def __init__(self, limit: int, inner: httpx.BaseTransport | None = None) -> None:
        self.limit = limit
        self._inner = inner or httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.headers["Accept-Encoding"] = "identity"
        response = self._inner.handle_request(request)
        length = response.headers.get("Content-Length", "")
        if length.isdigit() and int(length) > self.limit:
            response.close()
            raise ReplyTooLarge(request.url, self.limit)
        assert isinstance(response.stream, httpx.SyncByteStream)
        return httpx.Response(status_code=response.status_code, headers=response.headers,
                              stream=_BoundedStream(response.stream, self.limit, request.url),
                              extensions=response.extensions)

    def close(self) -> None:
        self._inner.close()
