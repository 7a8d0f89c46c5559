"""The server's view of the native engine: request building, chat templates, and `Generation`,
which carries an engine request's deltas from the engine's thread (AsyncEngine's loop, or
ProcessEngine's reader) into the event loop.

Everything here that depends on the engine's exact API lives in `EngineBridge`, so the HTTP
handlers stay independent of it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

CHATML_MESSAGE = "<|im_start|>{role}\n{content}<|im_end|>\n"
CHATML_ASSISTANT = "<|im_start|>assistant\n"
MARK = "\x00glmcot-segment-{}\x00"


@dataclass
class Finished:
    """One engine request's result, in the shape the OpenAI responses need."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    finish_reason: str
    logprobs: list[Any] | None = None   # engine TokenLogprob records, when asked for


def _count(value: Any) -> int:
    if value is None:
        return 0
    return value if isinstance(value, int) else len(value)


def result_of(future: concurrent.futures.Future) -> Finished:
    """The request's result; an engine failure becomes a clean 500 (no traceback leaves)."""
    from glmcot.engine.outputs import EngineClosedError
    from glmcot.serve.errors import APIError, engine_gone

    try:
        return finished(future.result(timeout=0))
    except (concurrent.futures.CancelledError, asyncio.CancelledError):
        raise APIError(499, "the request was cancelled", "cancelled", "cancelled") from None
    except EngineClosedError as exc:
        raise engine_gone(str(exc)) from None
    except Exception as exc:
        raise APIError(500, f"engine error: {type(exc).__name__}: {exc}", "server_error",
                       "engine_error") from None


def finished(output: Any) -> Finished:
    reason = getattr(output, "finish_reason", None) or "stop"
    reason = {"eos": "stop", "stop_string": "stop", "max_tokens": "length",
              "aborted": "abort"}.get(reason, reason)
    return Finished(text=output.text, prompt_tokens=_count(output.prompt_tokens),
                    completion_tokens=_count(getattr(output, "token_ids", None)),
                    cached_tokens=_count(getattr(output, "cached_tokens", 0)),
                    finish_reason=reason, logprobs=getattr(output, "logprobs", None))


class EngineBridge:
    """Builds engine requests from API bodies and submits them to the engine (the interface of
    glmcot.engine.client.EngineClient)."""

    def __init__(self, engine: Any) -> None:
        from glmcot.engine import SamplingParams, Segment

        self.engine = engine
        self._sampling_cls = SamplingParams
        self._segment_cls = Segment
        self.tokenizer = getattr(engine, "tokenizer", None)

    # --- request building -------------------------------------------------------------------

    def token_text(self, token_id: int) -> str:
        """One token as text (special tokens included), for log-probability listings."""
        return self.tokenizer.decode([token_id], skip_special_tokens=False)

    def sampling(self, body: Any, max_tokens: int, seed: int | None,
                 logprobs: int | None = None) -> Any:
        fields: dict[str, Any] = {
            "temperature": 1.0 if body.temperature is None else body.temperature,
            "max_tokens": max_tokens,
            "ignore_eos": body.ignore_eos,
        }
        if body.top_p is not None:
            fields["top_p"] = body.top_p
        if body.top_k is not None:
            fields["top_k"] = max(0, body.top_k)   # OpenAI-style -1 and the engine's 0 mean off
        if seed is not None:
            fields["seed"] = seed
        if body.stop:
            fields["stop"] = [body.stop] if isinstance(body.stop, str) else list(body.stop)
        if body.stop_token_ids:
            fields["stop_token_ids"] = list(body.stop_token_ids)
        if body.forced_text is not None:
            fields["forced_text"] = body.forced_text
        if logprobs is not None:
            fields["logprobs"] = logprobs
        return self._sampling_cls(**fields)

    def segments(self, segments: list[Any]) -> list[Any]:
        return [self._segment_cls(s.text, s.level, s.key) for s in segments]

    def chat_prompt(self, messages: list[Any], add_generation_prompt: bool = True
                    ) -> str | list[Any]:
        """Applies the model's chat template. Messages given as segments stay segments: the
        template text around them becomes segments of its own, so nothing is merged."""
        contents: list[str] = []
        pieces: list[list[Any] | None] = []
        for message in messages:
            if message.segments is not None:
                pieces.append(self.segments(message.segments))
                contents.append(MARK.format(len(pieces) - 1))
            else:
                if isinstance(message.content, list):
                    other = [p.type for p in message.content if p.type != "text"]
                    if other:   # refused by name rather than silently dropped
                        from glmcot.serve.errors import APIError

                        raise APIError(400, f"content part type {other[0]!r} is not supported "
                                       "(text only)", code="unsupported_parameter")
                    text = "".join(p.text or "" for p in message.content)
                else:
                    text = message.content or ""
                contents.append(text)
        rendered = self._template([(m.role, c) for m, c in zip(messages, contents)],
                                  add_generation_prompt)
        if not pieces:
            return rendered
        out: list[Any] = []
        rest = rendered
        for index, segs in enumerate(pieces):
            before, _, rest = rest.partition(MARK.format(index))
            if before:
                # template text takes the level of the message it introduces
                out.append(self._segment_cls(before, segs[0].level if segs else 4, None))
            out.extend(segs)
        if rest:
            out.append(self._segment_cls(rest, 4, None))
        return out

    def _template(self, messages: list[tuple[str, str]], add_generation_prompt: bool) -> str:
        apply = getattr(self.tokenizer, "apply_chat_template", None)
        if apply is not None and getattr(self.tokenizer, "chat_template", None):
            return apply([{"role": r, "content": c} for r, c in messages], tokenize=False,
                         add_generation_prompt=add_generation_prompt)
        text = "".join(CHATML_MESSAGE.format(role="system" if r == "developer" else r, content=c)
                       for r, c in messages)
        return text + (CHATML_ASSISTANT if add_generation_prompt else "")

    # --- engine calls -------------------------------------------------------------------------

    def submit(self, prompt: Any, sampling: Any, on_delta, session: str | None = None,
               priority: int = 0) -> concurrent.futures.Future:
        return self.engine.submit(prompt, sampling, session=session, priority=priority,
                                  on_delta=on_delta)

    def abort(self, future: concurrent.futures.Future) -> None:
        if future.done():
            return
        abort = getattr(self.engine, "abort", None)
        if abort is not None:
            abort(getattr(future, "request_id", future))
        else:
            future.cancel()

    def end_session(self, session: str) -> None:
        self.engine.end_session(session)

    def stats(self) -> dict[str, Any]:
        return self.engine.stats()


