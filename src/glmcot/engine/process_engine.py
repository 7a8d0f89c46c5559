"""ProcessEngine: AsyncEngine's interface with the engine loop in a child process.

Why: on a thread, the engine's steps (scheduler, many small torch ops, sampling, detokenising)
hold the interpreter lock most of the time, and an HTTP event loop in the same process waits for
it to accept requests and send first tokens. Here the parent keeps the tokenizer (so `submit`
still refuses an impossible prompt at once, and the child never tokenises again) and talks to a
`spawn`ed child over one Pipe (messages: glmcot.engine.process_messages). The child sends one
report per pass of its loop (every text delta and line of that step, the requests that ended, and
a statistics snapshot at most every STATS_INTERVAL_S and when it goes idle); a reader thread in
the parent calls the callbacks and resolves the futures; a sender thread writes commands, so a
caller (or a callback) never blocks on a full pipe.

Nothing waits forever: start-up is bounded (`start_timeout_s`, saying what it waits on); if the
child dies, every pending future fails with EngineClosedError naming its exit, and so does every
later submit; `shutdown` asks the child to stop, then sends SIGTERM, then SIGKILL, each with a
bounded wait; the child exits when its parent is gone (pipe closed or parent pid changed).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import multiprocessing
import os
import queue
import signal
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from glmcot.engine.client import EngineClient, guard_callback
from glmcot.engine.config import EngineConfig
from glmcot.engine.core.prompts import Prompt, check_fits, tokenize_prompt
from glmcot.engine.outputs import EngineClosedError, RequestOutput
from glmcot.engine.process_messages import (AbortRequest, AddRequest, Command, EndSession, ErrorReport, Ready,
                                            RequestFailure, StartFailed, StepReport, StreamKind, Shutdown)
from glmcot.engine.sampling_params import SamplingParams

log = logging.getLogger(__name__)

START_TIMEOUT_S = 1200.0   # above the CPU kernel build lock's own 900 s wait, plus a build and a load
START_NOTE_S = 30.0        # how often start-up says it is still waiting
STATS_INTERVAL_S = 0.2
PARENT_CHECK_S = 1.0       # an idle child looks for its parent this often
STOP_WAIT_S = 10.0         # after the stop message, before SIGTERM
SIGNAL_WAIT_S = 5.0        # after SIGTERM, before SIGKILL; after SIGKILL, before giving up


@dataclass
class _Pending:
    future: Future
    on_delta: Callable[[str], None] | None
    on_line: Callable[[str], None] | None


class ProcessEngine(EngineClient):
    """The engine's step loop in a child process; `submit` and the rest as AsyncEngine."""

    def __init__(self, config: EngineConfig | None = None, *, start_timeout_s: float = START_TIMEOUT_S,
                 process_setup: Callable[[], None] | None = None, **kwargs: Any) -> None:
        """`process_setup`: called in the engine process before the engine loads (a module-level
        function, since it is pickled), e.g. to set up logging there."""
        from glmcot.engine.models.loader import load_model_description

        config = config or EngineConfig(**kwargs)
        self.config = config
        _, self._tokenizer, _ = load_model_description(config.model, config.tokenizer)
        self._lock = threading.Lock()
        self._pending: dict[str, _Pending] = {}
        self._ids = itertools.count()
        self._failure: str | None = None
        self._stopping = False
        self._outbox: queue.SimpleQueue[Command | None] = queue.SimpleQueue()
        context = multiprocessing.get_context("spawn")
        self._connection, child_end = context.Pipe(duplex=True)
        self._process = context.Process(target=run_engine_process, args=(config, child_end, os.getpid(), process_setup),
                                        name="glmcot-engine", daemon=True)
        self._process.start()
        child_end.close()   # so the child's death reads as end-of-file here
        self.pid = self._process.pid
        try:
            ready = self._wait_ready(start_timeout_s)
        except BaseException:
            self._stop_process()
            self._connection.close()
            raise
        self.limits = ready.limits
        self._stats: dict[str, Any] = ready.stats
        self._sender = threading.Thread(target=self._send_loop, name="glmcot-engine-sender", daemon=True)
        self._reader = threading.Thread(target=self._read_loop, name="glmcot-engine-reader", daemon=True)
        self._sender.start()
        self._reader.start()

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    @property
    def failure(self) -> str | None:
        return self._failure

    @property
    def exitcode(self) -> int | None:
        """The engine process's exit code (negative: the signal that killed it); None while it runs."""
        return self._process.exitcode

    # ---- client side (any thread) ---------------------------------------------------------
    def submit(self, prompt: Prompt, sampling: SamplingParams | None = None, session: str | None = None,
               priority: int = 0, on_delta: Callable[[str], None] | None = None,
               on_line: Callable[[str], None] | None = None, request_id: str | None = None) -> "Future[RequestOutput]":
        """Queue a request. Raises PromptTooLongError (or ValueError/TypeError) right here for a
        prompt that can never be served, EngineClosedError once the engine is gone."""
        if self._failure is not None:
            raise EngineClosedError(self._failure)
        ids, spans = tokenize_prompt(self._tokenizer, prompt, self.limits.vocab_size)
        check_fits(len(ids), self.limits)
        sampling = sampling or SamplingParams()
        future: Future = Future()
        with self._lock:
            if self._failure is not None:
                raise EngineClosedError(self._failure)
            request_id = request_id or f"req-{next(self._ids)}"
            if request_id in self._pending:
                raise ValueError(f"request id {request_id!r} is already in flight")
            self._pending[request_id] = _Pending(future, guard_callback(on_delta, request_id),
                                                 guard_callback(on_line, request_id))
            self._outbox.put(AddRequest(request_id, ids, spans, sampling, session, priority,
                                        on_delta is not None, on_line is not None))
        future.request_id = request_id  # type: ignore[attr-defined]
        # a cancelled future (AsyncEngine skips those) frees its request in the child
        future.add_done_callback(lambda done: self.abort(request_id) if done.cancelled() else None)
        return future

    def abort(self, request_id: str) -> None:
        if self._failure is None:
            self._outbox.put(AbortRequest(request_id))

    def end_session(self, session_id: str) -> None:
        if self._failure is None:
            self._outbox.put(EndSession(session_id))

    def stats(self) -> dict[str, Any]:
        """The latest snapshot the engine process sent (at most STATS_INTERVAL_S old while it works)."""
        return dict(self._stats)

    def shutdown(self) -> None:
        """Stops the engine process (a stop message, then SIGTERM, then SIGKILL, each waited on for
        a bounded time); requests still in flight fail with EngineClosedError."""
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
            if self._failure is None:
                self._failure = "the engine is shut down"
        if self._process.is_alive():
            log.info("stopping the engine process (pid %s)", self.pid)
        self._outbox.put(Shutdown())
        self._outbox.put(None)
        self._stop_process()
        self._reader.join(STOP_WAIT_S)
        self._sender.join(STOP_WAIT_S)
        self._fail_pending("the engine was shut down before the request finished")
        self._connection.close()

    # ---- start and stop -------------------------------------------------------------------
    def _wait_ready(self, timeout_s: float) -> Ready:
        started = time.monotonic()
        what = (f"the engine process (pid {self.pid}) to load {self.config.model} ({self.config.dtype} on "
                f"{self.config.device}{', and on a first start build the CPU kernels' if self.config.device == 'cpu' else ''})")
        next_note = started + START_NOTE_S
        while True:
            now = time.monotonic()
            if now - started >= timeout_s:
                raise TimeoutError(f"waited {timeout_s:.0f} s for {what}; it did not report ready "
                                   "(raise start_timeout_s if it is only slow)")
            ready = wait([self._connection, self._process.sentinel], min(next_note, started + timeout_s) - now)
            if ready:
                message = None
                try:
                    if self._connection.poll(0):
                        message = self._connection.recv()
                except (EOFError, OSError):   # the child is gone: its exit code says more
                    pass
                if isinstance(message, Ready):
                    log.info("engine process (pid %s) ready after %.1f s", self.pid, time.monotonic() - started)
                    return message
                if isinstance(message, StartFailed):
                    log.error("the engine process (pid %s) failed to start:\n%s", self.pid, message.traceback)
                    raise message.error.rebuild()
                if message is None:
                    self._process.join(SIGNAL_WAIT_S)
                    raise EngineClosedError(f"the engine process (pid {self.pid}) "
                                            f"{describe_exit(self._process.exitcode)} while starting (its log is above)")
            elif time.monotonic() >= next_note:
                log.warning("still waiting for %s: %.0f s so far, at most %.0f s", what,
                            time.monotonic() - started, timeout_s)
                next_note += START_NOTE_S

    def _stop_process(self) -> None:
        process = self._process
        process.join(STOP_WAIT_S if self._stopping else 0)
        for number in (signal.SIGTERM, signal.SIGKILL):
            if not process.is_alive():
                return
            log.warning("the engine process (pid %s) did not stop; sending %s", self.pid, number.name)
            try:   # its whole group: a kernel build's compiler processes stop with it
                os.killpg(self.pid, number)
            except OSError:   # not yet its own group's leader
                with contextlib.suppress(OSError):
                    os.kill(self.pid, number)
            process.join(SIGNAL_WAIT_S)
        if process.is_alive():
            log.error("the engine process (pid %s) is still alive after SIGKILL", self.pid)

    # ---- sender and reader threads --------------------------------------------------------
    def _send_loop(self) -> None:
        while (command := self._outbox.get()) is not None:
            try:
                self._connection.send(command)
            except (OSError, ValueError):   # the child is gone: the reader reports it
                return

    def _read_loop(self) -> None:
        connection, sentinel = self._connection, self._process.sentinel
        try:
            while True:
                ready = wait([connection, sentinel])
                if connection not in ready:   # the child ended: take what it sent before
                    while connection.poll(0):
                        self._dispatch(connection.recv())
                    break
                self._dispatch(connection.recv())
        except (EOFError, OSError, ValueError):   # the child's end closed, or ours by shutdown
            pass
        except Exception:   # a bug here must still fail the futures rather than strand them
            log.exception("reading from the engine process failed")
        self._process.join(SIGNAL_WAIT_S if not self._stopping else STOP_WAIT_S)
        if self._stopping:
            return
        reason = (f"the engine process (pid {self.pid}) {describe_exit(self._process.exitcode)}; "
                  "requests in flight failed and this engine takes no more")
        log.error("%s", reason)
        with self._lock:
            if self._failure is None:
                self._failure = reason
        self._outbox.put(None)
        self._fail_pending(reason)

    def _dispatch(self, report: Any) -> None:
        if not isinstance(report, StepReport):
            log.warning("unexpected message from the engine process: %r", type(report).__name__)
            return
        if report.stats is not None:   # before the futures resolve, so a caller sees its own request counted
            self._stats = report.stats
        pending = self._pending
        for request_id, kind, text in report.events:
            entry = pending.get(request_id)
            if entry is not None:
                callback = entry.on_delta if kind is StreamKind.DELTA else entry.on_line
                if callback is not None:
                    callback(text)
        for output in report.finished:
            self._resolve(request_id=output.request_id, output=output)
        for failure in report.failures:
            self._resolve(request_id=failure.request_id, error=failure.error.rebuild())

    def _resolve(self, request_id: str, output: RequestOutput | None = None, error: BaseException | None = None) -> None:
        with self._lock:
            entry = self._pending.pop(request_id, None)
        if entry is None or entry.future.done():
            return
        try:
            if error is not None:
                entry.future.set_exception(error)
            else:
                entry.future.set_result(output)
        except InvalidStateError:   # cancelled meanwhile
            pass

    def _fail_pending(self, reason: str) -> None:
        with self._lock:
            pending, self._pending = self._pending, {}
        for entry in pending.values():
            if not entry.future.done():
                try:
                    entry.future.set_exception(EngineClosedError(reason))
                except InvalidStateError:
                    pass


