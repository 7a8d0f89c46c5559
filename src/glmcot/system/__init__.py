"""glmcot.system: the one place the system is assembled, above glmcot.agents, glmcot.llm,
glmcot.engine, glmcot.graph and glmcot.mini and below eval, serve and the command line.

- `make_backend(BackendSpec, ...)`: the one constructor of LLM backends from a spec.
- `build_system(SystemConfig)`: graph stores -> agent contexts -> backend -> agents, as a `System`.
"""

from glmcot.system.backends import make_backend, model_backend, scripted_backend
from glmcot.system.build import (BackendCheck, SetupError, System, SystemConfig, build_system, check_backend,
                                 graph_dir, open_context)

__all__ = [
    "make_backend", "model_backend", "scripted_backend", "BackendCheck", "SetupError", "System", "SystemConfig",
    "build_system", "check_backend", "graph_dir", "open_context",
]
