"""`glmcot mcp`: glmcot's graphs as an MCP server, over stdio (an MCP host starts it) or
streamable HTTP (at /mcp, beside the whole `glmcot serve` API, with its keys and limits)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer


class Transport(str, Enum):
    stdio = "stdio"
    http = "http"


def mcp(
    graph: Annotated[list[str], typer.Option(
        "--graph", "-g", help="A graph to serve, as NAME=DIR (repeatable), as for glmcot serve.")] = [],
    transport: Annotated[Transport, typer.Option(
        help="stdio: an MCP host runs this command and talks over its stdin/stdout (the local user may "
        "read every graph). http: streamable HTTP at /mcp (and the whole glmcot serve API), under "
        "--api-key / --keys-file.")] = Transport.stdio,
    model: Annotated[Optional[str], typer.Option(
        help="Native engine model: a checkpoint directory or 'random:qwen3:tiny'.")] = None,
    llm: Annotated[Optional[str], typer.Option(
        help="Instead of --model: base URL of an OpenAI-compatible server (key in GLMCOT_LLM_API_KEY).")] = None,
    llm_model: Annotated[Optional[str], typer.Option(help="Model name to request from the --llm server.")] = None,
    scripted: Annotated[Optional[Path], typer.Option(
        help="questions.jsonl with gold plans: the scripted policy (tests; measures the system, never "
        "model accuracy).")] = None,
    retriever: Annotated[str, typer.Option(help="RetrieveNode: auto, embedding or lexical.")] = "auto",
    host: Annotated[str, typer.Option(help="--transport http: address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="--transport http: TCP port.")] = 8000,
    api_key: Annotated[Optional[str], typer.Option(
        envvar="GLMCOT_API_KEY", show_envvar=True, help="--transport http: the one key for everything.")] = None,
    keys_file: Annotated[Optional[Path], typer.Option(
        help="--transport http: per-graph keys (as glmcot serve --keys-file).")] = None,
    max_concurrency: Annotated[int, typer.Option(help="Questions answered at once.")] = 4,
    max_queue: Annotated[int, typer.Option(help="Questions that may wait for a slot; past that: busy.")] = 16,
    timeout: Annotated[float, typer.Option(help="Seconds per question or lookup, waiting included.")] = 300.0,
    max_question_chars: Annotated[int, typer.Option(help="Question length limit.")] = 4000,
    max_body_bytes: Annotated[int, typer.Option(help="--transport http: request body limit.")] = 1 << 20,
    log_level: Annotated[str, typer.Option(help="Log level (stderr).")] = "warning",
) -> None:
    """Serve the graphs over MCP: tools list_graphs, graph_schema, ask_graph (answer, agents' steps,
    vertex chunks used), search_nodes and the five primitives (RetrieveNode, NodeInfo, NodeFeature,
    NeighbourCheck, NodeDegree); resources glmcot://graphs/{graph}/schema."""
    try:
        import mcp as _sdk  # noqa: F401
    except ImportError:
        raise typer.BadParameter("the MCP SDK is not installed: pip install 'glmcot[mcp]'") from None
    from glmcot.serve.commands import _parse_graphs
    from glmcot.serve.config import ServeConfig

    if model is None and llm is None and scripted is None:
        raise typer.BadParameter("give --model, --llm or --scripted: the agents need an LLM")
    try:
        config = ServeConfig(graphs=_parse_graphs(graph), model=model, llm_url=llm, llm_model=llm_model,
                             scripted=scripted, retriever=retriever, host=host, port=port,
                             api_key=api_key if transport is Transport.http else None,
                             keys_file=keys_file if transport is Transport.http else None,
                             max_concurrency=max_concurrency, max_queue=max_queue, timeout_s=timeout,
                             max_question_chars=max_question_chars, max_body_bytes=max_body_bytes,
                             engine_process=False)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    from glmcot.mcp import run

    if transport is Transport.stdio:
        run.serve_stdio(config, log_level)
    else:
        from glmcot.serve.keys import KeysFileError

        try:
            run.serve_http(config, log_level)
        except KeysFileError as exc:
            raise typer.BadParameter(str(exc), param_hint="--keys-file") from None


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp)

