"""The one builder of the system: graph stores -> the agents' contexts (graph, RetrieveNode
service, sandbox pool) -> the LLM backend -> agents. A typed `SystemConfig` in, a built `System`
out; `glmcot ask/eval/demo`, the benchmarks' eval runs and `glmcot serve` all build through here."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from glmcot.llm.spec import OPENAI_KINDS, BackendKind, BackendSpec
from glmcot.llm.types import LLMBackend, LLMError
from glmcot.system.backends import make_backend, model_backend, scripted_backend

if TYPE_CHECKING:
    from glmcot.agents.sandbox import SandboxLimits

log = logging.getLogger("glmcot.system")


class SetupError(Exception):
    """A needed input or component is missing; the message says what to give."""


class BackendCheck(Enum):
    """What to do when the model backend cannot answer at start (nothing listening, a URL without
    /v1, an unknown model)."""

    REQUIRE = "require"  # fail in one line before any question (a run would fail every question)
    WARN = "warn"        # log it and go on: a server's upstream may come up later
    SKIP = "skip"


@dataclass(frozen=True)
class SystemConfig:
    """What to build. `graphs`: name -> graph store folder (or a dataset folder holding graph/);
    none for methods that need no graph. `backend`: the answering LLM (None only when `build_system`
    is handed a running engine, or for a system without agents: `glmcot exec`). `scripted_questions`: a questions.jsonl path or records when the
    spec is the scripted policy (its gold plans)."""

    backend: BackendSpec | None = None
    graphs: Mapping[str, Path] = field(default_factory=dict)
    domain: str | None = None                 # the prompts' domain (default: each dataset's meta.json)
    retriever: str = "auto"                   # RetrieveNode: auto | embedding | lexical
    workers: int = 1                          # sandbox worker processes per graph
    limits: SandboxLimits | None = None       # the sandbox's limits (default: SandboxLimits())
    engine: Mapping[str, Any] = field(default_factory=dict)          # EngineConfig fields, native models
    agent_options: Mapping[str, Any] = field(default_factory=dict)   # AgentConfig fields every agent starts from
    scripted_questions: Any = None
    check: BackendCheck = BackendCheck.REQUIRE
    # Constrained decoding (glmcot.agents.grammar.GrammarSettings): each graph's agents decode
    # under their grammars built from that graph's schema. None: decoded freely (the paper).
    grammar: Any = None

    @property
    def scripted(self) -> bool:
        return self.backend is not None and self.backend.scripted


@dataclass
class System:
    """The built parts; `close()` (or `with`) closes them. `model`: the LLM every backend calls
    (None for the scripted policy alone); `backends`: the backend each graph's agents call (the
    scripted policy needs its own per graph: its `$answer` runs the GLM plan in that graph's
    sandbox; other specs share `model`); `backend`: the answering backend of the only graph, or
    of a system without graphs."""

    config: SystemConfig
    model: LLMBackend | None
    contexts: dict[str, Any]
    backends: dict[str, LLMBackend]
    backend: LLMBackend | None

    def context(self, graph: str | None = None) -> Any:
        """A graph's AgentContext (the only one when `graph` is None; None without graphs)."""
        if graph is None:
            if len(self.contexts) > 1:
                raise ValueError(f"several graphs ({', '.join(self.contexts)}): name one")
            return next(iter(self.contexts.values()), None)
        return self.contexts[graph]

    def agent(self, method: str, graph: str | None = None, *, backend: LLMBackend | None = None,
              context: Any = None, settings: Mapping[str, Any] | None = None) -> Any:
        """An agent of `method` (glm, graphcot, graphcot-repaired) on a graph, calling `backend`
        (default: that graph's), configured by `agent_options` then `settings`."""
        from glmcot.agents.config import AgentConfig
        from glmcot.agents.runner import make_agent

        if context is None:
            context = self.context(graph)
        if backend is None:
            name = graph if graph is not None else next(iter(self.contexts), None)
            backend = self.backends.get(name, self.backend) if name is not None else self.backend
        if backend is None:
            raise ValueError("no LLM: give a native --model, an upstream --llm URL or the scripted policy")
        return make_agent(method, backend, context, AgentConfig(**{**self.config.agent_options, **(settings or {})}))

    def open_context(self, path: Path, domain: str | None = None) -> Any:
        """A fresh AgentContext on a graph store as configured (e.g. on its new version)."""
        return open_context(path, self.config, domain=domain)

    def graph_backend(self, context: Any) -> LLMBackend:
        """The backend agents on `context` call: the scripted policy running plans in that
        context's sandbox, else the shared model."""
        if self.config.scripted:
            return scripted_backend(self.config.scripted_questions, inner=self.model, code_runner=context.run_code)
        if self.model is None:
            raise ValueError("no LLM: give a native --model or an upstream --llm URL")
        if self.config.grammar is not None:
            from glmcot.agents.grammar import GrammarBackend, GraphVocabulary

            return GrammarBackend(self.model, GraphVocabulary.of(context.graph), self.config.grammar)
        return self.model

    def close(self) -> None:
        # The per-graph scripted wrappers hold nothing of their own but `model` (their close would
        # close it again), so the model is closed once, here.
        if self.model is not None:
            _quietly(self.model.close)
        for context in self.contexts.values():
            _quietly(context.close)

    def __enter__(self) -> System:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def build_system(config: SystemConfig, *, engine: Any = None) -> System:
    """Builds everything in `config`, cleaning up what was built if a later part fails.
    `engine`: a running native engine to answer with (the caller keeps owning it; `glmcot serve`
    shares its engine with its OpenAI API); the spec then says only whether the scripted policy drives it."""
    _check_agent_options(config.agent_options)
    contexts: dict[str, Any] = {}
    model: LLMBackend | None = None
    try:
        for name, path in config.graphs.items():
            contexts[name] = open_context(path, config)
        model = _model(config, engine)
        system = System(config=config, model=model, contexts=contexts, backends={}, backend=None)
        if model is None and not config.scripted:   # no LLM: the graphs' contexts only (agents refuse)
            return system
        system.backends = {name: system.graph_backend(context) for name, context in contexts.items()}
        if len(contexts) == 1:
            system.backend = next(iter(system.backends.values()))
        elif not contexts:  # the scripted policy without a graph has no sandbox to run the plans in
            system.backend = scripted_backend(config.scripted_questions, inner=model) if config.scripted else model
        elif not config.scripted:  # several graphs: each has its own scripted backend, or all share the model
            system.backend = model
    except BaseException:
        if model is not None:
            _quietly(model.close)
        for context in contexts.values():
            _quietly(context.close)
        raise
    if not config.scripted and model is not None:
        try:
            _check(model, config)
        except BaseException:
            system.close()
            raise
    return system


