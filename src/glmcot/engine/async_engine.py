"""AsyncEngine: the engine loop on a background thread, for online use.

`submit` is thread-safe and returns a concurrent.futures.Future[RequestOutput] (the contract:
glmcot.engine.client). The `on_delta` and `on_line` callbacks run on the engine thread between
steps: keep them quick (hand work to another thread or event loop), since every running request
waits for them. A callback that raises is logged and then disabled for that request; the request
itself continues. ProcessEngine offers the same with the loop in a child process.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from glmcot.engine.client import EngineClient, guard_callback
from glmcot.engine.config import EngineConfig
from glmcot.engine.core.llm_engine import LLMEngine, Prompt
from glmcot.engine.outputs import EngineClosedError, RequestFailedError, RequestOutput
from glmcot.engine.sampling_params import SamplingParams

log = logging.getLogger(__name__)

__all__ = ["AsyncEngine", "EngineClosedError", "RequestFailedError"]


class AsyncEngine(EngineClient):
    def __init__(self, config: EngineConfig | None = None, hash_fn: Callable | None = None, **kwargs: Any) -> None:
        config = config or EngineConfig(**kwargs)
        self.config = config
        self.engine = LLMEngine(config, hash_fn=hash_fn)
        self._lock = threading.Condition()
        self._inbox: list[tuple] = []
        self._futures: dict[str, Future] = {}
        self._closed = False
        self._stats: dict[str, Any] = self.engine.stats()
        self._thread = threading.Thread(target=self._loop, name="glmcot-engine", daemon=True)
        self._thread.start()

    @property
    def tokenizer(self):
        return self.engine.tokenizer

    @property
    def failure(self) -> str | None:
        if self._closed or not self._thread.is_alive():
            return "the engine is shut down"
        return None

    # ---- client side (any thread) ---------------------------------------------------------
    def submit(self, prompt: Prompt, sampling: SamplingParams | None = None, session: str | None = None,
               priority: int = 0, on_delta: Callable[[str], None] | None = None,
               on_line: Callable[[str], None] | None = None, request_id: str | None = None) -> "Future[RequestOutput]":
        """Queue a request. Raises PromptTooLongError (or ValueError/TypeError) right here for a
        prompt that can never be served. Lower `priority` runs first."""
        if self._closed:
            raise EngineClosedError("the engine is shut down")
        tokenized = self.engine.tokenize_prompt(prompt)
        self.engine.check_fits(len(tokenized[0]))
        future: Future = Future()
        with self._lock:
            request_id = request_id or self.engine.new_request_id()
            if request_id in self._futures:
                raise ValueError(f"request id {request_id!r} is already in flight")
            self._futures[request_id] = future
            self._inbox.append(("add", request_id, prompt, tokenized, sampling or SamplingParams(), session, priority,
                                guard_callback(on_delta, request_id), guard_callback(on_line, request_id)))
            self._lock.notify()
        future.request_id = request_id  # type: ignore[attr-defined]
        return future

    def abort(self, request_id: str) -> None:
        """Stop a request and free its blocks (e.g. a client disconnected). Its future resolves
        with finish_reason "abort"."""
        with self._lock:
            self._inbox.append(("abort", request_id))
            self._lock.notify()

    def end_session(self, session_id: str) -> None:
        """Mark a session finished: its P2 (notebook) blocks fall to P3 for eviction."""
        with self._lock:
            self._inbox.append(("end_session", session_id))
            self._lock.notify()

    def stats(self) -> dict[str, Any]:
        """A snapshot taken by the engine thread after its latest step."""
        return dict(self._stats)

    def shutdown(self) -> None:
        with self._lock:
            self._closed = True
            self._lock.notify()
        self._thread.join()

    # ---- engine thread --------------------------------------------------------------------
    def _loop(self) -> None:
        engine = self.engine
        while True:
            with self._lock:
                while not self._inbox and not engine.has_unfinished() and not self._closed:
                    self._lock.wait()
                inbox, self._inbox = self._inbox, []
                closed = self._closed
            for command in inbox:
                try:
                    self._handle(command)
                except Exception as exc:  # one bad command must never stop the loop
                    log.exception("engine command %s failed", command[0])
                    if command[0] in ("add", "abort"):
                        self._resolve(command[1], exc=exc)
            if closed:
                break
            if not engine.has_unfinished():
                continue
            try:
                finished = engine.step()
            except Exception as exc:  # a model failure must not strand the waiting callers
                log.exception("engine step failed; failing all in-flight requests")
                for request_id in engine.abort_all():
                    self._resolve(request_id, exc=exc)
                continue
            for out in finished:
                if out.finish_reason == "error":
                    self._resolve(out.request_id, exc=RequestFailedError(f"request {out.request_id} failed: {out.error}"))
                else:
                    self._resolve(out.request_id, out)
            try:
                self._stats = engine.stats()
            except Exception:
                log.exception("engine stats failed")
        engine.abort_all()
        with self._lock:
            pending, self._futures = self._futures, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(EngineClosedError("the engine was shut down before the request finished"))

    def _handle(self, command: tuple) -> None:
        kind = command[0]
        if kind == "add":
            _, request_id, prompt, tokenized, sampling, session, priority, on_delta, on_line = command
            future = self._futures.get(request_id)
            if future is None or not future.set_running_or_notify_cancel():
                self._resolve(request_id)
                return
            try:
                self.engine.add_request(prompt, sampling, request_id, priority, session, on_delta, on_line, tokenized)
            except Exception as exc:
                self._resolve(request_id, exc=exc)
        elif kind == "abort":
            out = self.engine.abort(command[1])
            if out is not None:
                self._resolve(command[1], out)
        elif kind == "end_session":
            self.engine.end_session(command[1])

    def _resolve(self, request_id: str, out: RequestOutput | None = None, exc: BaseException | None = None) -> None:
        with self._lock:
            future = self._futures.pop(request_id, None)
        if future is None or future.done():
            return
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(out)

