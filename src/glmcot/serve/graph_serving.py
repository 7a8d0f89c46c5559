"""What the serve app gains for outside agents, installed by `create_app` in one call: per-graph
access (keys file), the graph endpoints (primitives, chunks, search, schema, admin), JSON bodies
sent without a JSON Content-Type, and the watcher that notices store versions committed by
another process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from glmcot.serve import graph_api
from glmcot.serve.config import ServeConfig
from glmcot.serve.graph_admin import GraphWatcher
from glmcot.serve.keys import Access, AccessMiddleware

# Bodies these content types announce are read as JSON: `curl -d '{...}'` sends the first; no
# endpoint here takes a form, so the client's JSON is what it meant.
JSON_ALIASES = (b"", b"application/x-www-form-urlencoded", b"text/plain")


class JsonBodyMiddleware:
    """Marks a POST/PUT/PATCH body sent without a JSON Content-Type (curl -d's form type, plain
    text, none) as JSON, so `curl -d '{"question": ...}'` works as written; a body that is not
    JSON then gets the usual 400 "malformed JSON body"."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in ("POST", "PUT", "PATCH"):
            headers = list(scope["headers"])
            kinds = [value.split(b";")[0].strip().lower() for name, value in headers if name == b"content-type"]
            if not kinds or kinds[0] in JSON_ALIASES:
                headers = [(name, value) for name, value in headers if name != b"content-type"]
                headers.append((b"content-type", b"application/json"))
                scope = {**scope, "headers": headers}
        await self.app(scope, receive, send)


class GraphServing:
    def __init__(self, app: Any, config: ServeConfig) -> None:
        self.app = app
        self.config = config
        self.access = Access(config.api_key, config.keys_file)
        app.state.access = self.access
        self.watcher: GraphWatcher | None = None

    def add_middleware(self) -> None:
        """The key check (401, per-key 429) and the JSON body marking; call where create_app
        added its key middleware (inside the metrics, outside the body limit)."""
        self.app.add_middleware(JsonBodyMiddleware)
        if self.access.enforced:
            self.app.add_middleware(AccessMiddleware, access=self.access, public_docs=self.config.public_docs)

    @asynccontextmanager
    async def running(self, state: Any) -> AsyncIterator[None]:
        """While the server runs: the store-version watcher (--watch-graphs); at shutdown the
        graph lookups' lane is drained like the others."""
        if self.config.watch_graphs_s and state.runtime is not None:
            self.watcher = GraphWatcher(state.runtime, self.config.watch_graphs_s).start()
        try:
            yield
        finally:
            if self.watcher is not None:
                self.watcher.stop()
            lookups = getattr(self.app.state, "lookups", None)
            if lookups is not None:   # new graph lookups get 503 while shutting down, as questions do
                await lookups.drain(self.config.shutdown_grace_s)


def install(app: Any, config: ServeConfig) -> GraphServing:
    app.include_router(graph_api.router)
    return GraphServing(app, config)
