"""The server's agent per question, over the system glmcot.system built: the request's options
as AgentConfig fields, and the graph's backend wrapped to report each LLM call as it completes
and to stop when the request is cancelled."""

from __future__ import annotations

import threading
from dataclasses import fields
from typing import Any, Callable

from glmcot.agents.config import AgentConfig
from glmcot.agents.trace import LLMCall
from glmcot.llm import LLMBackend, LLMError, LLMRequest, LLMResponse
from glmcot.serve.config import ServeConfig
from glmcot.serve.runtime import GraphHandle
from glmcot.system import BackendCheck, System, SystemConfig


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


def system_config(config: ServeConfig, scripted_questions: Any = None) -> SystemConfig:
    """What the server builds for its graphs: the spec its flags name (a running engine, passed
    to the builder, answers for --model), one context per graph, the --agent-option defaults."""
    from glmcot.llm.spec import BackendSpec

    backend = None
    if config.llm_url:
        backend = BackendSpec.openai(config.llm_url, model=config.llm_model, api_key=config.llm_api_key,
                                     timeout_s=config.llm_timeout_s, max_retries=config.llm_retries)
    elif config.scripted is not None:
        backend = BackendSpec(kind=None, scripted=True)   # over the engine, when there is one
    return SystemConfig(backend=backend, graphs=dict(config.graphs), retriever=config.retriever,
                        workers=max(1, min(config.max_concurrency, 4)), agent_options=dict(config.agent_options),
                        scripted_questions=scripted_questions, check=BackendCheck.WARN)


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


def agent_factory(system: System, config: ServeConfig) -> Callable[..., tuple[Any, str]]:
    """Runtime.agent_factory: (graph handle, method, request options, on_event, cancel flag) ->
    (agent, how its trace reaches on_event)."""
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
        base = handle.backend if handle.backend is not None else system.backends[handle.name]
        observed = ObservedBackend(base, None if mode != "llm-live" else on_event, cancel)
        return system.agent(method, backend=observed, context=handle.context, settings=settings), mode

    return factory