def describe_exit(exitcode: int | None) -> str:
    """How a process ended, in words: its exit code, or the signal that killed it."""
    if exitcode is None:
        return "stopped answering (it is still running)"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        hint = " (the kernel's out-of-memory killer sends SIGKILL too)" if -exitcode == signal.SIGKILL else ""
        return f"was killed by {name} (exit code {exitcode}){hint}"
    return f"exited with code {exitcode}"


# ---- the child process ------------------------------------------------------------------------
def run_engine_process(config: EngineConfig, connection: Connection, parent_pid: int,
                       setup: Callable[[], None] | None = None) -> None:
    """The child's entry point: load the engine, report ready, then serve commands until told to
    stop or the parent is gone."""
    # A process group of its own: Ctrl-C in a terminal, or a SIGTERM to the server's group (as
    # benchmarks and supervisors send), reaches the parent alone, which drains its requests and
    # then stops this process in order; if the parent dies instead, this process sees it and leaves.
    try:
        os.setsid()
    except OSError:   # already a group leader
        pass
    logging.basicConfig(level=logging.WARNING, format="glmcot engine process: %(levelname)s %(name)s: %(message)s")
    try:
        from glmcot.engine.core.llm_engine import LLMEngine

        if setup is not None:
            setup()
        engine = LLMEngine(config)
        connection.send(Ready(os.getpid(), engine.prompt_limits, engine.stats()))
    except BaseException as error:  # the parent must hear why, whatever it was
        try:
            connection.send(StartFailed(ErrorReport.of(error), traceback.format_exc()))
        except (OSError, ValueError):
            pass
        raise SystemExit(1) from None
    try:
        _ChildLoop(engine, connection, parent_pid).run()
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass   # the parent is gone


