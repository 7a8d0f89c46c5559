"""The Retriever's executor: runs A-Agent snippets in a pool of sandboxed worker processes.

Workers are long-lived (the graph is opened once per worker) fresh interpreters started with
subprocess in their own session (safe when the parent holds torch or engine threads, and no
`if __name__ == "__main__"` guard is needed in the caller's script).
A snippet gets a wall-clock budget measured in the parent, which includes the time the parent
spends resolving RetrieveNode for it (reported separately as retrieval_s); on overrun the worker
is killed and replaced, and so is a worker that dies (CPU hard kill, memory), reports a
MemoryError or sends a malformed or oversized message. What a worker sends is untrusted: it is
size-bounded, type-checked and made valid Unicode before anything else sees it.

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
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from glmcot.agents.sandbox import policy
from glmcot.agents.sandbox.worker import JSONConnection
from glmcot.agents.formats import valid_text


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
    max_query_chars: int = 2000  # RetrieveNode text (node texts are titles and names)
    max_message_bytes: int = 32 * 1024 * 1024  # one worker -> parent message


@dataclass
class ExecutionResult:
    """What a snippet did. `error` is None on success, else a dict with kind (rejected, exception,
    graph, retrieval, timeout, cpu, memory, output, calls, killed, crashed), type, message and line."""

    ok: bool
    output: str = ""
    error: dict[str, Any] | None = None
    touched: list[str] = field(default_factory=list)
    chunks: list[tuple[str, str]] = field(default_factory=list)
    calls: int = 0
    seconds: float = 0.0
    retrieval_s: float = 0.0
    # the subgraph walked (for the trace view): RetrieveNode (text, node), NeighbourCheck
    # (node, relation, neighbours), and a short text per node seen
    retrieved: list[tuple[str, str]] = field(default_factory=list)
    follows: list[tuple[str, str, list[str]]] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)

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
            "chunk_texts": {node: text for node, text in self.chunks},
            "retrieved": [list(pair) for pair in self.retrieved],
            "follows": [[node, relation, list(found)] for node, relation, found in self.follows],
            "labels": dict(self.labels),
            "calls": self.calls,
            "seconds": round(self.seconds, 6),
            "retrieval_s": round(self.retrieval_s, 6),
        }


# Signals that end a worker because its own code faulted (C stack overflow, say, from hashing or
# comparing a value nested a million deep), not because a limit stopped it.
_CRASH_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGABRT})


def _ended(returncode: int | None) -> tuple[str, str, str]:
    """(kind, type, message) of a worker that stopped answering, from how its process ended."""
    if returncode is None:
        return "killed", "WorkerKilled", "the snippet's process was stopped: it sent a malformed or oversized message"
    if returncode >= 0:
        return "killed", "WorkerKilled", f"the snippet's process exited (status {returncode})"
    try:
        number = signal.Signals(-returncode)
    except ValueError:
        return "crashed", "WorkerCrashed", f"the snippet's process crashed (signal {-returncode})"
    if number in _CRASH_SIGNALS:
        return ("crashed", "WorkerCrashed", f"the snippet's process crashed ({number.name}: "
                f"{signal.strsignal(number) or 'fault'}), e.g. a value nested too deeply for Python's "
                "C code to hash, compare or print; nest data less deeply")
    if number in (signal.SIGKILL, signal.SIGXCPU):
        # RLIMIT_CPU's hard limit and the kernel's out-of-memory killer both send SIGKILL
        return "killed", "WorkerKilled", f"the snippet's process was killed ({number.name}): past its CPU or memory limit"
    return "killed", "WorkerKilled", f"the snippet's process was stopped by {number.name}"


class SandboxError(RuntimeError):
    """The sandbox itself could not run (a worker failed to start)."""


# Variables a worker keeps from the parent's environment when set (what the interpreter needs);
# everything else, API keys and tokens included, stays in the parent.
_KEPT_VARIABLES = ("PYTHONHOME", "SYSTEMROOT", "LD_LIBRARY_PATH")


def worker_environment() -> dict[str, str]:
    """The minimal environment of a sandbox worker: the package on PYTHONPATH (plus the parent's
    PYTHONPATH entries), UTF-8 mode, a fixed hash seed, one BLAS/OpenMP thread, and nothing else of the parent's."""
    import glmcot

    root = str(Path(glmcot.__file__).resolve().parent.parent)
    paths = [root] + [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    environment = {
        "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths)),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUTF8": "1",
        # A snippet that prints a set of names must print them in the same order on every run and
        # in every worker, so answers (and glmcot-mini's training data) are reproducible.
        "PYTHONHASHSEED": "0",
        "PATH": os.defpath,
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    for name in _KEPT_VARIABLES:
        if name in os.environ:
            environment[name] = os.environ[name]
    return environment


class _Worker:
    def __init__(self, graph_dir: str, limits: SandboxLimits, version: dict | None = None):
        from multiprocessing.connection import Connection

        parent_socket, child_socket = socket.socketpair()
        options = {"memory_mb": limits.memory_mb, "neighbour_limit": limits.neighbour_limit, "version": version}
        environment = worker_environment()
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


def _read_message(conn: JSONConnection, max_bytes: int) -> tuple[str, Any]:
    """One message from a worker as (kind, payload); ValueError for anything malformed (the
    worker runs untrusted code, so what it sends is checked, and its size bounded)."""
    message = conn.recv(max_bytes)
    if not isinstance(message, list) or len(message) != 2 or message[0] not in ("retrieve", "call", "done"):
        raise ValueError("not a worker message")
    if message[0] == "done" and not isinstance(message[1], dict):
        raise ValueError("not a result")
    return message[0], message[1]


def _result(data: dict, seconds: float, retrieval_s: float) -> tuple[ExecutionResult, bool]:
    """The parent's ExecutionResult from a worker's "done" payload (types checked, text made
    valid Unicode) and whether to keep the worker."""
    error = data.get("error")
    if error is not None:
        if not isinstance(error, dict):
            raise ValueError("not an error record")
        line = error.get("line")
        error = {
            "kind": valid_text(str(error.get("kind", "exception"))),
            "type": valid_text(str(error.get("type", "Error"))),
            "message": valid_text(str(error.get("message", "")))[:1000],
            "line": line if isinstance(line, int) else None,
        }
    result = ExecutionResult(
        ok=bool(data.get("ok")) and error is None,
        output=valid_text(str(data.get("output", ""))),
        error=error,
        touched=[valid_text(str(node)) for node in data.get("touched", [])],
        chunks=[(valid_text(str(item[0])), valid_text(str(item[1]))) for item in data.get("chunks", [])],
        calls=int(data.get("calls", 0)),
        seconds=seconds,
        retrieval_s=retrieval_s,
        **_walk(data),
    )
    return result, not data.get("recycle")


def _walk(data: dict, limit: int = 500) -> dict:
    """The worker's subgraph records, type-checked and bounded (they come from the sandbox)."""
    def text(value: Any, size: int = 200) -> str:
        return valid_text(str(value))[:size]

    retrieved = [(text(item[0]), text(item[1])) for item in list(data.get("retrieved") or [])[:limit]
                 if isinstance(item, (list, tuple)) and len(item) == 2]
    follows = [(text(item[0]), text(item[1], 100), [text(node) for node in list(item[2])[:limit]])
               for item in list(data.get("follows") or [])[:limit]
               if isinstance(item, (list, tuple)) and len(item) == 3 and isinstance(item[2], (list, tuple))]
    labels = data.get("labels") if isinstance(data.get("labels"), dict) else {}
    return {"retrieved": retrieved, "follows": follows,
            "labels": {text(key): text(value) for key, value in list(labels.items())[:2 * limit]}}


def _no_retrieval(text: str) -> str:
    raise LookupError("this sandbox has no retrieval index")


class SandboxExecutor:
    """A pool of `workers` sandbox processes over the graph at `graph_dir`. Thread-safe.

    `version` ({"version", "base", "delta"}, graph/updates/versions.py) pins every worker of the pool,
    those started later included, to one version of an updated store; without it a worker opens
    the version committed when it starts. With `source` (a live GraphSource) instead of a store,
    workers open nothing and the parent answers their primitive calls from the source."""

    def __init__(self, graph_dir: str | Path | None = None, *, workers: int = 2, limits: SandboxLimits | None = None,
                 version: dict | None = None, source: Any = None):
        from glmcot.agents.sandbox.worker import PROXY

        self.version = version
        self.limits = limits or SandboxLimits()
        self.source = source
        self._tools = None
        if source is not None:
            from glmcot.graph.tools.primitives import GraphTools

            self.graph_dir = PROXY
            self._tools = GraphTools(source, retriever=None, neighbour_limit=self.limits.neighbour_limit)
        else:
            self.graph_dir = str(graph_dir)
            if not Path(self.graph_dir).is_dir():
                raise FileNotFoundError(f"no graph directory at {self.graph_dir}")
        self.size = max(1, int(workers))
        self._idle: queue.Queue[_Worker | None] = queue.Queue()
        self._all: set[_Worker] = set()
        self._lock = threading.Lock()
        self._closed = False
        self.replaced = 0
        # RetrieveNode resolution runs here so the wait can be cut at the snippet's deadline.
        self._resolvers = ThreadPoolExecutor(max_workers=2 * self.size, thread_name_prefix="sandbox-resolve")
        # Start the first worker now so a broken graph fails here with a clear error; the rest
        # start lazily, in parallel with useful work.
        first = self._spawn()
        self._idle.put(first)
        for _ in range(self.size - 1):
            self._idle.put(None)

    def worker_pids(self) -> list[int]:
        """Process ids of the live workers (for diagnostics and tests)."""
        with self._lock:
            return [worker.process.pid for worker in self._all if worker.alive()]

    def _spawn(self) -> _Worker:
        worker = _Worker(self.graph_dir, self.limits, self.version)
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
            "max_query_chars": limits.max_query_chars,
        }
        started = time.perf_counter()
        # One budget for everything the snippet makes happen, RetrieveNode resolution included: a
        # snippet that keeps the parent resolving must not run past its wall limit.
        deadline = started + limits.wall_s
        retrieval_s = 0.0

        def failed(kind: str, type_: str, message: str) -> tuple[ExecutionResult, bool]:
            error = {"kind": kind, "type": type_, "message": message, "line": None}
            return ExecutionResult(ok=False, error=error, seconds=time.perf_counter() - started, retrieval_s=retrieval_s), False

        def timed_out() -> tuple[ExecutionResult, bool]:
            return failed("timeout", "Timeout", f"the snippet ran longer than {limits.wall_s:g} s and was stopped")

        try:
            worker.conn.send(["run", job])
        except (OSError, BrokenPipeError, ValueError):
            return failed("killed", "WorkerDied", "the sandbox worker was gone; retry")
        while True:
            remaining = deadline - time.perf_counter()
            try:
                ready = remaining > 0 and worker.conn.poll(remaining)
            except (OSError, EOFError):
                ready = True
            if not ready:
                return timed_out()
            try:
                kind, payload = _read_message(worker.conn, limits.max_message_bytes)
            except (EOFError, OSError, ValueError, RecursionError, MemoryError):
                # Gone, or it sent what no worker sends (too large, not our JSON): either way it
                # is not to be trusted again.
                try:
                    worker.process.wait(timeout=1)
                except subprocess.TimeoutExpired:
                    pass
                return failed(*_ended(worker.process.returncode))
            if kind == "retrieve":
                text = valid_text(str(payload))
                t0 = time.perf_counter()
                reply = self._resolve(resolve, text, deadline)
                retrieval_s += time.perf_counter() - t0
                if reply is None:
                    return timed_out()
                try:
                    worker.conn.send(reply)
                except (OSError, BrokenPipeError):
                    continue
                continue
            if kind == "call":
                reply = self._call(payload)
                try:
                    worker.conn.send(reply)
                except (OSError, BrokenPipeError):
                    continue
                continue
            if kind == "done":
                try:
                    return _result(payload, time.perf_counter() - started, retrieval_s)
                except (ValueError, TypeError, IndexError, KeyError):
                    return failed("killed", "WorkerKilled", "the snippet's process was stopped: it sent a malformed result")

    def _call(self, payload: Any) -> list:
        """A worker's primitive call on the live source: [ok, value or error, whether the id
        named a node]. The worker's call budget bounds how many come; a database that cannot be
        reached raises SourceUnavailable, which ends the snippet and fails its question."""
        from glmcot.graph.errors import GraphToolError, NodeNotFound

        tools = self._tools
        if tools is None or not isinstance(payload, list) or len(payload) != 3 or not isinstance(payload[1], list) \
                or not isinstance(payload[2], dict) or payload[0] not in tools.functions() or payload[0] == "RetrieveNode":
            raise ValueError("not a primitive call")
        name, args, kwargs = payload
        args = [valid_text(value) if isinstance(value, str) else value for value in args]
        node = args[0] if args else kwargs.get("node_id")
        # whether the id names a node as given (what the in-worker path records), without a round trip:
        # every primitive resolves its id first and raises NodeNotFound when there is none
        found = isinstance(node, str) and node == node.strip()
        try:
            value = tools.functions()[name](*args, **{str(k): v for k, v in kwargs.items()})
        except NodeNotFound as error:
            return [False, {"type": type(error).__name__, "message": valid_text(str(error))[:2000]}, False]
        except GraphToolError as error:
            return [False, {"type": type(error).__name__, "message": valid_text(str(error))[:2000]}, found]
        except TypeError as error:  # wrong arguments: what calling the function in the worker would say
            return [False, {"type": "GraphToolError", "message": valid_text(str(error))[:500]}, found]
        finally:
            tools.reset_touched()
        if name == "NeighbourCheck":
            value = {"ids": list(value), "total": value.total}
        return [True, value, found]

    def _resolve(self, resolve: Callable[[str], str], text: str, deadline: float) -> list | None:
        """The reply to one RetrieveNode ([True, node id] or [False, reason]), or None when the
        snippet's deadline passed first (the search goes on in the background and may still fill
        the cache)."""
        limit = self.limits.max_query_chars
        if len(text) > limit:
            return [False, f"the RetrieveNode text is {len(text)} characters; at most {limit}"]
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            return None
        future = self._resolvers.submit(resolve, text)
        try:
            return [True, valid_text(str(future.result(timeout=remaining)))]
        except FutureTimeout:
            future.cancel()
            return None
        except Exception as error:  # no match, no index: the snippet sees RetrievalFailed
            shown = text if len(text) <= 80 else text[:80] + "..."
            return [False, f"RetrieveNode({shown!r}) found no node: {error}"[:500]]

    def close(self) -> None:
        self._closed = True
        self._resolvers.shutdown(wait=False, cancel_futures=True)
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
