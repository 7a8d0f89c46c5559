"""What the server runs on: the engine, the LLM backend, the graphs and the agents.

Built once at start-up from a `ServeConfig`; owned by the app (``app.state.serve.runtime``) and
closed on shutdown; `glmcot.serve.startup.build_runtime` builds one.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from glmcot.serve import errors
from glmcot.serve.config import ServeConfig
from glmcot.serve.engine_bridge import EngineBridge
from glmcot.data.questions import QuestionRecord, read_questions
from glmcot.serve.metrics import flatten_stats


def _normalize(question: str) -> str:
    return " ".join(question.split())


def load_scripted(path: Path) -> tuple[dict[str, QuestionRecord], dict[str, QuestionRecord]]:
    """The scripted policy's questions file: records by qid and by (whitespace-normalized) text."""
    by_qid: dict[str, QuestionRecord] = {}
    by_text: dict[str, QuestionRecord] = {}
    for record in read_questions(path):
        by_qid[record.qid] = record
        by_text.setdefault(_normalize(record.question), record)
    return by_qid, by_text


@dataclass
class GraphHandle:
    name: str
    path: Path
    graph: Any
    retriever: Any = None     # the RetrieveNode service (its cache is reported in /metrics)
    context: Any = None       # the agents' AgentContext for this graph
    backend: Any = None       # this graph's own LLM backend (the scripted policy over this version), if any


@dataclass
class Runtime:
    """The live parts. Every field may be absent except the config (e.g. no engine when the
    backend is an upstream URL)."""

    config: ServeConfig
    engine: Any = None
    backend: Any = None
    graphs: dict[str, GraphHandle] = field(default_factory=dict)
    scripted_by_qid: dict[str, QuestionRecord] = field(default_factory=dict)
    scripted_by_text: dict[str, QuestionRecord] = field(default_factory=dict)
    graph_backends: dict[str, Any] = field(default_factory=dict)
    agent_factory: Callable[..., Any] | None = None
    system: Any = None        # the glmcot.system.System the graphs' parts were built by (graph updates reopen through it)
    pool: concurrent.futures.ThreadPoolExecutor | None = None
    owns_engine: bool = True
    _closed: bool = False

    def __post_init__(self) -> None:
        self.bridge = EngineBridge(self.engine) if self.engine is not None else None
        if self.pool is None:
            self.pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=self.config.max_concurrency, thread_name_prefix="glmcot-ask")
        self._cancel_flags: dict[concurrent.futures.Future, threading.Event] = {}

    # --- graphs and questions ----------------------------------------------------------------

    def graph_names(self) -> list[str]:
        return sorted(self.graphs)

    def graph_sources(self) -> dict[str, str]:
        """Each graph served from a database: 'ok', or why it cannot be reached now (one cheap query)."""
        from glmcot.graph.graph_source import SourceUnavailable

        states = {}
        for name in self.graph_names():
            context = self.graphs[name].context
            if context is None or not getattr(context, "is_live", False):
                continue
            try:
                context.source.version()
                states[name] = "ok"
            except SourceUnavailable as error:
                states[name] = f"unreachable: {error}"
        return states

    def graph_infos(self) -> list[dict[str, Any]]:
        infos = []
        for name in self.graph_names():
            graph = self.graphs[name].graph
            if not hasattr(graph, "node_types") and hasattr(graph, "schema"):  # a graph database
                schema = graph.schema()
                infos.append({"name": name, "num_nodes": sum(entry.count for entry in schema.types),
                              "num_edges": None, "node_types": schema.node_types})
                continue
            infos.append({"name": name, "num_nodes": getattr(graph, "num_nodes", None),
                          "num_edges": getattr(graph, "num_edges", None),
                          "node_types": list(getattr(graph, "node_types", []) or [])})
        return infos

    def resolve_qid(self, question: str, qid: str | None) -> str | None:
        """Under the scripted policy a question must be one of the loaded records."""
        if self.config.scripted is None:
            return qid
        if qid is not None:
            record = self.scripted_by_qid.get(qid)
            if record is None:
                raise errors.not_found(f"scripted policy: no question with qid {qid!r}")
            if _normalize(record.question) != _normalize(question):
                raise errors.APIError(400, f"scripted policy: qid {qid!r} is a different "
                                      "question", code="qid_mismatch")
            return qid
        record = self.scripted_by_text.get(_normalize(question))
        if record is None:
            raise errors.APIError(400, "scripted policy: this question is not in the server's "
                                  "questions file, so there is no plan to follow",
                                  code="unknown_scripted_question")
        return record.qid

    def start_question(self, graph: str, method: str, question: str, qid: str | None,
                       options: Any, on_event: Callable[[Any], None] | None
                       ) -> tuple[concurrent.futures.Future, str]:
        """Runs one question in the worker pool. Returns its future and how trace events reach
        `on_event`: "live" (every step), "llm-live" (each LLM call as it finishes; the other
        steps only in the result's trace) or "replay" (all in the result's trace)."""
        if self.agent_factory is None:
            raise errors.APIError(501, "this server has no agents (glmcot.agents is not "
                                  "available)", "server_error", "no_agents")
        if self._closed:
            raise errors.unavailable()
        cancel = threading.Event()
        agent, mode = self.agent_factory(self.graphs[graph], method, options, on_event, cancel)
        future = self.pool.submit(agent.answer, question, qid)
        self._cancel_flags[future] = cancel
        future.add_done_callback(lambda f: self._cancel_flags.pop(f, None))
        return future, mode if on_event is not None else "replay"

    def cancel(self, future: concurrent.futures.Future) -> None:
        """Asks a running question to stop at its next step (agents check the flag)."""
        flag = self._cancel_flags.get(future)
        if flag is not None:
            flag.set()
        future.cancel()   # if it has not started yet

    # --- metrics and lifetime ----------------------------------------------------------------

    def collectors(self) -> list[Callable[[], list[str]]]:
        out: list[Callable[[], list[str]]] = []
        if self.engine is not None and hasattr(self.engine, "stats"):
            out.append(lambda: flatten_stats("glmcot_engine", self.engine.stats(),
                                             "Native engine statistics (engine.stats())."))
        def services() -> list[tuple[str, Any]]:
            # Read at every scrape: a graph update swaps in a new service (graph/updates.py),
            # which carries the counters on.
            return [(handle.name, handle.retriever) for handle in list(self.graphs.values())
                    if hasattr(handle.retriever, "stats")]

        if services():
            def read(service: Any) -> dict:
                stats = service.stats
                return dict(stats() if callable(stats) else stats)

            out.append(lambda: flatten_stats(
                "glmcot_retrieve_node",
                [((("graph", name),), read(service)) for name, service in services()],
                "RetrieveNode service: lookups, cache hits, searches, prefetches."))
        return out

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for flag in list(self._cancel_flags.values()):
            flag.set()
        self.pool.shutdown(wait=False, cancel_futures=True)
        closers = [getattr(handle.context, "close", None) for handle in self.graphs.values()]
        closers += [getattr(backend, "close", None) for backend in self.graph_backends.values()
                    if backend is not self.backend]
        for closer in (*closers, getattr(self.backend, "close", None),
                       getattr(self.engine, "shutdown", None) if self.owns_engine else None,
                       getattr(self.engine, "close", None) if self.owns_engine else None):
            if closer is not None:
                try:
                    closer()
                except Exception:
                    pass