class _ChildLoop:
    def __init__(self, engine: Any, connection: Connection, parent_pid: int) -> None:
        self.engine = engine
        self.connection = connection
        self.parent_pid = parent_pid
        self.report = StepReport()
        self.stats_sent = time.monotonic()
        self.changed = False   # work done since the last statistics snapshot

    def run(self) -> None:
        engine, connection = self.engine, self.connection
        while True:
            if not engine.has_unfinished() and not connection.poll(PARENT_CHECK_S):
                if os.getppid() != self.parent_pid:
                    return
                continue
            while connection.poll(0):   # every command that has arrived, before the next step
                command = connection.recv()
                if isinstance(command, Shutdown):
                    return
                self.handle(command)
            if engine.has_unfinished():
                self.step()
            self.send()
            if os.getppid() != self.parent_pid:
                return

    def handle(self, command: Command) -> None:
        self.changed = True
        engine, report = self.engine, self.report
        try:
            if isinstance(command, AddRequest):
                request_id = command.request_id
                # the report is replaced after each send: look it up when the text comes
                on_delta = (lambda text: self.report.events.append((request_id, StreamKind.DELTA, text))) \
                    if command.wants_deltas else None
                on_line = (lambda text: self.report.events.append((request_id, StreamKind.LINE, text))) \
                    if command.wants_lines else None
                try:
                    engine.add_request(command.prompt_token_ids, command.sampling, request_id, command.priority,
                                       command.session, on_delta, on_line, (command.prompt_token_ids, command.spans))
                except Exception as error:
                    report.failures.append(RequestFailure(request_id, ErrorReport.of(error)))
            elif isinstance(command, AbortRequest):
                output = engine.abort(command.request_id)
                if output is not None:
                    report.finished.append(output)
            elif isinstance(command, EndSession):
                engine.end_session(command.session_id)
        except Exception:   # one bad command must never stop the loop
            log.exception("engine command %s failed", type(command).__name__)

    def step(self) -> None:
        engine, report = self.engine, self.report
        self.changed = True
        try:
            finished = engine.step()
        except Exception as error:  # a model failure must not strand the waiting callers
            log.exception("engine step failed; failing all in-flight requests")
            report.failures.extend(RequestFailure(request_id, ErrorReport.of(error)) for request_id in engine.abort_all())
            return
        for output in finished:
            if output.finish_reason == "error":
                message = f"request {output.request_id} failed: {output.error}"
                report.failures.append(RequestFailure(output.request_id, ErrorReport("RequestFailedError", message)))
            else:
                report.finished.append(output)

    def send(self) -> None:
        report = self.report
        now = time.monotonic()
        if self.changed and (now - self.stats_sent >= STATS_INTERVAL_S or not self.engine.has_unfinished()):
            try:
                report.stats = self.engine.stats()
            except Exception:
                log.exception("engine stats failed")
            self.stats_sent, self.changed = now, False
        if report:
            self.connection.send(report)
            self.report = StepReport()
