"""The Retriever's executor: runs A-Agent snippets in a pool of sandboxed worker processes.

Workers are long-lived (the graph is opened once per worker) fresh interpreters started with
subprocess in their own session (safe when the parent holds torch or engine threads, and no
`if __name__ == "__main__"` guard is needed in the caller's script).
A snippet gets a wall-clock budget measured in the parent, excluding time the parent spends
resolving RetrieveNode for it; on overrun the worker is killed and replaced, and so is a worker
that dies (CPU hard kill, memory) or reports a MemoryError.

RetrieveNode goes back to the parent over the pipe: `resolve(text) -> node id` is supplied per
call, so the global RetrieveNode cache and the pipelined prefetch (a search started while the
A-Agent was still decoding) serve every worker.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from glmcot.agents.sandbox import policy
from glmcot.agents.sandbox.worker import JSONConnection


@dataclass
class SandboxLimits:
    """Per-snippet limits (and the pool's shape)."""

    wall_s: float = 10.0
    cpu_s: float = 5.0
    memory_mb: int = 512
    max_output: int = 8000
    max_calls: int = 2000
    max_code_chars: int = 8000
    chunk_limit: int = 3
    neighbour_limit: int = 50
    startup_s: float = 60.0


@dataclass
class ExecutionResult:
    """What a snippet did. `error` is None on success, else a dict with kind (rejected, exception,
    graph, retrieval, timeout, cpu, memory, output, calls, killed), type, message and line."""

    ok: bool
    output: str = ""
    error: dict[str, Any] | None = None
    touched: list[str] = field(default_factory=list)
    chunks: list[tuple[str, str]] = field(default_factory=list)
    calls: int = 0
    seconds: float = 0.0
    retrieval_s: float = 0.0

    def error_text(self) -> str:
        """One line for the A-Agent: type, message and line."""
        if not self.error:
            return ""
        where = f" (line {self.error['line']})" if self.error.get("line") else ""
        return f"{self.error.get('type', 'Error')}{where}: {self.error.get('message', '')}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "output": self.output,
            "error": self.error,
            "touched": self.touched,
            "chunks": [node for node, _ in self.chunks],
            "calls": self.calls,
            "seconds": round(self.seconds, 6),
            "retrieval_s": round(self.retrieval_s, 6),
        }


class SandboxError(RuntimeError):
    """The sandbox itself could not run (a worker failed to start)."""


