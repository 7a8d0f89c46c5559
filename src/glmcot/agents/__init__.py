"""glmcot.agents: the GLM multi-agent workflow (C/R/A agents, notebook, sandboxed executor,
pipelined retrieval) and the Graph-CoT baseline.

Imports are lazy: sandbox worker processes import this package and must stay light.
"""

from __future__ import annotations

_EXPORTS = {
    "GLMAgent": "glmcot.agents.glm",
    "GraphCoTAgent": "glmcot.agents.graphcot",  # the repaired baseline (graphcot-repaired)
    "FaithfulGraphCoTAgent": "glmcot.agents.graphcot_faithful",  # the faithful one (graphcot)
    "AgentConfig": "glmcot.agents.config",
    "QuestionResult": "glmcot.agents.records",
    "AgentContext": "glmcot.agents.context",
    "Notebook": "glmcot.agents.notebook",
    "run_questions": "glmcot.agents.runner",
    "ScriptedBackend": "glmcot.agents.scripted",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'glmcot.agents' has no attribute {name!r}")
