"""Layer 2-4 of the sandbox: the worker process.

A long-lived process: a fresh interpreter (`python -m glmcot.agents.sandbox.worker`, in its own
session, so no parent threads, locks or main module come along). It opens the graph mmap once
(the version its pool was made for, so a worker started after an update still reads the
version its questions started on), then runs snippets one at a time:
- namespace: only the five primitives and an allowlisted set of builtins (no `__import__`);
- primitives return plain values; their calls are counted and capped;
- `print` writes into a capped buffer;
- CPU time per snippet via RLIMIT_CPU (soft limit raised to 'used so far + budget' before each
  snippet; SIGXCPU becomes an exception), memory via RLIMIT_DATA (the mmapped graph does not count
  towards it, unlike RLIMIT_AS);
- defence in depth, should a snippet ever get past the allowlist: a minimal environment (no API
  keys or tokens: the parent passes only what Python needs) and, once the graph is open, no new
  processes or threads (RLIMIT_NPROC 0; not enforced for root), no file writes (RLIMIT_FSIZE 0,
  SIGXFSZ ignored so a write fails with an error), no core dumps, and few file descriptors
  (RLIMIT_NOFILE: those open now, two per store file and a little headroom);
- RetrieveNode asks the parent over the pipe, so every worker shares the parent's global
  RetrieveNode cache and the pipelined prefetch.
The parent kills the process on wall-time overrun; a killed worker is replaced.

Messages are JSON (never pickle: the parent does not unpickle what a sandboxed process sends) over
a socket pair: parent -> worker ["run", job] / [ok, value] (a RetrieveNode answer) / ["stop"];
worker -> parent ["ready", info] / ["failed", reason] / ["retrieve", text] / ["call", [primitive, args]]
(a live source's primitives; the parent answers [true, value, touched] or [false, error, touched]) /
["done", result].
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys

from glmcot.agents.sandbox.limits import on_cpu_limit

# The graph argument of a worker whose graph is a live database: it opens nothing and asks the
# parent for every primitive over its channel (["call", [name, args]]), as for RetrieveNode.
PROXY = "-"


def _vm_data_bytes() -> int:
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class JSONConnection:
    """send/recv of JSON values over a multiprocessing Connection. The wire is ASCII JSON: a lone
    surrogate a snippet prints or passes to RetrieveNode travels as a `\\udXXX` escape instead of
    failing to encode (which killed the worker and lost its output); the parent makes it U+FFFD."""

    def __init__(self, connection):
        self.connection = connection

    def send(self, value) -> None:
        self.connection.send_bytes(json.dumps(value, ensure_ascii=True).encode("ascii"))

    def recv(self, max_bytes: int | None = None):
        """The next value; OSError when the message is over max_bytes."""
        return json.loads(self.connection.recv_bytes(max_bytes).decode("utf-8"))

    def poll(self, timeout: float | None = None) -> bool:
        return self.connection.poll(timeout)

    def close(self) -> None:
        self.connection.close()


def main(conn, graph_dir: str, options: dict) -> None:  # pragma: no cover - runs in a subprocess
    """Worker loop."""
    try:
        graph = None
        if graph_dir != PROXY:  # the memory-mapped store stays inside the worker
            from glmcot.graph.opener import open_source

            pinned = options.get("version")
            if pinned is not None:  # the version of the question this worker serves, never a newer one
                from glmcot.graph.graph_source import StoreSource
                from glmcot.graph.updates.versions import VersionInfo, open_version

                graph = StoreSource(open_version(graph_dir, VersionInfo(int(pinned["version"]), str(pinned["base"]),
                                                                        pinned["delta"])))
            else:
                graph = open_source(graph_dir)
        from glmcot.agents.sandbox.runtime import SnippetRuntime

        runtime = SnippetRuntime(graph, conn, options)
    except BaseException as error:  # report instead of dying silently
        conn.send(("failed", f"{type(error).__name__}: {error}"))
        return
    signal.signal(signal.SIGXCPU, on_cpu_limit)
    apply_process_limits(graph_dir if graph_dir != PROXY else None)
    memory = int(options.get("memory_mb", 512)) * 1024 * 1024
    if memory > 0:
        limit = _vm_data_bytes() + memory
        try:
            resource.setrlimit(resource.RLIMIT_DATA, (limit, resource.getrlimit(resource.RLIMIT_DATA)[1]))
        except (ValueError, OSError):
            pass
    conn.send(("ready", {"pid": __import__("os").getpid()}))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message[0] == "stop":
            return
        if message[0] != "run":
            continue
        job = message[1]
        result = runtime.run(job)
        try:
            conn.send(("done", result))
        except (EOFError, OSError, BrokenPipeError):
            return
        if result.get("recycle"):
            return


def _highest_fd() -> int | None:
    try:
        return max(int(name) for name in os.listdir("/proc/self/fd"))
    except (OSError, ValueError):
        return None


def _files_under(directory: str) -> int:
    count = 0
    stack = [directory]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    else:
                        count += 1
        except OSError:
            continue
    return count


def _lower_limit(which: int, value: int) -> None:
    """Sets soft and hard limit to `value` (never raises one; the hard limit cannot come back)."""
    try:
        _, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))
    except (ValueError, OSError):
        pass


def apply_process_limits(graph_dir: str | None) -> None:
    """The process, file-size, core and open-file limits (see the module docstring). Called after
    the graph is open and before the first snippet."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    _lower_limit(resource.RLIMIT_FSIZE, 0)
    _lower_limit(resource.RLIMIT_CORE, 0)
    if hasattr(resource, "RLIMIT_NPROC"):
        _lower_limit(resource.RLIMIT_NPROC, 0)
    highest = _highest_fd()
    if highest is not None:
        # Feature columns are opened on first use, and each mapped store file can hold two
        # descriptors (the open file and the one mmap duplicates).
        files = _files_under(graph_dir) if graph_dir else 0
        _lower_limit(resource.RLIMIT_NOFILE, highest + 1 + 2 * files + 32)


if __name__ == "__main__":  # pragma: no cover - runs in a subprocess
    from multiprocessing.connection import Connection

    # Run the package's copy of this module, not __main__'s, so the exception classes raised by
    # the signal handler are the ones the runtime catches.
    from glmcot.agents.sandbox import worker as _worker

    _fd, _graph_dir, _options = int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
    _worker.main(_worker.JSONConnection(Connection(_fd)), _graph_dir, _options)
