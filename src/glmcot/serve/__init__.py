"""glmcot.serve: the HTTP server (FastAPI + uvicorn).

Endpoints (schema at /docs and /openapi.json):
- ``POST /v1/ask``: a question over a named graph, answered by GLM or Graph-CoT agents; JSON,
  or Server-Sent Events per agent step with ``stream: true``. ``GET /v1/graphs`` lists graphs.
- ``POST /v1/completions``, ``POST /v1/chat/completions``, ``GET /v1/models``: OpenAI-compatible,
  over the native engine, with extra body fields for segments, sessions, priority, forced text.
- ``GET /metrics`` (Prometheus text) and ``GET /health`` (no API key needed).

Library use: ``create_app(ServeConfig(...))``; ``BackgroundServer`` runs it on a loopback port.
Modules are imported lazily so ``glmcot --help`` stays fast.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ServeConfig", "create_app", "BackgroundServer"]

_WHERE = {"ServeConfig": "glmcot.serve.config", "create_app": "glmcot.serve.app",
          "BackgroundServer": "glmcot.serve.server"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'glmcot.serve' has no attribute {name!r}")
