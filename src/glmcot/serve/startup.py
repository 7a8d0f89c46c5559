"""Starting the server's parts: the engine (warmed up), the upstream, the graphs and their agents,
assembled into a Runtime. Heavy imports (torch, faiss) happen here, inside `build_runtime`."""

from __future__ import annotations

from typing import Any

from glmcot.serve import agents_glue
from glmcot.serve.config import ServeConfig
from glmcot.serve.engine_bridge import EngineBridge
from glmcot.serve.runtime import Runtime, load_scripted

WARMUP_TIMEOUT_S = 600.0   # a first step may build the CPU kernels; generous, never forever


def warm_up(engine: Any) -> None:
    """One tiny generation before the server reports ready, so the first user request does not
    pay for kernel builds, allocator growth and first-call overheads (the slow first run)."""
    from glmcot.engine import SamplingParams

    engine.submit("warm up", SamplingParams(max_tokens=2, ignore_eos=True)).result(WARMUP_TIMEOUT_S)


def build_runtime(config: ServeConfig, engine: Any = None) -> Runtime:
    """Opens the graphs, starts the engine (or uses `engine`, which the caller then owns) or
    connects the upstream, and prepares the agents. Cleans up if any part fails."""
    runtime = Runtime(config=config, owns_engine=engine is None)
    try:
        if config.scripted is not None:
            runtime.scripted_by_qid, runtime.scripted_by_text = load_scripted(config.scripted)
        if engine is not None:
            runtime.engine = engine
        elif config.model is not None:
            from glmcot.engine import AsyncEngine, EngineConfig

            runtime.engine = AsyncEngine(EngineConfig(model=config.model,
                                                      **config.engine_options))
            if config.warmup:
                warm_up(runtime.engine)
        if runtime.engine is not None:
            runtime.bridge = EngineBridge(runtime.engine)
        if config.graphs:
            agents_glue.attach(runtime)
    except BaseException:
        runtime.close()
        raise
    return runtime