class GenerationAborted(RuntimeError):
    """`Generation.start` after `abort` (shutdown or the client left): nothing more is queued."""


class LoopPoster:
    """Hands items from the engine thread to one event loop's queues, waking the loop once for
    everything posted since its last wake-up rather than once per token: under load one engine
    step yields a token for every sequence in the batch, and each wake-up costs the event loop (and
    the GIL) that the HTTP side needs. Items for one queue keep their order."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.flushes = 0
        self._lock = threading.Lock()
        self._pending: list[tuple[asyncio.Queue, Any]] = []

    def post(self, queue: asyncio.Queue, item: Any) -> None:
        with self._lock:
            wake = not self._pending
            self._pending.append((queue, item))
        if wake:
            try:
                self.loop.call_soon_threadsafe(self._flush)
            except RuntimeError:   # the loop is closed: nobody is listening any more
                with self._lock:
                    self._pending.clear()

    def _flush(self) -> None:
        with self._lock:
            items, self._pending = self._pending, []
        self.flushes += 1
        for queue, item in items:
            queue.put_nowait(item)


_posters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopPoster] = weakref.WeakKeyDictionary()
_posters_lock = threading.Lock()


def poster_for(loop: asyncio.AbstractEventLoop) -> LoopPoster:
    with _posters_lock:
        poster = _posters.get(loop)
        if poster is None:
            poster = _posters[loop] = LoopPoster(loop)
        return poster


def _read_failure(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()


class Generation:
    """Several engine requests (choices) whose deltas arrive, in order, on one asyncio queue."""

    def __init__(self, bridge: EngineBridge, loop: asyncio.AbstractEventLoop,
                 session: str | None = None, priority: int = 0) -> None:
        self.bridge = bridge
        self.loop = loop
        self.session = session
        self.priority = priority
        self.queue: asyncio.Queue = asyncio.Queue()
        self.poster = poster_for(loop)
        self.futures: list[concurrent.futures.Future] = []
        self.started = time.monotonic()
        self.aborted = False
        self._lock = threading.Lock()   # start (a worker thread) races abort (the event loop)

    @property
    def size(self) -> int:
        return len(self.futures)

    def _post(self, item: tuple) -> None:
        self.poster.post(self.queue, item)

    def start(self, prompt: Any, sampling: Any) -> None:
        index = len(self.futures)

        def on_delta(delta: Any, *_: Any) -> None:
            text = delta if isinstance(delta, str) else getattr(delta, "text", "")
            if text:
                self._post((index, text))

        with self._lock:
            if self.aborted:
                raise GenerationAborted("the request was cancelled while its prompts were queued")
            future = self.bridge.submit(prompt, sampling, on_delta, self.session, self.priority)
            future.add_done_callback(lambda _: self._post((index, None)))
            self.futures.append(future)

    def abort(self) -> None:
        """Aborts every engine request this generation queued (and any it would queue)."""
        with self._lock:
            self.aborted = True
            futures = list(self.futures)
        for future in futures:
            try:
                self.bridge.abort(future)
            except Exception:
                pass

    def outputs(self) -> list[Finished]:
        return [result_of(future) for future in self.futures]

    async def wait(self, timeout: float) -> list[Finished]:
        waiting = [asyncio.wrap_future(f) for f in self.futures]
        for item in waiting:   # result_of reports a failure; unread, asyncio would log a traceback
            item.add_done_callback(_read_failure)
        _, pending = await asyncio.wait(waiting, timeout=timeout)
        if pending:
            raise TimeoutError
        return self.outputs()

    async def events(self, timeout: float) -> AsyncIterator[tuple[int, str, Finished | None]]:
        """Yields (choice, delta text, None) while decoding and (choice, rest, result) at the
        end of each choice. Raises TimeoutError past the deadline."""
        deadline = time.monotonic() + timeout
        sent = [""] * len(self.futures)
        open_count = len(self.futures)
        while open_count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            index, text = await asyncio.wait_for(self.queue.get(), timeout=remaining)
            if text is not None:
                sent[index] += text
                yield index, text, None
                continue
            open_count -= 1
            result = result_of(self.futures[index])
            # the engine may hold back text (e.g. a possible stop string); send what is left
            rest = result.text[len(sent[index]):] if result.text.startswith(sent[index]) else ""
            yield index, rest, result
