"""Top-level commands of glmcot.serve: `glmcot serve`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer


def _parse_graphs(values: list[str]) -> dict[str, Path]:
    from glmcot.graph.opener import is_database

    graphs: dict[str, Path] = {}
    for value in values:
        name, sep, directory = value.partition("=")
        if not sep:   # a bare directory is named after itself
            directory, name = value, Path(value).name
        if name in graphs:
            raise typer.BadParameter(f"graph name {name!r} given twice", param_hint="--graph")
        try:
            database = is_database(directory)
        except ValueError as error:
            raise typer.BadParameter(str(error), param_hint="--graph") from None
        if database:  # a graph database: NAME=falkordb://HOST:PORT/GRAPH or NAME=sparql+http://...
            if not sep:
                raise typer.BadParameter(f"name the database graph: --graph NAME={directory}", param_hint="--graph")
            graphs[name] = Path(directory)
            continue
        if not Path(directory).is_dir():
            raise typer.BadParameter(f"{directory}: no such graph directory",
                                     param_hint="--graph")
        graphs[name] = Path(directory)
    return graphs


def serve(
    graph: Annotated[list[str], typer.Option(
        "--graph", "-g", help="A graph to serve, as NAME=DIR (a store written by glmcot graph "
        "import/synth, or a dataset dir's graph/) or NAME=URL (falkordb://HOST:PORT/GRAPH, "
        "sparql+http://HOST:PORT/PATH). Repeat for several graphs.")] = [],
    model: Annotated[Optional[str], typer.Option(
        help="Native engine model: a local checkpoint directory or 'random:qwen3:tiny'. Enables "
        "the OpenAI-compatible endpoints.")] = None,
    llm: Annotated[Optional[str], typer.Option(
        help="Instead of --model: base URL of an OpenAI-compatible server (vLLM, SGLang, "
        "Ollama...) for the agents' LLM calls. Its key is read from GLMCOT_LLM_API_KEY.")] = None,
    llm_model: Annotated[Optional[str], typer.Option(
        help="Model name to request from the --llm server.")] = None,
    llm_timeout: Annotated[float, typer.Option(
        envvar="GLMCOT_LLM_TIMEOUT", show_envvar=True,
        help="Seconds per HTTP request to the --llm server.")] = 120.0,
    llm_retries: Annotated[int, typer.Option(
        envvar="GLMCOT_LLM_RETRIES", show_envvar=True,
        help="Retries of a transient --llm failure (connection, 429/5xx, a stream cut "
        "short).")] = 4,
    scripted: Annotated[Optional[Path], typer.Option(
        help="questions.jsonl with gold plans: answer with the scripted policy (for tests and "
        "benchmarks; measures the system, never model accuracy). Questions are matched by "
        "text.")] = None,
    retriever: Annotated[str, typer.Option(
        help="RetrieveNode: auto (the graph's embedding index if `glmcot graph embed` built "
        "one, else lexical matching), embedding or lexical.")] = "auto",
    host: Annotated[str, typer.Option(
        help="Address to bind. The default serves this machine only; use 0.0.0.0 (with "
        "--api-key) to serve a network.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    api_key: Annotated[Optional[str], typer.Option(
        envvar="GLMCOT_API_KEY", show_envvar=True,
        help="Require 'Authorization: Bearer KEY' on every endpoint but /health.")] = None,
    public_docs: Annotated[bool, typer.Option(
        help="Serve /docs and /openapi.json without the API key.")] = False,
    keys_file: Annotated[Optional[Path], typer.Option(
        help="Per-graph API keys (JSON: name, key or key_sha256, graphs, update, admin, "
        "requests_per_minute); re-read when it changes. README, 'Use it from your agent framework'.")] = None,
    max_graph_calls: Annotated[int, typer.Option(
        help="Primitive calls one POST /v1/graphs/{name}/call may carry (400 past it).")] = 32,
    watch_graphs: Annotated[Optional[float], typer.Option(
        help="Every this many seconds, reopen a graph whose store another process updated "
        "(replicas over one store). Off by default.")] = None,
    max_concurrency: Annotated[int, typer.Option(
        help="/v1/ask questions doing work at once.")] = 8,
    max_engine_requests: Annotated[Optional[int], typer.Option(
        help="Engine requests (OpenAI endpoints: prompts x n) admitted at once; default: the "
        "engine's batch capacity (max_num_seqs), so none waits while a batch slot is free.")] = None,
    max_queue: Annotated[int, typer.Option(
        help="Requests that may wait for a slot (per lane: questions, engine requests); beyond "
        "that the server answers 429.")] = 64,
    timeout: Annotated[float, typer.Option(
        help="Per-request limit in seconds, queueing included (504 past it).")] = 300.0,
    max_body_bytes: Annotated[int, typer.Option(help="Request body limit (413 past it).")]
    = 1 << 20,
    max_question_chars: Annotated[int, typer.Option(help="Question length limit.")] = 4000,
    max_tokens_limit: Annotated[int, typer.Option(
        help="Largest max_tokens a request may ask for.")] = 4096,
    max_prompts: Annotated[int, typer.Option(
        help="Prompts one /v1/completions request may carry (400 past it).")] = 32,
    max_n: Annotated[int, typer.Option(
        help="Choices (n) per prompt a request may ask for (400 past it).")] = 8,
    max_session_chars: Annotated[int, typer.Option(
        help="Length limit of a session id (400 past it).")] = 256,
    engine_process: Annotated[bool, typer.Option(
        "--engine-process/--engine-thread", envvar="GLMCOT_ENGINE_PROCESS", show_envvar=True,
        help="Run the native engine's step loop in its own process (the HTTP side never waits "
        "for it; the default, measured in docs/benchmarks.md), or on a thread of the server's "
        "process.")] = True,
    engine_option: Annotated[list[str], typer.Option(
        help="Extra EngineConfig field as KEY=JSON_VALUE (e.g. dtype=\"float32\"). "
        "Repeatable.")] = [],
    agent_option: Annotated[list[str], typer.Option(
        help="Extra AgentConfig field as KEY=JSON_VALUE. Repeatable.")] = [],
    served_model_name: Annotated[Optional[str], typer.Option(
        help="Model id shown by /v1/models (default: --model).")] = None,
    shutdown_grace: Annotated[float, typer.Option(
        help="Seconds in-flight requests get to finish on shutdown before being "
        "cancelled.")] = 10.0,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
) -> None:
    """Serve GLM / Graph-CoT question answering over HTTP (POST /v1/ask), an OpenAI-compatible
    API over the native engine, Prometheus /metrics and /health. API schema at /docs."""
    import uvicorn

    from glmcot.serve.app import create_app
    from glmcot.serve.config import ServeConfig
    from glmcot.serve.server import uvicorn_config

    def options(values: list[str], flag: str) -> dict:
        out = {}
        for value in values:
            key, sep, raw = value.partition("=")
            if not sep:
                raise typer.BadParameter(f"{value!r}: expected KEY=VALUE", param_hint=flag)
            try:
                out[key] = json.loads(raw)
            except json.JSONDecodeError:
                out[key] = raw
        return out

    if model is None and llm is None and scripted is None:
        raise typer.BadParameter("give --model, --llm or --scripted: the server needs an LLM")
    try:
        config = ServeConfig(
            graphs=_parse_graphs(graph), model=model, llm_url=llm, llm_model=llm_model,
            llm_timeout_s=llm_timeout, llm_retries=llm_retries,
            scripted=scripted, retriever=retriever, host=host, port=port, api_key=api_key, public_docs=public_docs,
            keys_file=keys_file, max_graph_calls=max_graph_calls, watch_graphs_s=watch_graphs,
            max_concurrency=max_concurrency, max_engine_requests=max_engine_requests,
            max_queue=max_queue, timeout_s=timeout,
            max_body_bytes=max_body_bytes, max_question_chars=max_question_chars,
            max_tokens_limit=max_tokens_limit, max_prompts=max_prompts, max_n=max_n,
            max_session_chars=max_session_chars,
            engine_options=options(engine_option, "--engine-option"), engine_process=engine_process,
            agent_options=options(agent_option, "--agent-option"),
            served_model_name=served_model_name, shutdown_grace_s=shutdown_grace)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    if host not in ("127.0.0.1", "localhost", "::1") and not (config.api_key or config.keys_file):
        typer.secho(f"warning: serving on {host} without an API key", fg="yellow", err=True)
    if model is not None:
        from glmcot.engine.kernels import cpu_kernels

        cpu_kernels()  # a first build runs before uvicorn takes over the signals: Ctrl-C and SIGTERM stop it
    from glmcot.serve.keys import KeysFileError

    try:
        app = create_app(config)
    except KeysFileError as exc:
        raise typer.BadParameter(str(exc), param_hint="--keys-file") from None
    uvicorn.Server(uvicorn_config(app, config, log_level)).run()


def register(app: typer.Typer) -> None:
    """Adds this package's commands to the main app."""
    app.command("serve")(serve)
