"""Any OpenAI-compatible server (vLLM, SGLang, Ollama, llama.cpp, hosted APIs) over HTTP.

Segments are joined into one prompt (chat: one user message; completions: the raw text), so the
stable P-I prefix comes first and the server's own prefix cache hits. Transient errors (connect
errors, timeouts, 408/409/429/5xx) are retried with exponential backoff. Token usage is read from
the response when the server reports it, else counted with the tokenizer (Qwen by default).

Against a glmcot server (`glmcot serve`, which lists its models as `owned_by: "glmcot"`), the
engine's extra body fields are sent too: the segments with their levels and keys, the session,
the request priority and forced text (the scripted policy), and `end_session` ends a session on
the server. `glmcot_extras=None` (the default) asks `/models` once to find out.
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

from glmcot.llm import bounded_http
from glmcot.llm.tokens import TokenCounter, qwen_counter
from glmcot.llm.types import LineSplitter, LLMBackend, LLMError, LLMRequest, LLMResponse, cut_at_stop

_TRANSIENT_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
_LOCAL_HOSTS = {"localhost", "127.0.0.1", "0.0.0.0", "::1", "host.docker.internal"}
GLMCOT_OWNER = "glmcot"  # what glmcot serve writes as `owned_by` in /v1/models
# glmcot serve marks every response whose text was forced (never model output) with this.
FORCED_FINGERPRINT = "glmcot-forced-text"


def is_local_url(url: str) -> bool:
    host = (urlparse(url).hostname or "").lower()
    return host in _LOCAL_HOSTS or host.endswith(".local") or host.startswith(("10.", "192.168.", "172."))


class OpenAIBackend(LLMBackend):
    """`base_url` like http://127.0.0.1:8000/v1. `mode`: "chat" or "completions".
    `max_reply_bytes`: the largest reply body accepted (default $GLMCOT_LLM_MAX_REPLY_BYTES, else
    8 MiB); a larger one fails that call with `bounded_http.ReplyTooLarge`.

    `glmcot_extras`: True sends glmcot serve's extra fields (segments, session, priority,
    forced_text, end_session); False never does; None decides from the server's `/models`.
    """

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
        glmcot_extras: bool | None = None,
        max_reply_bytes: int | None = None,
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
        # every reply is bounded (glmcot.llm.bounded_http): a huge one fails its call, not the process
        self.max_reply_bytes = bounded_http.max_reply_bytes(max_reply_bytes)
        self._client = httpx.Client(timeout=httpx.Timeout(timeout_s, connect=min(10.0, timeout_s)),
                                    transport=bounded_http.BoundedTransport(self.max_reply_bytes))
        self._model = model
        self._glmcot_extras = glmcot_extras
        # Structured outputs (a request's grammar sent as vLLM's `structured_outputs.grammar`):
        # None until a constrained request shows whether the server takes it.
        self.structured_outputs: bool | None = None
        self._model_lock = threading.Lock()
        self.label = f"openai {self.base_url}"

    @property
    def counter(self) -> TokenCounter:
        if self._counter is None:
            self._counter = qwen_counter()
        return self._counter

    @property
    def model(self) -> str:
        self._discover()
        assert self._model is not None
        return self._model

    @property
    def glmcot_extras(self) -> bool:
        """Whether requests carry glmcot serve's extra fields (asks /models once if unset)."""
        self._discover()
        return bool(self._glmcot_extras)

    def _discover(self) -> None:
        """Reads /models once for what was not given: the model name, and whether the server is
        glmcot serve."""
        with self._model_lock:
            if self._model is not None and self._glmcot_extras is not None:
                return
            try:
                data = self._with_retries(lambda: self._get("/models"))
            except LLMError as error:
                # Some servers have no /models; with a model given, just send no extras.
                status = getattr(error.__cause__, "status", 0)
                if self._model is None or not 400 <= status < 500:
                    raise
                self._glmcot_extras = False
                return
            entries = [entry for entry in data.get("data", []) if isinstance(entry, dict)]
            if self._model is None:
                models = [entry.get("id") for entry in entries if entry.get("id")]
                if not models:
                    raise LLMError(f"{self.base_url}/models lists no model; pass model=...")
                self._model = models[0]
            if self._glmcot_extras is None:
                served = [entry for entry in entries if entry.get("id") == self._model] or entries
                self._glmcot_extras = bool(served) and served[0].get("owned_by") == GLMCOT_OWNER

    def check(self) -> None:
        """One quick look at the server before a run (no retries): raises LLMError saying why
        it cannot answer (nothing listening, a URL without /v1, a bad key, an unknown model)."""
        url = self.base_url + "/models"
        try:
            response = self._client.get(url, headers=self._headers, timeout=min(10.0, self.timeout_s))
        except httpx.ConnectError as error:
            raise LLMError(f"cannot connect to {self.base_url} (is the server running? {error})") from None
        except httpx.TimeoutException:
            raise LLMError(f"{self.base_url} did not answer within {min(10.0, self.timeout_s):g} s") from None
        except httpx.TransportError as error:
            raise LLMError(f"cannot reach {self.base_url}: {type(error).__name__}: {error}") from None
        if response.status_code == 404:
            if self._model is not None and self.base_url.endswith("/v1"):
                return   # a server without /models; the model was named, so just try it
            hint = "" if self.base_url.endswith("/v1") else \
                f"; OpenAI-compatible servers answer under /v1: try {self.base_url}/v1"
            raise LLMError(f"{url}: HTTP 404 (not an OpenAI-compatible endpoint{hint})")
        if response.status_code in (401, 403):
            raise LLMError(f"{url}: HTTP {response.status_code}, the server refused the API key "
                           "(set OPENAI_API_KEY or the config's api_key)")
        if response.status_code >= 400:
            raise LLMError(f"{url}: HTTP {response.status_code}: {response.text[:200]}")
        try:
            entries = [e for e in response.json().get("data", []) if isinstance(e, dict)]
        except (ValueError, AttributeError):
            raise LLMError(f"{url} did not answer with a model list (is this an OpenAI-compatible server?)") from None
        served = [str(e.get("id")) for e in entries if e.get("id")]
        if self._model is not None and served and self._model not in served:
            raise LLMError(f"model {self._model!r} is not served by {self.base_url}; it serves "
                           f"{', '.join(served[:10])}")
        if self._model is None and not served:
            raise LLMError(f"{url} lists no model; name one with --llm-model")

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
            except (httpx.TransportError, _HTTPStatus, _TruncatedStream) as error:
                transient = isinstance(error, (httpx.TransportError, _TruncatedStream)) or \
                    getattr(error, "status", 0) in _TRANSIENT_STATUS
                if not transient or attempt == self.max_retries:
                    raise LLMError(f"{type(error).__name__}: {error}") from error
                time.sleep(delay * (1 + random.random() * 0.25))
                delay *= 2
        raise AssertionError("unreachable")

    def _body(self, request: LLMRequest, stream: bool) -> tuple[str, dict]:
        extras = self.glmcot_extras
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "top_p": request.top_p,
            "stream": stream,
        }
        # Forced text already ends where a stop string would cut it (as NativeBackend does).
        if request.stop and request.forced_text is None:
            body["stop"] = list(request.stop)[:4]  # OpenAI accepts at most four
        if request.seed is not None:
            body["seed"] = request.seed
        if stream:
            body["stream_options"] = {"include_usage": True}
        segments = _segments_body(request) if extras else None
        if self.mode == "chat":
            messages = []
            if self.system_prompt:
                messages.append({"role": "system", "content": self.system_prompt})
            if segments is not None:
                # glmcot serve reads the segments and wraps them in the chat template itself
                messages.append({"role": "user", "content": "", "segments": segments})
            else:
                messages.append({"role": "user", "content": request.prompt})
            body["messages"] = messages
            path = "/chat/completions"
        else:
            if segments is not None:
                body["prompt"] = ""  # the segments replace the prompt
                body["segments"] = segments
            else:
                body["prompt"] = request.prompt
            path = "/completions"
        if extras:
            if request.session is not None:
                body["session"] = request.session
            if request.priority:
                body["priority"] = request.priority
            if request.forced_text is not None:
                body["forced_text"] = request.forced_text
        if request.grammar is not None and request.forced_text is None and self.structured_outputs is not False:
            body["structured_outputs"] = {"grammar": request.grammar.ebnf}
        body.update(self.extra_body)
        return path, body

    def complete(self, request: LLMRequest) -> LLMResponse:
        if request.grammar is not None and self.structured_outputs is None:
            try:
                response = self._complete(request)
            except LLMError as error:
                if not _refuses_grammar(error):
                    raise
                # the server does not take structured outputs: decode this and later requests freely
                self.structured_outputs = False
                return self._complete(request)
            self.structured_outputs = True
            return response
        return self._complete(request)

    def _complete(self, request: LLMRequest) -> LLMResponse:
        if request.forced_text is not None and not self.glmcot_extras:
            raise LLMError(
                f"{self.base_url} is not a glmcot server, and only glmcot serve can force-decode "
                "(the scripted policy): point openai+glmcot:URL at `glmcot serve`, or use the "
                "native backend"
            )
        stream = self.stream if self.stream is not None else (request.on_delta is not None or request.on_line is not None)
        return self._with_retries(lambda: self._complete_once(request, stream))

    def _complete_once(self, request: LLMRequest, stream: bool) -> LLMResponse:
        path, body = self._body(request, stream)
        started = time.perf_counter()
        first: float | None = None
        usage: dict = {}
        finish = "stop"
        fingerprints: set[str] = set()
        if not stream:
            response = self._client.post(self.base_url + path, headers=self._headers, json=body)
            self._raise_for(response)
            data = response.json()
            choice = (data.get("choices") or [{}])[0]
            text = _choice_text(choice, self.mode) or ""
            finish = choice.get("finish_reason") or "stop"
            usage = data.get("usage") or {}
            fingerprints.add(str(data.get("system_fingerprint") or ""))
            first = time.perf_counter() - started
            splitter = LineSplitter(request.on_delta, request.on_line)
            splitter.feed(text)
            splitter.finish()
        else:
            # A retry after a mid-stream failure streams again from the start; the agents' hooks
            # tolerate seeing a line twice.
            pieces: list[str] = []
            splitter = LineSplitter(request.on_delta, request.on_line)
            complete = False   # saw [DONE] or a finish reason: the server meant to end here
            with self._client.stream("POST", self.base_url + path, headers=self._headers, json=body) as response:
                if response.status_code >= 400:
                    response.read()
                    self._raise_for(response)
                for line in response.iter_lines():
                    if not line.startswith("data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        complete = True
                        break
                    try:
                        data = json.loads(payload)
                    except json.JSONDecodeError:
                        continue
                    if data.get("usage"):
                        usage = data["usage"]
                    if data.get("system_fingerprint"):
                        fingerprints.add(str(data["system_fingerprint"]))
                    for choice in data.get("choices") or []:
                        piece = _delta_text(choice, self.mode)
                        if piece:
                            if first is None:
                                first = time.perf_counter() - started
                            pieces.append(piece)
                            splitter.feed(piece)
                        if choice.get("finish_reason"):
                            finish = choice["finish_reason"]
                            complete = True
                    if isinstance(data.get("error"), dict):   # an error sent inside the stream
                        error = _HTTPStatus(f"error in the stream from {self.base_url}{path}: "
                                            f"{data['error'].get('message')}")
                        error.status = 503 if data["error"].get("type") == "timeout_error" else 500
                        raise error
            if not complete:
                # The connection closed cleanly mid-answer (a proxy, a restart): the text is cut
                # short. Retried like a dropped connection, never taken as the whole answer.
                raise _TruncatedStream(f"the stream from {self.base_url}{path} ended after "
                                       f"{sum(map(len, pieces))} characters without [DONE] or "
                                       "a finish reason")
            splitter.finish()
            text = "".join(pieces)
        if request.forced_text is not None:
            # Forced text is labelled scripted policy; make sure it never was model output.
            if not any(FORCED_FINGERPRINT in fingerprint for fingerprint in fingerprints):
                raise LLMError(
                    f"{self.base_url} did not confirm forced decoding (system_fingerprint "
                    f"{sorted(fingerprints)!r}); its text may be the model's, not the scripted policy's"
                )
        else:
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

    def end_session(self, session_id: str) -> None:
        """On glmcot serve: a prefill-only request that carries `end_session`, so the engine
        demotes the session's notebook blocks to P-III. Other servers keep no sessions."""
        if not self.glmcot_extras:
            return
        body = {
            "model": self.model,
            "prompt": "",
            "segments": [{"text": "\n", "level": 4}],
            "max_tokens": 0,
            "temperature": 0.0,
            "session": session_id,
            "end_session": True,
        }

        def send() -> None:
            response = self._client.post(self.base_url + "/completions", headers=self._headers, json=body)
            self._raise_for(response)

        self._with_retries(send)

    def close(self) -> None:
        self._client.close()


class _HTTPStatus(Exception):
    status = 0


class _TruncatedStream(Exception):
    """A streamed answer that ended without its end marker (transient: retried)."""


def _segments_body(request: LLMRequest) -> list[dict[str, Any]]:
    segments = []
    for segment in request.segments:
        entry: dict[str, Any] = {"text": segment.text, "level": segment.level}
        if segment.key is not None:
            entry["key"] = segment.key
        segments.append(entry)
    return segments


def _choice_text(choice: dict, mode: str) -> str | None:
    if mode == "chat":
        return (choice.get("message") or {}).get("content")
    return choice.get("text")


def _delta_text(choice: dict, mode: str) -> str | None:
    if mode == "chat":
        return (choice.get("delta") or {}).get("content")
    return choice.get("text")


def _refuses_grammar(error: LLMError) -> bool:
    """A 400/422 that names the structured-output field or grammars: the server does not take them."""
    status = getattr(error.__cause__, "status", 0)
    text = str(error).lower()
    return status in (400, 422) and any(word in text for word in ("structured", "grammar", "extra", "unrecognized"))
