"""Any OpenAI-compatible server (vLLM, SGLang, Ollama, llama.cpp, hosted APIs) over HTTP.

Segments are joined into one prompt (chat: one user message; completions: the raw text), so the
stable P-I prefix comes first and the server's own prefix cache hits. Transient errors (connect
errors, timeouts, 408/409/429/5xx) are retried with exponential backoff. Token usage is read from
the response when the server reports it, else counted with the tokenizer (Qwen by default).
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from typing import Any
from urllib.parse import urlparse

import httpx

from glmcot.llm.tokens import TokenCounter, qwen_counter
from glmcot.llm.types import LineSplitter, LLMBackend, LLMError, LLMRequest, LLMResponse, cut_at_stop

_TRANSIENT_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
_LOCAL_HOSTS = {"localhost", "127.0.0.1", "0.0.0.0", "::1", "host.docker.internal"}


def is_local_url(url: str) -> bool:
    host = (urlparse(url).hostname or "").lower()
    return host in _LOCAL_HOSTS or host.endswith(".local") or host.startswith(("10.", "192.168.", "172."))


class OpenAIBackend(LLMBackend):
    """`base_url` like http://127.0.0.1:8000/v1. `mode`: "chat" or "completions"."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        mode: str = "chat",
        api_key: str | None = None,
        timeout_s: float = 120.0,
        max_retries: int = 4,
        backoff_s: float = 0.5,
        stream: bool | None = None,
        system_prompt: str | None = None,
        extra_body: dict[str, Any] | None = None,
        counter: TokenCounter | None = None,
    ):
        if mode not in ("chat", "completions"):
            raise ValueError(f"mode must be 'chat' or 'completions', got {mode!r}")
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.mode = mode
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            if not is_local_url(self.base_url):
                raise LLMError(
                    f"{self.base_url} is not a local address and no API key was given "
                    "(pass api_key=... or set OPENAI_API_KEY)"
                )
            key = "EMPTY"  # local servers ignore it; some clients insist on a value
        self._headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.stream = stream
        self.system_prompt = system_prompt
        self.extra_body = dict(extra_body or {})
        self._counter = counter
        self._client = httpx.Client(timeout=httpx.Timeout(timeout_s, connect=min(10.0, timeout_s)))
        self._model = model
        self._model_lock = threading.Lock()
        self.label = f"openai {self.base_url}"

    @property
    def counter(self) -> TokenCounter:
        if self._counter is None:
            self._counter = qwen_counter()
        return self._counter

    @property
    def model(self) -> str:
        with self._model_lock:
            if self._model is None:
                data = self._with_retries(lambda: self._get("/models"))
                models = [entry.get("id") for entry in data.get("data", []) if entry.get("id")]
                if not models:
                    raise LLMError(f"{self.base_url}/models lists no model; pass model=...")
                self._model = models[0]
            return self._model

    def _get(self, path: str) -> dict:
        response = self._client.get(self.base_url + path, headers=self._headers)
        self._raise_for(response)
        return response.json()

    @staticmethod
    def _raise_for(response: httpx.Response) -> None:
        if response.status_code >= 400:
            body = response.text[:300]
            error = _HTTPStatus(f"HTTP {response.status_code} from {response.request.url}: {body}")
            error.status = response.status_code
            raise error

    def _with_retries(self, call):
        delay = self.backoff_s
        for attempt in range(self.max_retries + 1):
            try:
                return call()
            except (httpx.TransportError, _HTTPStatus) as error:
                transient = isinstance(error, httpx.TransportError) or getattr(error, "status", 0) in _TRANSIENT_STATUS
                if not transient or attempt == self.max_retries:
                    raise LLMError(f"{type(error).__name__}: {error}") from error
                time.sleep(delay * (1 + random.random() * 0.25))
                delay *= 2
        raise AssertionError("unreachable")

    def _body(self, request: LLMRequest, stream: bool) -> tuple[str, dict]:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "top_p": request.top_p,
            "stream": stream,
        }
        if request.stop:
            body["stop"] = list(request.stop)[:4]  # OpenAI accepts at most four
        if request.seed is not None:
            body["seed"] = request.seed
        if stream:
            body["stream_options"] = {"include_usage": True}
        if self.mode == "chat":
            messages = []
            if self.system_prompt:
                messages.append({"role": "system", "content": self.system_prompt})
            messages.append({"role": "user", "content": request.prompt})
            body["messages"] = messages
            path = "/chat/completions"
        else:
            body["prompt"] = request.prompt
            path = "/completions"
        body.update(self.extra_body)
        return path, body

    def complete(self, request: LLMRequest) -> LLMResponse:
        if request.forced_text is not None:
            raise LLMError("an OpenAI-compatible server cannot force-decode; use the native backend")
        stream = self.stream if self.stream is not None else (request.on_delta is not None or request.on_line is not None)
        return self._with_retries(lambda: self._complete_once(request, stream))

    def _complete_once(self, request: LLMRequest, stream: bool) -> LLMResponse:
        path, body = self._body(request, stream)
        started = time.perf_counter()
        first: float | None = None
        usage: dict = {}
        finish = "stop"
        if not stream:
            response = self._client.post(self.base_url + path, headers=self._headers, json=body)
            self._raise_for(response)
            data = response.json()
            choice = (data.get("choices") or [{}])[0]
            text = _choice_text(choice, self.mode) or ""
            finish = choice.get("finish_reason") or "stop"
            usage = data.get("usage") or {}
            first = time.perf_counter() - started
            splitter = LineSplitter(request.on_delta, request.on_line)
            splitter.feed(text)
            splitter.finish()
        else:
            # A retry after a mid-stream failure streams again from the start; the agents' hooks
            # tolerate seeing a line twice.
            pieces: list[str] = []
            splitter = LineSplitter(request.on_delta, request.on_line)
            with self._client.stream("POST", self.base_url + path, headers=self._headers, json=body) as response:
                if response.status_code >= 400:
                    response.read()
                    self._raise_for(response)
                for line in response.iter_lines():
                    if not line.startswith("data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        break
                    try:
                        data = json.loads(payload)
                    except json.JSONDecodeError:
                        continue
                    if data.get("usage"):
                        usage = data["usage"]
                    for choice in data.get("choices") or []:
                        piece = _delta_text(choice, self.mode)
                        if piece:
                            if first is None:
                                first = time.perf_counter() - started
                            pieces.append(piece)
                            splitter.feed(piece)
                        if choice.get("finish_reason"):
                            finish = choice["finish_reason"]
            splitter.finish()
            text = "".join(pieces)
        # Some servers return the stop string or run past it; cut like the others do.
        text, _ = cut_at_stop(text, request.stop)
        latency = time.perf_counter() - started
        prompt_tokens = usage.get("prompt_tokens")
        output_tokens = usage.get("completion_tokens")
        details = usage.get("prompt_tokens_details") or {}
        cached = details.get("cached_tokens") or 0
        if prompt_tokens is None:
            prompt_tokens = self.counter.count(request.prompt)
        if output_tokens is None:
            output_tokens = self.counter.count(text)
        return LLMResponse(
            text=text,
            prompt_tokens=int(prompt_tokens),
            cached_tokens=int(cached),
            output_tokens=int(output_tokens),
            latency_s=latency,
            ttft_s=first,
            finish_reason=finish,
            backend=self.label,
        )

    def close(self) -> None:
        self._client.close()


class _HTTPStatus(Exception):
    status = 0


def _choice_text(choice: dict, mode: str) -> str | None:
    if mode == "chat":
        return (choice.get("message") or {}).get("content")
    return choice.get("text")


def _delta_text(choice: dict, mode: str) -> str | None:
    if mode == "chat":
        return (choice.get("delta") or {}).get("content")
    return choice.get("text")
