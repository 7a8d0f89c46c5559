"""Backends from strings: "scripted", "openai:URL", "openai+glmcot:URL", "native:MODEL", "replay:FILE"."""

from __future__ import annotations

from typing import Any

from glmcot.llm.types import LLMBackend

SPEC_HELP = (
    "scripted | scripted+native:MODEL | scripted+openai+glmcot:URL | openai:URL | "
    "openai-completions:URL | openai+glmcot:URL | vllm+glmcot:URL | sglang+glmcot:URL | native:MODEL | replay:FILE "
    "(MODEL: random:qwen3:tiny or a checkpoint directory)"
)


def make_backend(spec: str, **options: Any) -> LLMBackend:
    """Builds a backend from a spec string.

    - ``scripted`` and ``scripted+SPEC``: the scripted policy, built by glmcot.agents.make_backend.
    - ``openai:URL`` / ``openai-completions:URL``: an OpenAI-compatible server (chat or completions);
      options: model, api_key, timeout_s, max_retries, stream, extra_body, tokenizer (a local
      tokenizer directory for counting when the server reports no usage; default Qwen),
      glmcot_extras (None: ask the server's /models whether it is glmcot serve).
    - ``openai+glmcot:URL`` / ``openai-completions+glmcot:URL``: the same, always sending glmcot
      serve's extra fields (segments, session, forced text, end_session).
    - ``vllm+glmcot:URL``: a vLLM server with glmcot's plugin: token-id prompts with the segments'
      levels and the session (options: tokenizer, the served model's tokenizer directory, else the
      server's /tokenize; chat_template; and the openai options). Plain vLLM ignores the levels.
    - ``sglang+glmcot:URL``: an SGLang server with ``--radix-eviction-policy priority``: levels as
      request priorities (options as openai).
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
        raise ValueError(f"{spec!r}: the scripted policy follows the agents' gold plans, so it is built by "
                         "glmcot.agents.make_backend (with questions= and the agents' context)")
    base_kind, plus, flavour = kind.partition("+")
    if base_kind in ("vllm", "sglang"):
        return _build_engine_server(spec, base_kind, flavour, rest, options)
    if base_kind in ("openai", "openai-completions", "openai-chat"):
        if plus and flavour != "glmcot":
            raise ValueError(f"unknown backend {spec!r}; did you mean {base_kind}+glmcot:URL?")
        if not rest:
            raise ValueError(f"{spec!r}: give the server URL, e.g. {kind}:http://127.0.0.1:8000/v1")
        from glmcot.llm.openai_backend import OpenAIBackend

        if plus:
            options["glmcot_extras"] = True
        mode = "completions" if base_kind == "openai-completions" else options.pop("mode", "chat")
        tokenizer = options.pop("tokenizer", None)
        if tokenizer and "counter" not in options:
            # Count with the served model's own tokenizer when the server reports no usage.
            from glmcot.llm.tokens import HFTokenCounter

            options["counter"] = HFTokenCounter(str(tokenizer))
        allowed = {"model", "api_key", "timeout_s", "max_retries", "backoff_s", "stream", "system_prompt", "extra_body", "counter",
                   "glmcot_extras"}
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


_SERVER_OPTIONS = {"model", "api_key", "timeout_s", "max_retries", "backoff_s", "stream", "extra_body", "counter"}


def _build_engine_server(spec: str, kind: str, flavour: str, rest: str, options: dict[str, Any]) -> LLMBackend:
    """vllm+glmcot:URL and sglang+glmcot:URL."""
    if flavour != "glmcot":
        raise ValueError(f"unknown backend {spec!r}; did you mean {kind}+glmcot:URL (or openai:URL for a plain server)?")
    if not rest:
        raise ValueError(f"{spec!r}: give the server URL, e.g. {kind}+glmcot:http://127.0.0.1:8000/v1")
    chosen = {k: v for k, v in options.items() if k in _SERVER_OPTIONS}
    if kind == "vllm":
        from glmcot.llm.vllm_backend import VLLMBackend

        return VLLMBackend(rest, tokenizer=options.get("tokenizer"), chat_template=bool(options.get("chat_template", False)),
                           **chosen)
    from glmcot.llm.sglang_backend import SGLangBackend

    tokenizer = options.get("tokenizer")
    if tokenizer and "counter" not in chosen:
        from glmcot.llm.tokens import HFTokenCounter

        chosen["counter"] = HFTokenCounter(str(tokenizer))
    return SGLangBackend(rest, mode=options.get("mode", "chat"), system_prompt=options.get("system_prompt"), **chosen)
