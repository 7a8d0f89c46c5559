"""API key check and request body size limit, as pure ASGI middleware.

Pure ASGI (not BaseHTTPMiddleware) so streamed responses and client disconnects pass through
untouched. The key check runs before routing, so an unauthenticated client cannot even probe
which paths exist.
"""

from __future__ import annotations

import hmac
import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from glmcot.serve.errors import error_body

OPEN_PATHS = frozenset({"/health"})
OPEN_PREFIXES = ("/ui",)   # the trace page and its assets: no secrets; its API calls send the key
DOCS_PATHS = frozenset({"/docs", "/docs/oauth2-redirect", "/openapi.json", "/redoc"})


def is_open(path: str, public_docs: bool = False) -> bool:
    """Whether `path` is served without a key: /health, the trace page, and the docs if public."""
    return (path in OPEN_PATHS or (public_docs and path in DOCS_PATHS)
            or any(path == prefix or path.startswith(prefix + "/") for prefix in OPEN_PREFIXES))


async def _send_json(send: Send, status: int, body: dict, headers: list[tuple[bytes, bytes]]
                     = ()) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(data)).encode()), *headers]})
    await send({"type": "http.response.body", "body": data})


def presented_key(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The key from `Authorization: Bearer KEY` (what OpenAI clients send) or `X-API-Key`."""
    for name, value in headers:
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
        elif name == b"x-api-key" and value:
            return value.decode("latin-1").strip()
    return None


class ApiKeyMiddleware:
    """Rejects requests without the right key (401), except /health (and the docs if public)."""

    def __init__(self, app: ASGIApp, api_key: str, public_docs: bool = False) -> None:
        self.app = app
        self.expected = api_key.encode()
        self.public_docs = public_docs

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or is_open(scope.get("path", ""), self.public_docs):
            await self.app(scope, receive, send)
            return
        key = presented_key(scope["headers"])
        # compare_digest: the time taken does not reveal how much of the key matched
        if key is None or not hmac.compare_digest(key.encode(), self.expected):
            message = ("missing API key: send 'Authorization: Bearer <key>'" if key is None
                       else "invalid API key")
            await _send_json(send, 401, error_body(message, "authentication_error",
                                                   "invalid_api_key"),
                             [(b"www-authenticate", b"Bearer")])
            return
        await self.app(scope, receive, send)


class BodyLimitMiddleware:
    """Reads request bodies up to `max_bytes`; larger bodies get 413 before any handler runs."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        def too_large():
            return _send_json(send, 413, error_body(
                f"request body exceeds the server's limit of {self.max_bytes} bytes",
                "invalid_request_error", "body_too_large"), [(b"connection", b"close")])

        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await _send_json(send, 400, error_body("malformed Content-Length header",
                                                           "invalid_request_error"))
                    return
                if declared > self.max_bytes:
                    await too_large()
                    return
        # Buffer the body (it is at most max_bytes) so a chunked upload cannot exceed the limit.
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await too_large()
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()   # later calls wait for the disconnect, as the app expects

        await self.app(scope, replay, send)
