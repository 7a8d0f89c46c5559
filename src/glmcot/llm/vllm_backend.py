"""A vLLM server with glmcot's plugin (`--llm vllm+glmcot:URL`): prompts as token ids with their
segments' levels and the session, so the plugin evicts by GLM's four levels.

Each segment is tokenized on its own (with the served model's tokenizer: a local directory, or
the server's `/tokenize`), and the prompt sent to `/v1/completions` is the concatenation, so the
level spans in `vllm_xargs` (`glmcot.vllm_plugin.wire`) are exact by construction. With
`chat_template=True` the tokenizer's chat template is rendered around the segments (its head is
level 1, shared by every call; its tail transient). `end_session` sends a one-token request that
carries the session-end flag. Against a vLLM without the plugin the extra arguments are ignored
and everything works as with `openai-completions:URL`.

Forced text (the scripted policy, `scripted+vllm+glmcot:URL`) is tokenized the same way and sent
as forced token ids (`glmcot_forced`), which the server's forcing logits processor
(`glmcot.vllm_plugin.forcing`, `--logits-processors`) emits one per step; the reply's token ids
are checked against them, so text from a server that did not force is never taken for the
policy's.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any, Callable

from glmcot.contract import Level
from glmcot.llm.openai_backend import OpenAIBackend
from glmcot.llm.types import LineSplitter, LLMError, LLMRequest, LLMResponse
from glmcot.vllm_plugin import wire

_SENTINEL = "\x00glmcot-segments\x00"
FORCING_PROCESSOR = "glmcot.vllm_plugin.forcing:ForcedTokensLogitsProcessor"


class SegmentTokenizer:
    """Text -> token ids with the served model's tokenizer, memoised (agent prompts repeat)."""

    def __init__(self, encode: Callable[[str], list[int]], capacity: int = 4096) -> None:
        self._encode = encode
        self._memo: OrderedDict[str, tuple[int, ...]] = OrderedDict()
        self._capacity = capacity
        self._lock = threading.Lock()

    def encode(self, text: str) -> list[int]:
        if not text:
            return []
        with self._lock:
            hit = self._memo.get(text)
            if hit is not None:
                self._memo.move_to_end(text)
                return list(hit)
        ids = tuple(self._encode(text))
        with self._lock:
            self._memo[text] = ids
            while len(self._memo) > self._capacity:
                self._memo.popitem(last=False)
        return list(ids)

    def count(self, text: str) -> int:
        return len(self.encode(text))


