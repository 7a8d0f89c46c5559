"""Where the server meets glmcot.agents and glmcot.llm: one `AgentContext` per graph (graph,
RetrieveNode service, sandbox pool), the LLM backend(s), and an agent per question whose backend
is wrapped to report each LLM call as it completes and to stop when the request is cancelled.
Every dependency on those packages' constructors lives here."""

from __future__ import annotations

import logging
import threading
from dataclasses import fields
from typing import Any, Callable

from glmcot.agents.trace import LLMCall
from glmcot.llm import LLMBackend, LLMError, LLMRequest, LLMResponse
from glmcot.serve.runtime import GraphHandle, Runtime


class ObservedBackend(LLMBackend):
    """One question's view of the shared backend: reports every finished call to `on_event`
    (the live SSE stream) and refuses new calls once the request is cancelled, so an abandoned
    question stops at its next LLM call instead of running to the end."""

    def __init__(self, inner: LLMBackend, on_event: Callable[[LLMCall], None] | None,
                 cancel: threading.Event) -> None:
        self.inner = inner
        self.on_event = on_event
        self.cancel = cancel
        self.label = inner.label

    def complete(self, request: LLMRequest) -> LLMResponse:
        if self.cancel.is_set():
            raise LLMError("cancelled: the client went away, the request timed out or the "
                           "server is shutting down")
        response = self.inner.complete(request)
        if self.on_event is not None:
            self.on_event(LLMCall(agent=str(request.metadata.get("agent") or "llm"), metadata=dict(request.metadata),
                                  session=request.session or "", prompt_sha="", segments=[],
                                  response=response.to_dict()))
        return response

    def end_session(self, session_id: str) -> None:
        self.inner.end_session(session_id)

    def close(self) -> None:   # the shared backend is closed by the runtime, not per question
        pass


log = logging.getLogger("glmcot.serve")

def _base_backend(runtime: Runtime) -> LLMBackend | None:
    config = runtime.config
    if runtime.engine is not None:
        from glmcot.llm.native import NativeBackend

        return NativeBackend(runtime.engine)
    if config.llm_url:
        from glmcot.llm import make_backend

        backend = make_backend(f"openai:{config.llm_url}", model=config.llm_model,
                               api_key=config.llm_api_key, timeout_s=config.llm_timeout_s,
                               max_retries=config.llm_retries)
        try:   # the upstream may come up later: say so in the log, do not refuse to start
            backend.check()
        except Exception as exc:  # noqa: BLE001 - a warning, the questions will say why again
            log.warning("the upstream LLM server cannot answer yet: %s", exc)
        return backend
    return None


def backends_per_graph(runtime: Runtime, contexts: dict[str, Any]) -> dict[str, LLMBackend]:
    """The backend each graph's agents call. The scripted policy needs one per graph (its
    Graph-CoT `$answer` runs the GLM plan in that graph's sandbox); the others share one."""
    base = _base_backend(runtime)
    runtime.backend = base
    if runtime.config.scripted is None:
        if base is None:
            raise ValueError("no LLM: give a native --model or an upstream --llm URL")
        return {name: base for name in contexts}
    if base is not None and runtime.engine is None:
        raise ValueError("the scripted policy force-decodes its text, which needs the native "
                         "engine (--model); an upstream --llm server cannot force-decode")
    from glmcot.agents.scripted import ScriptedBackend

    return {name: ScriptedBackend(runtime.scripted_by_qid, inner=base,
                                  code_runner=context.run_code)
            for name, context in contexts.items()}


def agent_settings(method: str, options: Any, base: dict[str, Any], known: set[str]
                   ) -> dict[str, Any]:
    """AgentConfig fields for one request: the server's --agent-option values, then the
    request's options (max_steps means R/A rounds for GLM and steps for Graph-CoT)."""
    settings = dict(base)
    if options is None:
        return settings
    if options.max_steps is not None:
        settings["max_rounds" if method == "glm" else "graphcot_max_steps"] = options.max_steps
    if options.temperature is not None:
        settings["temperature"] = options.temperature
    if options.max_tokens is not None:
        for name in ("reason_max_tokens", "act_max_tokens", "graphcot_max_tokens"):
            settings[name] = options.max_tokens
    return {key: value for key, value in settings.items() if key in known}


def attach(runtime: Runtime) -> None:
    """Opens the configured graphs and installs the agent factory on `runtime`."""
    from glmcot.agents.config import AgentConfig
    from glmcot.agents.context import AgentContext
    from glmcot.agents.runner import make_agent

    config = runtime.config
    unknown = set(config.agent_options) - {f.name for f in fields(AgentConfig)}
    if unknown:
        raise ValueError(f"unknown agent option(s) {sorted(unknown)}; AgentConfig has "
                         f"{[f.name for f in fields(AgentConfig)]}")
    AgentConfig(**config.agent_options)   # fail at start-up, not on the first question
    workers = max(1, min(config.max_concurrency, 4))
    contexts: dict[str, Any] = {}
    try:
        for name, path in config.graphs.items():
            contexts[name] = AgentContext(path, retriever=config.retriever, workers=workers)
    except BaseException:
        for context in contexts.values():
            context.close()
        raise
    runtime.graphs = {name: GraphHandle(name=name, path=config.graphs[name], graph=ctx.graph,
                                        retriever=ctx.retrieval, context=ctx)
                      for name, ctx in contexts.items()}
    backends = backends_per_graph(runtime, contexts)
    runtime.graph_backends = backends
    known = {f.name for f in fields(AgentConfig)}
    hooks = "on_event" in known

    def factory(handle: GraphHandle, method: str, options: Any,
                on_event: Callable[[Any], None] | None, cancel: threading.Event
                ) -> tuple[Any, str]:
        settings = agent_settings(method, options, config.agent_options, known)
        mode = "replay"
        if on_event is not None:
            mode = "llm-live"
            if hooks:   # the agents report every step themselves
                settings["on_event"] = on_event
                mode = "live"
        # One handle holds one version's context and backend together (an update swaps the handle).
        base = handle.backend if handle.backend is not None else backends[handle.name]
        observed = ObservedBackend(base, None if mode != "llm-live"
                                   else on_event, cancel)
        agent = make_agent(method, observed, handle.context, AgentConfig(**settings))
        return agent, mode

    runtime.agent_factory = factory
