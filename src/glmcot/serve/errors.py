"""Errors the server turns into JSON bodies.

Every error leaves the server as ``{"error": {"message", "type", "code"}}`` (the OpenAI shape, so
the official client raises a typed exception with our message). No traceback ever leaves it.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse


class APIError(Exception):
    """An error with an HTTP status, a stable type and a message meant for the client."""

    def __init__(self, status: int, message: str, type: str = "invalid_request_error",
                 code: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.type, self.code)

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def error_body(message: str, type: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "code": code}}


def error_response(status: int, message: str, type: str, code: str | None = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(message, type, code), status_code=status, headers=headers)


def busy(message: str = "server is at its concurrency limit; retry later") -> APIError:
    return APIError(429, message, "rate_limit_error", "server_busy", {"Retry-After": "1"})


def unavailable(message: str = "server is shutting down") -> APIError:
    return APIError(503, message, "service_unavailable", "shutting_down", {"Retry-After": "5"})


def engine_gone(reason: str) -> APIError:
    """The native engine can serve nothing more (its process ended); no retry will help until
    the server is restarted, so there is no Retry-After."""
    return APIError(503, f"the engine is not running: {reason}", "service_unavailable",
                    "engine_unavailable")


def timeout(seconds: float) -> APIError:
    return APIError(504, f"request did not finish within the server's {seconds:g} s timeout",
                    "timeout_error", "request_timeout")


def not_found(what: str) -> APIError:
    return APIError(404, what, "not_found_error", "not_found")
