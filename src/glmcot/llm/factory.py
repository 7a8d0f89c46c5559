"""Backends from strings: "scripted", "openai:URL", "native:MODEL", "replay:FILE"."""

from __future__ import annotations

from typing import Any

from glmcot.llm.types import LLMBackend

SPEC_HELP = (
    "scripted | scripted+native:MODEL | openai:URL | openai-completions:URL | native:MODEL | "
    "replay:FILE (MODEL: random:qwen3:tiny or a checkpoint directory)"
)


def make_backend(spec: str, **options: Any) -> LLMBackend:
    """Builds a backend from a spec string.

    - ``scripted``: the scripted policy with Qwen-tokenizer counts; needs ``questions=`` (a
      questions.jsonl path, records, or qid -> record) and, for Graph-CoT, ``code_runner=``.
    - ``scripted+native:MODEL``: the scripted policy force-decoded through the native engine.
    - ``openai:URL`` / ``openai-completions:URL``: an OpenAI-compatible server (chat or completions);
      options: model, api_key, timeout_s, max_retries, stream, extra_body, tokenizer (a local
      tokenizer directory for counting when the server reports no usage; default Qwen).
    - ``native:MODEL``: the in-process engine; options go to EngineConfig.
    - ``replay:FILE``: recorded calls or question traces.

    ``record=PATH`` wraps any of them in a RecordingBackend.
    """
    record = options.pop("record", None)
    backend = _build(spec.strip(), options)
    if record:
        from glmcot.llm.replay import RecordingBackend

        backend = RecordingBackend(backend, record)
    return backend


def _build(spec: str, options: dict[str, Any]) -> LLMBackend:
    kind, _, rest = spec.partition(":")
    if kind == "scripted" or kind.startswith("scripted+"):
        from glmcot.llm.scripted import ScriptedBackend

        questions = options.pop("questions", None)
        if questions is None:
            raise ValueError("the scripted backend needs questions=... (questions.jsonl or records)")
        code_runner = options.pop("code_runner", None)
        counter = options.pop("counter", None)
        inner = None
        if kind.startswith("scripted+"):
            inner = _build(kind.split("+", 1)[1] + (":" + rest if rest else ""), options)
        elif rest:
            raise ValueError(f"unexpected text after 'scripted' in {spec!r}; did you mean scripted+native:{rest}?")
        return ScriptedBackend(questions, inner=inner, code_runner=code_runner, counter=counter)
    if kind in ("openai", "openai-completions", "openai-chat"):
        if not rest:
            raise ValueError(f"{spec!r}: give the server URL, e.g. openai:http://127.0.0.1:8000/v1")
        from glmcot.llm.openai_backend import OpenAIBackend

        mode = "completions" if kind == "openai-completions" else options.pop("mode", "chat")
        tokenizer = options.pop("tokenizer", None)
        if tokenizer and "counter" not in options:
            # Count with the served model's own tokenizer when the server reports no usage.
            from glmcot.llm.tokens import HFTokenCounter

            options["counter"] = HFTokenCounter(str(tokenizer))
        allowed = {"model", "api_key", "timeout_s", "max_retries", "backoff_s", "stream", "system_prompt", "extra_body", "counter"}
        return OpenAIBackend(rest, mode=mode, **{k: v for k, v in options.items() if k in allowed})
    if kind == "native":
        if not rest:
            raise ValueError(f"{spec!r}: give a model, e.g. native:random:qwen3:tiny or native:/path/to/checkpoint")
        from glmcot.llm.native import NativeBackend

        for unused in ("questions", "code_runner", "counter"):
            options.pop(unused, None)
        return NativeBackend(model=rest, **options)
    if kind == "replay":
        if not rest:
            raise ValueError(f"{spec!r}: give the recorded file, e.g. replay:traces.jsonl")
        from glmcot.llm.replay import ReplayBackend

        return ReplayBackend(rest, strict=bool(options.pop("strict", False)))
    raise ValueError(f"unknown backend {spec!r}; expected {SPEC_HELP}")
