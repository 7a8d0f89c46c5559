"""The one constructor of LLM backends from a `BackendSpec`: the servers, the native engine (and
glmcot-mini's compact prompts over it), recorded calls, and the scripted policy over any of them.
It sits above glmcot.agents (the scripted policy) and glmcot.mini, which is why it is not in glmcot.llm."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable

from glmcot.llm.spec import ENGINE_SERVER_KINDS, OPENAI_KINDS, BackendKind, BackendSpec
from glmcot.llm.types import LLMBackend


def make_backend(spec: BackendSpec, *, questions: Any = None, context: Any = None,
                 engine: Mapping[str, Any] | None = None, counter: Any = None,
                 record: str | Path | None = None) -> LLMBackend:
    """A backend for `spec`.

    - questions: a questions.jsonl path or records, for the scripted policy (its gold plans);
      context: the AgentContext whose sandbox runs Graph-CoT's `$answer` plan for it.
    - engine: EngineConfig fields for a native model (device, dtype, num_threads, ...).
    - counter: the token counter (the scripted policy's, or a server's when it reports no usage).
    - record: a file to append every call to (a RecordingBackend around the backend).
    """
    if spec.scripted:
        inner = model_backend(spec.model, engine=engine, compact_mini=False) if spec.model is not None else None
        backend = scripted_backend(questions, inner=inner, code_runner=_code_runner(context), counter=counter)
    else:
        backend = model_backend(spec, engine=engine, counter=counter)
    if record:
        from glmcot.llm.replay import RecordingBackend

        backend = RecordingBackend(backend, record)
    return backend


def scripted_backend(questions: Any, *, inner: LLMBackend | None = None,
                     code_runner: Callable[[str], str] | None = None, counter: Any = None) -> LLMBackend:
    """The scripted policy: follows the questions' gold plans (Qwen-tokenizer counts without
    `inner`; with it, force-decoded through that backend)."""
    if questions is None:
        raise ValueError("the scripted backend needs questions= (a questions.jsonl path or records)")
    from glmcot.agents.scripted import ScriptedBackend

    if isinstance(questions, Path):
        questions = str(questions)
    return ScriptedBackend(questions, inner=inner, code_runner=code_runner, counter=counter)


def model_backend(spec: BackendSpec, *, engine: Mapping[str, Any] | None = None, counter: Any = None,
                  compact_mini: bool = True) -> LLMBackend:
    """The model behind a spec (the scripted flag ignored). `compact_mini`: a native glmcot-mini
    checkpoint answers through its own compact prompts (off under the scripted policy, which
    force-decodes the agents' own prompts)."""
    kind, options = spec.kind, spec.options
    if kind is None:
        raise ValueError("'scripted' alone has no model behind it")
    if kind in OPENAI_KINDS:
        from glmcot.llm.openai_backend import OpenAIBackend

        return OpenAIBackend(spec.target, mode="completions" if kind is BackendKind.OPENAI_COMPLETIONS else "chat",
                             glmcot_extras=True if spec.glmcot_wire else options.glmcot_extras,
                             system_prompt=options.system_prompt,
                             **_server_options(spec, _counted(counter, options.tokenizer)))
    if kind in ENGINE_SERVER_KINDS:
        if kind is BackendKind.VLLM:
            from glmcot.llm.vllm_backend import VLLMBackend

            return VLLMBackend(spec.target, tokenizer=options.tokenizer, chat_template=options.chat_template,
                               **_server_options(spec, counter))
        from glmcot.llm.sglang_backend import SGLangBackend

        return SGLangBackend(spec.target, mode="chat", system_prompt=options.system_prompt,
                             **_server_options(spec, _counted(counter, options.tokenizer)))
    if kind is BackendKind.NATIVE:
        if compact_mini and _is_mini(spec.target):
            from glmcot.mini.backend import mini_backend

            return mini_backend(spec.target, **dict(engine or {}))
        from glmcot.llm.native import NativeBackend

        return NativeBackend(model=spec.target, **dict(engine or {}))
    from glmcot.llm.replay import ReplayBackend

    return ReplayBackend(spec.target)


def _is_mini(model: str) -> bool:
    from glmcot.mini.backend import wants_mini

    return wants_mini(model)


def _counted(counter: Any, tokenizer: str | None) -> Any:
    """Counts with the served model's own tokenizer when the server reports no usage."""
    if counter is None and tokenizer:
        from glmcot.llm.tokens import HFTokenCounter

        return HFTokenCounter(str(tokenizer))
    return counter


def _server_options(spec: BackendSpec, counter: Any) -> dict[str, Any]:
    """The options a server backend takes, those given only (the rest keep the backend's defaults)."""
    options = spec.options
    chosen = {"model": options.model, "api_key": options.api_key, "timeout_s": options.timeout_s,
              "max_retries": options.max_retries, "counter": counter}
    return {name: value for name, value in chosen.items() if value is not None}


def _code_runner(context: Any) -> Callable[[str], str] | None:
    return context.run_code if context is not None else None
