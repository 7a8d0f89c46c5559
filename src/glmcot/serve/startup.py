"""Starting the server's parts: the engine (warmed up), then the upstream, the graphs and their
agents (built by glmcot.system), as one Runtime. Heavy imports (torch, faiss) happen inside
`build_runtime`."""

from __future__ import annotations

from typing import Any

from glmcot.serve.agent_factory import agent_factory, system_config
from glmcot.serve.config import ServeConfig
from glmcot.serve.runtime import GraphHandle, Runtime, load_scripted
from glmcot.system import build_system

WARMUP_TIMEOUT_S = 600.0   # a first step may build the CPU kernels; generous, never forever


def warm_up(engine: Any) -> None:
    """One tiny generation before the server reports ready, so the first user request does not
    pay for kernel builds, allocator growth and first-call overheads (the slow first run)."""
    from glmcot.engine import SamplingParams

    engine.submit("warm up", SamplingParams(max_tokens=2, ignore_eos=True)).result(WARMUP_TIMEOUT_S)


def build_runtime(config: ServeConfig, engine: Any = None) -> Runtime:
    """Starts the engine (or uses `engine`, which the caller then owns) or connects the upstream,
    and builds the graphs' agents (glmcot.system's builder), as one Runtime. Cleans up if any
    part fails."""
    scripted_by_qid, scripted_by_text = load_scripted(config.scripted) if config.scripted is not None else ({}, {})
    owns_engine = engine is None
    system = None
    try:
        if engine is None and config.model is not None:
            from glmcot.engine import AsyncEngine, EngineConfig, ProcessEngine

            engine_class = ProcessEngine if config.engine_process else AsyncEngine
            engine = engine_class(EngineConfig(model=config.model, **config.engine_options))
            if config.warmup:
                warm_up(engine)
        if config.graphs:
            if engine is None and not config.llm_url and config.scripted is None:
                raise ValueError("no LLM: give a native --model or an upstream --llm URL")
            system = build_system(system_config(config, scripted_by_qid), engine=engine)
    except BaseException:
        if owns_engine and engine is not None:
            _shut_down(engine)
        raise
    if system is None:
        return Runtime(config=config, engine=engine, owns_engine=owns_engine,
                       scripted_by_qid=scripted_by_qid, scripted_by_text=scripted_by_text)
    graphs = {name: GraphHandle(name=name, path=config.graphs[name], graph=context.graph,
                                retriever=context.retrieval, context=context)
              for name, context in system.contexts.items()}
    return Runtime(config=config, engine=engine, owns_engine=owns_engine, backend=system.model, graphs=graphs,
                   graph_backends=dict(system.backends), agent_factory=agent_factory(system, config), system=system,
                   scripted_by_qid=scripted_by_qid, scripted_by_text=scripted_by_text)


def _shut_down(engine: Any) -> None:
    for name in ("shutdown", "close"):
        stop = getattr(engine, name, None)
        if stop is not None:
            try:
                stop()
            except Exception:  # noqa: BLE001 - the start-up error is the one reported
                pass
