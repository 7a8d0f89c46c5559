"""EngineClient: what the server and the native LLM backend call on a running engine, whether
its step loop runs on a thread of this process (AsyncEngine) or in a child process
(ProcessEngine).

The contract: `submit` is thread-safe, tokenises the prompt and raises PromptTooLongError (or
ValueError/TypeError) right there for a prompt that can never be served, and returns a
concurrent.futures.Future[RequestOutput] carrying `.request_id`. A request that fails inside
the engine fails alone with RequestFailedError; once the engine is shut down or gone, pending
futures fail and later submits raise EngineClosedError. `on_delta` and `on_line` run on an
engine-side thread: keep them quick. A callback that raises is logged and then disabled for
that request; the request itself continues.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future
from typing import Any

from glmcot.engine.config import EngineConfig
from glmcot.engine.core.prompts import Prompt
from glmcot.engine.outputs import RequestOutput
from glmcot.engine.sampling_params import SamplingParams

log = logging.getLogger(__name__)
_DONE = object()


class EngineClient:
    config: EngineConfig

    @property
    def tokenizer(self) -> Any:
        raise NotImplementedError

    @property
    def failure(self) -> str | None:
        """Why this engine takes no more requests (shut down, its process gone); None while it does."""
        raise NotImplementedError

    def submit(self, prompt: Prompt, sampling: SamplingParams | None = None, session: str | None = None,
               priority: int = 0, on_delta: Callable[[str], None] | None = None,
               on_line: Callable[[str], None] | None = None, request_id: str | None = None) -> "Future[RequestOutput]":
        raise NotImplementedError

    def abort(self, request_id: str) -> None:
        """Stop a request and free its blocks (e.g. a client disconnected). Its future resolves
        with finish_reason "abort"."""
        raise NotImplementedError

    def end_session(self, session_id: str) -> None:
        """Mark a session finished: its P2 (notebook) blocks fall to P3 for eviction."""
        raise NotImplementedError

    def stats(self) -> dict[str, Any]:
        raise NotImplementedError

    def shutdown(self) -> None:
        raise NotImplementedError

    async def generate(self, prompt: Prompt, sampling: SamplingParams | None = None, **kwargs: Any) -> RequestOutput:
        return await asyncio.wrap_future(self.submit(prompt, sampling, **kwargs))

    async def stream(self, prompt: Prompt, sampling: SamplingParams | None = None, session: str | None = None,
                     priority: int = 0, on_line: Callable[[str], None] | None = None,
                     request_id: str | None = None) -> AsyncIterator[str]:
        """Yield text deltas as they are decoded. Leaving the loop early aborts the request."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        future = self.submit(prompt, sampling, session, priority,
                             on_delta=lambda d: loop.call_soon_threadsafe(queue.put_nowait, d),
                             on_line=on_line, request_id=request_id)
        future.add_done_callback(lambda _: loop.call_soon_threadsafe(queue.put_nowait, _DONE))
        try:
            while (item := await queue.get()) is not _DONE:
                yield item
            future.result()  # re-raise an engine failure
        finally:
            if not future.done():
                self.abort(future.request_id)  # type: ignore[attr-defined]

    def __enter__(self) -> "EngineClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


def guard_callback(callback: Callable[[str], None] | None, request_id: str) -> Callable[[str], None] | None:
    """`callback`, made safe to call from the engine side: its first exception is logged and
    turns it off for this request, so a caller's bug cannot stop the engine or the request."""
    if callback is None:
        return None
    state = {"on": True}

    def call(text: str) -> None:
        if state["on"]:
            try:
                callback(text)
            except Exception:
                state["on"] = False
                log.exception("callback of request %s raised; it is disabled for this request", request_id)

    return call