def _model(config: SystemConfig, engine: Any) -> LLMBackend | None:
    spec = config.backend
    if engine is not None:
        if spec is not None and spec.kind not in (None, BackendKind.NATIVE):
            raise ValueError(f"a running engine answers natively; the spec {spec} names another model")
        from glmcot.llm.native import NativeBackend

        return NativeBackend(engine)
    if spec is None or spec.model is None:
        return None
    try:
        if spec.scripted:  # the scripted policy force-decodes the agents' own prompts: never compact ones
            return model_backend(spec.model, engine=config.engine, compact_mini=False)
        return make_backend(spec, engine=config.engine)
    except (ValueError, OSError) as exc:
        raise SetupError(f"cannot start the LLM backend {spec}: {exc}") from None


def _check(backend: LLMBackend, config: SystemConfig) -> None:
    if config.check is BackendCheck.SKIP:
        return
    spec = config.backend
    what = "the LLM backend"
    if spec is not None and spec.is_server:
        what = f"the LLM server {spec.target if spec.kind in OPENAI_KINDS else spec}"
    check_backend(backend, what, warn=config.check is BackendCheck.WARN)


def check_backend(backend: LLMBackend, what: str, *, warn: bool = False) -> None:
    """Fails before a run, in one line, when the backend cannot answer at all (nothing listening,
    a URL without /v1, an unknown model), instead of failing every question one by one; `warn`:
    log it instead (a server's upstream may come up later)."""
    check = getattr(backend, "check", None)
    if check is None:
        return
    try:
        check()
    except LLMError as exc:
        if warn:
            log.warning("%s cannot answer yet: %s", what, exc)
            return
        raise SetupError(f"{what} cannot answer: {exc}") from None


def graph_dir(path: Path) -> Path:
    """A graph store folder, or a dataset folder holding one under graph/ (a database URL is
    returned as given: glmcot.graph.opener opens it)."""
    from glmcot.graph.opener import is_database

    try:
        if is_database(path):
            return Path(path)
    except ValueError as exc:
        raise SetupError(str(exc)) from None
    path = Path(path).expanduser()
    if not path.exists():
        raise SetupError(f"graph folder not found: {path}")
    if not path.is_dir():
        raise SetupError(f"--graph must be a folder (a graph store), got a file: {path}")
    from glmcot.graph.storage.store import store_directory

    return store_directory(path)


def open_context(path: Path, config: SystemConfig, domain: str | None = None) -> Any:
    """The agents' shared context for one graph store, with a clear message for a folder that is not one."""
    from glmcot.agents.context import AgentContext
    from glmcot.graph.errors import GraphFormatError
    from glmcot.graph.graph_source import SourceUnavailable

    folder = graph_dir(path)
    try:
        return AgentContext(folder, retriever=config.retriever, workers=max(1, config.workers), limits=config.limits,
                            domain=domain or config.domain)
    except SourceUnavailable as exc:
        raise SetupError(str(exc)) from None
    except (FileNotFoundError, GraphFormatError) as exc:
        raise SetupError(f"{folder} is not a glmcot graph store ({exc}); build one with "
                         "`glmcot graph import` or `glmcot data synth`") from None


def _check_agent_options(options: Mapping[str, Any]) -> None:
    """Unknown or bad AgentConfig fields fail at start, not on the first question."""
    from glmcot.agents.config import AgentConfig

    names = [f.name for f in dataclasses.fields(AgentConfig)]
    unknown = set(options) - set(names)
    if unknown:
        raise ValueError(f"unknown agent option(s) {sorted(unknown)}; AgentConfig has {names}")
    AgentConfig(**options)


def _quietly(close: Any) -> None:
    try:
        close()
    except Exception:  # noqa: BLE001 - closing is best effort; the first error is the one reported
        pass
