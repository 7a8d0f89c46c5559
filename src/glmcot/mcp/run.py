"""Running the MCP server: over stdio, on a runtime built in this process; or over streamable
HTTP at /mcp of the glmcot serve app (its keys, limits and graphs)."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

from glmcot.serve.config import ServeConfig
from glmcot.serve.graph_desk import Desk, desk_for_app, lookups_lane
from glmcot.serve.keys import FULL, Access
from glmcot.serve.limits import Admission

MCP_PATH = "/mcp"


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("glmcot")
    except Exception:  # noqa: BLE001 - a source checkout without metadata
        return "0"


def serve_stdio(config: ServeConfig, log_level: str = "warning") -> None:
    """Builds the runtime, then speaks MCP on stdin/stdout until the host closes them. Everything
    else this process (or a child) prints goes to stderr: stdout carries only the protocol."""
    import anyio

    from glmcot.mcp.server import build_server
    from glmcot.serve.startup import build_runtime

    logging.basicConfig(level=log_level.upper(), stream=sys.stderr)
    protocol = os.dup(1)
    os.dup2(2, 1)          # fd 1 (children included) now writes to stderr
    sys.stdout = os.fdopen(protocol, "w", encoding="utf-8", buffering=1)
    runtime = build_runtime(config)
    try:
        desk = Desk(config=config, runtime=runtime, grant=FULL,   # the local user who started it
                    admission=Admission(config.max_concurrency, config.max_queue, config.timeout_s),
                    lookups=lookups_lane(config))
        server = build_server(lambda ctx: desk, version=_version())
        anyio.run(server.run_stdio_async)
    finally:
        runtime.close()


def mount(app: Any, config: ServeConfig) -> Any:
    """Adds the streamable HTTP MCP endpoint at /mcp to a serve app (its middleware: keys, body
    limit, metrics) and runs the SDK's session manager inside the app's lifespan."""
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp

    from glmcot.mcp.server import build_server
    from glmcot.serve.security import presented_key

    access: Access = app.state.access

    def desk_for(ctx: Any) -> Desk:
        headers = ctx.headers or {}
        key = presented_key([(name.lower().encode("latin-1"), value.encode("latin-1"))
                             for name, value in headers.items()])
        grant = access.grant(key)
        if grant is None:   # the key middleware refused it already; never reached
            from glmcot.serve import errors

            raise errors.APIError(401, "invalid API key", "authentication_error", "invalid_api_key")
        return desk_for_app(app, grant)

    server = build_server(desk_for, version=_version())
    server.streamable_http_app(streamable_http_path=MCP_PATH, host=config.host)   # makes the session manager
    app.router.add_route(MCP_PATH, StreamableHTTPASGIApp(server.session_manager), methods=["GET", "POST", "DELETE"],
                         include_in_schema=False)
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(the_app: Any) -> AsyncIterator[Any]:
        async with inner(the_app) as value:
            async with server.session_manager.run():
                yield value

    app.router.lifespan_context = lifespan
    return server


def serve_http(config: ServeConfig, log_level: str = "warning") -> None:
    import uvicorn

    from glmcot.serve.app import create_app
    from glmcot.serve.server import uvicorn_config

    app = create_app(config)
    mount(app, config)
    if config.host not in ("127.0.0.1", "localhost", "::1") and not (config.api_key or config.keys_file):
        print(f"warning: serving MCP on {config.host} without an API key", file=sys.stderr)
    uvicorn.Server(uvicorn_config(app, config, log_level)).run()
