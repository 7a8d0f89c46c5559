"""glmcot.engine: the native serving engine (paged KV cache, prefix caching, continuous batching).

Public names are imported lazily so `glmcot --help` does not pay for torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = [
    "LLM",
    "AsyncEngine",
    "ProcessEngine",
    "EngineConfig",
    "SamplingParams",
    "Segment",
    "RequestOutput",
    "RequestMetrics",
    "PromptTooLongError",
    "EngineClosedError",
    "RequestFailedError",
]

_WHERE = {
    "LLM": "glmcot.engine.llm",
    "AsyncEngine": "glmcot.engine.async_engine",
    "ProcessEngine": "glmcot.engine.process_engine",
    "EngineConfig": "glmcot.engine.config",
    "SamplingParams": "glmcot.engine.sampling_params",
    "Segment": "glmcot.contract",
    "RequestOutput": "glmcot.engine.outputs",
    "RequestMetrics": "glmcot.engine.outputs",
    "PromptTooLongError": "glmcot.engine.outputs",
    "EngineClosedError": "glmcot.engine.outputs",
    "RequestFailedError": "glmcot.engine.outputs",
}

if TYPE_CHECKING:  # pragma: no cover
    from glmcot.engine.async_engine import AsyncEngine
    from glmcot.engine.config import EngineConfig
    from glmcot.engine.llm import LLM
    from glmcot.contract import Segment
    from glmcot.engine.outputs import EngineClosedError, PromptTooLongError, RequestFailedError, RequestMetrics, RequestOutput
    from glmcot.engine.process_engine import ProcessEngine
    from glmcot.engine.sampling_params import SamplingParams


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'glmcot.engine' has no attribute {name!r}")
