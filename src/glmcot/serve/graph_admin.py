"""Graphs coming and going while the server runs: added and removed by an admin key, and reopened
when another process commits a new version of a store this server reads (replicas over one
memory-mapped store: each notices the other's update within --watch-graphs seconds).

Every change replaces a graph's handle in one assignment, so a question starting now gets the old
handle or the new one, whole; questions already running keep theirs, and the old context is
closed once they are done.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from pathlib import Path
from typing import Any

from glmcot.serve.runtime import GraphHandle, Runtime

log = logging.getLogger("glmcot.serve.graphs")


class GraphAdminError(Exception):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def _graph_lock(name: str) -> threading.Lock:
    from glmcot.serve.updates import _locks   # one lock per graph with the update endpoint

    return _locks.setdefault(name, threading.Lock())


def _ensure_system(runtime: Runtime) -> Any:
    """The runtime's system; a server started without graphs builds one (no graphs yet) now."""
    if runtime.system is None:
        from glmcot.serve.agent_factory import agent_factory, system_config
        from glmcot.system import build_system

        runtime.system = build_system(system_config(dataclasses.replace(runtime.config, graphs={}),
                                                    runtime.scripted_by_qid), engine=runtime.engine)
        if runtime.backend is None:
            runtime.backend = runtime.system.model
        runtime.agent_factory = agent_factory(runtime.system, runtime.config)
    return runtime.system


def add_graph(runtime: Runtime, name: str, path: Path) -> dict[str, Any]:
    """Opens the store at `path` (its agents' context and backend) and serves it as `name`."""
    from glmcot.system import SetupError

    if name in runtime.graphs:
        raise GraphAdminError(f"graph {name!r} is already served", 409)
    try:
        system = _ensure_system(runtime)
        context = system.open_context(path)
    except SetupError as error:
        raise GraphAdminError(str(error)) from None
    except (OSError, ValueError) as error:
        raise GraphAdminError(f"cannot open {path}: {error}") from None
    try:
        backend = system.graph_backend(context) if runtime.config.scripted is not None else None
    except ValueError as error:
        context.close()
        raise GraphAdminError(str(error)) from None
    with _graph_lock(name):
        if name in runtime.graphs:
            context.close()
            raise GraphAdminError(f"graph {name!r} is already served", 409)
        if backend is not None:
            runtime.graph_backends[name] = backend
        elif system.model is not None:
            runtime.graph_backends[name] = system.model
        runtime.config.graphs[name] = Path(path)
        runtime.graphs[name] = GraphHandle(name=name, path=Path(path), graph=context.graph,
                                           retriever=context.retrieval, context=context, backend=backend)
    log.info("graph %s added from %s", name, path)
    return {"name": name, "path": str(path), "num_nodes": context.graph.num_nodes,
            "num_edges": context.graph.num_edges}


def remove_graph(runtime: Runtime, name: str) -> None:
    with _graph_lock(name):
        handle = runtime.graphs.pop(name, None)
        runtime.config.graphs.pop(name, None)
        runtime.graph_backends.pop(name, None)
    if handle is not None and handle.context is not None:
        close_when_idle(runtime, handle.context)
    log.info("graph %s removed", name)


def close_when_idle(runtime: Runtime, context: Any) -> None:
    from glmcot.serve.updates import _close_when_idle

    _close_when_idle(runtime, context, timeout_s=max(runtime.config.timeout_s, 60.0))


def store_version(graph_dir: Path) -> int | None:
    from glmcot.graph.errors import GraphFormatError
    from glmcot.graph.updates.versions import VersionInfo

    try:
        return VersionInfo.read(Path(graph_dir)).version
    except (OSError, GraphFormatError):
        return None


def reopen(runtime: Runtime, name: str, seen_context: int | None = None) -> bool:
    """Opens the store's committed version for `name` and swaps it in; False if there is nothing
    to do (the graph is gone, or its context is no longer the one seen: swapped meanwhile)."""
    with _graph_lock(name):
        handle = runtime.graphs.get(name)
        if handle is None or handle.context is None or runtime.system is None:
            return False
        if seen_context is not None and id(handle.context) != seen_context:
            return False
        old = handle.context
        new = runtime.system.open_context(old.graph_dir, domain=old.domain)
        backend = handle.backend
        if runtime.config.scripted is not None and name in runtime.graph_backends:
            backend = runtime.graph_backends[name] = runtime.system.graph_backend(new)
        runtime.graphs[name] = dataclasses.replace(handle, context=new, graph=new.graph, retriever=new.retrieval,
                                                   backend=backend)
    close_when_idle(runtime, old)
    return True


class GraphWatcher:
    """Polls each served store's committed version every `interval_s` seconds and reopens a
    graph whose version another process changed. A swap done here (an update, an admin add)
    is seen as a new context and only recorded."""

    def __init__(self, runtime: Runtime, interval_s: float) -> None:
        self.runtime = runtime
        self.interval_s = interval_s
        self.seen: dict[str, tuple[int, int | None]] = {}   # name -> (id of its context, version)
        self.reopened = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="glmcot-graph-watch", daemon=True)

    def start(self) -> "GraphWatcher":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def check(self) -> None:
        for name, handle in list(self.runtime.graphs.items()):
            context = handle.context
            if context is None:
                continue
            version = store_version(context.graph_dir)
            known = self.seen.get(name)
            if known is None or known[0] != id(context):
                self.seen[name] = (id(context), version)
                continue
            if version is not None and version != known[1]:
                try:
                    if reopen(self.runtime, name, seen_context=known[0]):
                        self.reopened += 1
                        log.info("graph %s: store version %s committed elsewhere; reopened", name, version)
                except Exception as error:   # a half-written store: try again next round
                    log.warning("graph %s: cannot reopen version %s yet: %s", name, version, error)
        for name in set(self.seen) - set(self.runtime.graphs):
            self.seen.pop(name, None)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.check()
            except Exception:   # never let the watcher die
                log.exception("graph watcher")
