"""Where the server meets glmcot.graph, glmcot.llm and glmcot.agents: opening the graphs,
building the one LLM backend and making an agent per question. Every dependency on those
packages' constructors lives here."""

from __future__ import annotations

import inspect
import os
import threading
from pathlib import Path
from typing import Any, Callable

from glmcot.serve.runtime import GraphHandle, Runtime


def graph_dir(path: Path) -> Path:
    """A graph store folder, or a dataset folder holding one under graph/."""
    path = Path(path)
    return path / "graph" if (path / "graph").is_dir() else path


def open_graph(name: str, path: Path) -> GraphHandle:
    from glmcot.graph.retrieval import NodeRetriever
    from glmcot.graph.store import Graph

    graph = Graph.open(graph_dir(path))
    opener = getattr(NodeRetriever, "open", None)
    retriever = opener(graph) if opener is not None else NodeRetriever(graph)
    return GraphHandle(name=name, path=Path(path), graph=graph, retriever=retriever)


def make_backend(runtime: Runtime, code_runner: Callable[[str], str] | None) -> Any:
    """The server's one LLM backend: native engine (shared with the OpenAI endpoints), an
    upstream OpenAI-compatible server, and/or the scripted policy."""
    from glmcot.llm import make_backend as from_spec

    config = runtime.config
    inner = None
    if runtime.engine is not None:
        from glmcot.llm.native import NativeBackend

        inner = NativeBackend(runtime.engine)
    elif config.llm_url:
        inner = from_spec(f"openai:{config.llm_url}", model=config.llm_model,
                          api_key=config.llm_api_key)
    if config.scripted is None:
        return inner
    if inner is not None and runtime.engine is None:
        raise ValueError("the scripted policy force-decodes its text, which needs the native "
                         "engine (--model); an upstream --llm server cannot force-decode")
    from glmcot.llm.scripted import ScriptedBackend

    return ScriptedBackend(runtime.scripted_by_qid, inner=inner, code_runner=code_runner)


def _accepts(function: Callable, name: str) -> bool:
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False
    return name in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())


def attach(runtime: Runtime) -> None:
    """Opens the configured graphs and installs the agent factory on `runtime`."""
    from glmcot.agents import AgentConfig, GLMAgent, GraphCoTAgent
    from glmcot.graph.primitives import GraphTools

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    config = runtime.config
    runtime.graphs = {name: open_graph(name, path) for name, path in config.graphs.items()}
    first = next(iter(runtime.graphs.values()))
    code_runner = None
    if config.scripted is not None:
        try:
            from glmcot.agents import sandbox_runner  # type: ignore[attr-defined]

            code_runner = sandbox_runner(GraphTools(first.graph, retriever=first.retriever))
        except ImportError:
            code_runner = None
    runtime.backend = make_backend(runtime, code_runner)
    config_fields = set(getattr(AgentConfig, "__dataclass_fields__", {}))

    def factory(handle: GraphHandle, method: str, options: Any,
                on_event: Callable[[Any], None] | None, cancel: threading.Event
                ) -> tuple[Any, bool]:
        settings = dict(config.agent_options)
        for name in ("max_steps", "temperature", "max_tokens"):
            value = getattr(options, name, None)
            if value is not None and name in config_fields:
                settings[name] = value
        live = False
        if on_event is not None and "on_event" in config_fields:
            settings["on_event"] = on_event
            live = True
        if "cancel" in config_fields:
            settings["cancel"] = cancel
        tools = GraphTools(handle.graph, retriever=handle.retriever)
        cls = GLMAgent if method == "glm" else GraphCoTAgent
        agent = cls(tools, runtime.backend, AgentConfig(**settings))
        return agent, live

    runtime.agent_factory = factory