def local_tokenizer(path: str) -> Any:
    """A Hugging Face tokenizer from a local directory (never downloads)."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path, local_files_only=True)


class VLLMBackend(OpenAIBackend):
    """`base_url` like http://127.0.0.1:8000/v1. `tokenizer`: the served model's tokenizer directory
    (None: the server's /tokenize). `chat_template`: wrap the prompt in the tokenizer's chat
    template (needs a local tokenizer)."""

    def __init__(self, base_url: str, *, tokenizer: str | Any | None = None, chat_template: bool = False,
                 **options: Any) -> None:
        options.pop("glmcot_extras", None)
        options.pop("mode", None)
        super().__init__(base_url, mode="completions", glmcot_extras=False, **options)
        self._hf = local_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer
        encode = self._encode_local if self._hf is not None else self._encode_remote
        self.tokens = SegmentTokenizer(encode)
        if self._counter is None:
            self._counter = self.tokens
        self._template: tuple[str, str] | None = None
        if chat_template:
            if self._hf is None:
                raise LLMError("chat_template=True needs the served model's tokenizer directory (tokenizer=...)")
            rendered = self._hf.apply_chat_template([{"role": "user", "content": _SENTINEL}], tokenize=False,
                                                    add_generation_prompt=True)
            if _SENTINEL not in rendered:
                raise LLMError("the tokenizer's chat template does not place the user message verbatim")
            head, tail = rendered.split(_SENTINEL, 1)
            self._template = (head, tail)
        self.label = f"vllm+glmcot {self.base_url}"

    def _encode_local(self, text: str) -> list[int]:
        return list(self._hf.encode(text, add_special_tokens=False))

    def _encode_remote(self, text: str) -> list[int]:
        root = self.base_url[:-3] if self.base_url.endswith("/v1") else self.base_url
        body = {"model": self.model, "prompt": text, "add_special_tokens": False}

        def send() -> list[int]:
            response = self._client.post(root + "/tokenize", headers=self._headers, json=body)
            self._raise_for(response)
            return [int(t) for t in response.json()["tokens"]]

        return self._with_retries(send)

    def prompt_spans(self, request: LLMRequest) -> tuple[list[int], list[tuple[int, int]]]:
        """The prompt's token ids and its (level, tokens) spans, one per segment (template parts
        included)."""
        pieces: list[tuple[str, int]] = []
        if self._template is not None:
            pieces.append((self._template[0], int(Level.SHARED_PROMPT)))
        pieces += [(segment.text, int(segment.level)) for segment in request.segments]
        if self._template is not None:
            pieces.append((self._template[1], int(Level.TRANSIENT)))
        ids: list[int] = []
        spans: list[tuple[int, int]] = []
        for text, level in pieces:
            piece = self.tokens.encode(text)
            ids += piece
            spans.append((level, len(piece)))
        return ids, spans

    def _body(self, request: LLMRequest, stream: bool) -> tuple[str, dict]:
        path, body = super()._body(request, stream)
        ids, spans = self.prompt_spans(request)
        if not ids:
            raise LLMError("the prompt is empty")
        body["prompt"] = ids
        xargs = dict(body.get("vllm_xargs") or {})
        xargs.update(wire.encode(spans, request.session))
        body["vllm_xargs"] = xargs
        return path, body

    def complete(self, request: LLMRequest) -> LLMResponse:
        if request.forced_text is None:
            return super().complete(request)  # a grammar goes as structured outputs (detected, with fallback)
        return self._with_retries(lambda: self._complete_forced(request))

    def forced_ids(self, text: str) -> list[int]:
        """The forced text as the served model's token ids (checked against a local tokenizer's
        vocabulary, so a mismatched tokenizer fails here and not in the engine)."""
        ids = self.tokens.encode(text)
        if self._hf is not None:
            size = len(self._hf)
            outside = [token for token in ids if not 0 <= token < size]
            if outside:
                raise LLMError(f"forced token ids {outside[:8]} are outside the tokenizer's {size} ids")
        return ids

    def _complete_forced(self, request: LLMRequest) -> LLMResponse:
        """One non-streamed completion whose tokens are the forced text's (never the model's)."""
        assert request.forced_text is not None
        ids = self.forced_ids(request.forced_text)
        wanted = ids[: max(0, request.max_tokens)]  # a server stops at max_tokens; so does this
        path, body = self._body(request, stream=False)
        body.pop("stream_options", None)
        # vLLM wants at least one token: an empty forced text gets the end token at once.
        body["max_tokens"] = max(1, len(wanted))
        body["return_token_ids"] = True
        body["vllm_xargs"].update(wire.encode_forced(wanted))
        started = time.perf_counter()
        response = self._client.post(self.base_url + path, headers=self._headers, json=body)
        self._raise_for(response)
        data = response.json()
        choice = (data.get("choices") or [{}])[0]
        returned = [int(token) for token in choice.get("token_ids") or []]
        text = choice.get("text") or ""
        # an empty forced text comes back as the one end token, which has no text
        if returned != wanted and not (not wanted and len(returned) == 1 and not text):
            raise LLMError(
                f"{self.base_url} did not force-decode (asked for {len(wanted)} forced tokens, got "
                f"{len(returned)} that differ): start vllm serve with --logits-processors "
                f"{FORCING_PROCESSOR}, with glmcot importable there"
            )
        latency = time.perf_counter() - started
        splitter = LineSplitter(request.on_delta, request.on_line)
        splitter.feed(text)
        splitter.finish()
        usage = data.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        return LLMResponse(
            text=text,
            prompt_tokens=int(usage.get("prompt_tokens") or len(body["prompt"])),
            cached_tokens=int(details.get("cached_tokens") or 0),
            output_tokens=len(wanted),
            latency_s=latency,
            ttft_s=latency,
            finish_reason="stop" if len(wanted) == len(ids) else "length",
            backend=self.label,
        )

    def end_session(self, session_id: str) -> None:
        """A one-token request that ends the session on the server (its notebook becomes level 3)."""
        ids = self.tokens.encode("\n") or [0]
        body = {"model": self.model, "prompt": ids[:1], "max_tokens": 1, "temperature": 0.0,
                "vllm_xargs": wire.encode([(int(Level.TRANSIENT), 1)], session_id, end_session=True)}

        def send() -> None:
            response = self._client.post(self.base_url + "/completions", headers=self._headers, json=body)
            self._raise_for(response)

        self._with_retries(send)