class _Worker:
    def __init__(self, graph_dir: str, limits: SandboxLimits):
        from multiprocessing.connection import Connection

        parent_socket, child_socket = socket.socketpair()
        options = {"memory_mb": limits.memory_mb, "neighbour_limit": limits.neighbour_limit}
        environment = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "glmcot.agents.sandbox.worker", str(child_socket.fileno()), graph_dir, json.dumps(options)],
                pass_fds=[child_socket.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                env=environment,
                close_fds=True,
            )
        finally:
            child_socket.close()
        self.conn = JSONConnection(Connection(parent_socket.detach()))
        if not self.conn.poll(limits.startup_s):
            self.kill()
            raise SandboxError(f"a sandbox worker did not start within {limits.startup_s:.0f} s")
        try:
            status, info = self.conn.recv()
        except EOFError:
            self.kill()
            raise SandboxError("a sandbox worker exited during start-up") from None
        if status != "ready":
            self.kill()
            raise SandboxError(f"a sandbox worker could not open the graph: {info}")
        self.pid = info.get("pid")

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        try:
            if self.process.poll() is None:
                try:
                    os.killpg(self.process.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    self.process.kill()
            self.process.wait(timeout=5)
        except Exception:
            pass
        try:
            self.conn.close()
        except Exception:
            pass


def _no_retrieval(text: str) -> str:
    raise LookupError("this sandbox has no retrieval index")


class SandboxExecutor:
    """A pool of `workers` sandbox processes over the graph at `graph_dir`. Thread-safe."""

    def __init__(self, graph_dir: str | Path, *, workers: int = 2, limits: SandboxLimits | None = None):
        self.graph_dir = str(graph_dir)
        if not Path(self.graph_dir).is_dir():
            raise FileNotFoundError(f"no graph directory at {self.graph_dir}")
        self.limits = limits or SandboxLimits()
        self.size = max(1, int(workers))
        self._idle: queue.Queue[_Worker | None] = queue.Queue()
        self._all: set[_Worker] = set()
        self._lock = threading.Lock()
        self._closed = False
        self.replaced = 0
        # Start the first worker now so a broken graph fails here with a clear error; the rest
        # start lazily, in parallel with useful work.
        first = self._spawn()
        self._idle.put(first)
        for _ in range(self.size - 1):
            self._idle.put(None)

    def _spawn(self) -> _Worker:
        worker = _Worker(self.graph_dir, self.limits)
        with self._lock:
            self._all.add(worker)
        return worker

    def _discard(self, worker: _Worker) -> None:
        worker.kill()
        with self._lock:
            self._all.discard(worker)
            self.replaced += 1

    def run(self, code: str, resolve: Callable[[str], str] | None = None) -> ExecutionResult:
        """Runs one snippet. `resolve` answers RetrieveNode (text -> node id, raising on no match)."""
        if self._closed:
            raise SandboxError("the sandbox is closed")
        try:
            policy.check_snippet(code, max_chars=self.limits.max_code_chars)
        except policy.SnippetRejected as error:
            return ExecutionResult(ok=False, error={"kind": "rejected", "type": "SnippetRejected", "message": error.message, "line": error.line})
        except Exception as error:  # untrusted input: whatever the check trips over is a rejection
            message = f"the snippet could not be checked: {type(error).__name__}: {error}"[:500]
            return ExecutionResult(ok=False, error={"kind": "rejected", "type": "SnippetRejected", "message": message, "line": None})
        resolve = resolve or _no_retrieval
        worker = self._idle.get()
        try:
            if worker is None or not worker.alive():
                if worker is not None:
                    self._discard(worker)
                worker = self._spawn()
            result, keep = self._run_on(worker, code, resolve)
        except BaseException:
            if worker is not None:
                self._discard(worker)
            self._idle.put(None)
            raise
        if keep:
            self._idle.put(worker)
        else:
            self._discard(worker)
            self._idle.put(None)
        return result

    def _run_on(self, worker: _Worker, code: str, resolve: Callable[[str], str]) -> tuple[ExecutionResult, bool]:
        limits = self.limits
        job = {
            "code": code,
            "cpu_s": limits.cpu_s,
            "max_output": limits.max_output,
            "max_calls": limits.max_calls,
            "chunk_limit": limits.chunk_limit,
            "max_code_chars": limits.max_code_chars,
        }
        started = time.perf_counter()
        deadline = started + limits.wall_s
        retrieval_s = 0.0
        try:
            worker.conn.send(["run", job])
        except (OSError, BrokenPipeError, ValueError):
            return ExecutionResult(ok=False, error={"kind": "killed", "type": "WorkerDied", "message": "the sandbox worker was gone; retry", "line": None}), False
        while True:
            remaining = deadline - time.perf_counter()
            try:
                ready = remaining > 0 and worker.conn.poll(remaining)
            except (OSError, EOFError):
                ready = True
            if not ready:
                return (
                    ExecutionResult(
                        ok=False,
                        error={"kind": "timeout", "type": "Timeout", "message": f"the snippet ran longer than {limits.wall_s:g} s and was stopped", "line": None},
                        seconds=time.perf_counter() - started,
                        retrieval_s=retrieval_s,
                    ),
                    False,
                )
            try:
                message = worker.conn.recv()
            except (EOFError, OSError, ValueError):
                try:
                    worker.process.wait(timeout=1)
                except subprocess.TimeoutExpired:
                    pass
                code_ = worker.process.returncode
                reason = "it exceeded its CPU or memory limit" if code_ is not None and code_ < 0 else "it exited"
                return (
                    ExecutionResult(
                        ok=False,
                        error={"kind": "killed", "type": "WorkerKilled", "message": f"the snippet's process was stopped: {reason}", "line": None},
                        seconds=time.perf_counter() - started,
                        retrieval_s=retrieval_s,
                    ),
                    False,
                )
            if message[0] == "retrieve":
                t0 = time.perf_counter()
                try:
                    reply = [True, str(resolve(str(message[1])))]
                except Exception as error:  # no match, no index: the snippet sees RetrievalFailed
                    reply = [False, f"RetrieveNode({message[1]!r}) found no node: {error}"]
                spent = time.perf_counter() - t0
                retrieval_s += spent
                deadline += spent
                try:
                    worker.conn.send(reply)
                except (OSError, BrokenPipeError):
                    continue
                continue
            if message[0] == "done":
                data = message[1]
                result = ExecutionResult(
                    ok=bool(data.get("ok")),
                    output=data.get("output", ""),
                    error=data.get("error"),
                    touched=list(data.get("touched", [])),
                    chunks=[tuple(item) for item in data.get("chunks", [])],
                    calls=int(data.get("calls", 0)),
                    seconds=time.perf_counter() - started,
                    retrieval_s=retrieval_s,
                )
                return result, not data.get("recycle")

    def close(self) -> None:
        self._closed = True
        with self._lock:
            workers = list(self._all)
            self._all.clear()
        for worker in workers:
            try:
                worker.conn.send(["stop"])
            except Exception:
                pass
            worker.kill()

    def __enter__(self) -> "SandboxExecutor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
