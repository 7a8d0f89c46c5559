"""What agents share across questions: the graph, the RetrieveNode service, the sandbox pool and
the rendered prompts. One context per run; thread-safe."""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path
from typing import Any

from glmcot.agents.prompts import PromptSet, load_prompts
from glmcot.agents.retrieval import LexicalRetriever, RetrievalService
from glmcot.agents.sandbox import SandboxExecutor, SandboxLimits
from glmcot.graph.storage.store import store_directory


def dataset_domain(graph_dir: Path) -> str | None:
    for candidate in (graph_dir / "meta.json", graph_dir.parent / "meta.json"):
        if candidate.is_file():
            try:
                return json.loads(candidate.read_text(encoding="utf-8")).get("domain")
            except (OSError, json.JSONDecodeError):
                return None
    return None


def open_retriever(spec: Any, graph_dir: Path, graph) -> Any:
    """`spec`: an object with retrieve(text), "lexical", "embedding" or "auto" (the graph's
    embedding index when one was built, else lexical matching)."""
    if spec is None:
        return None
    if not isinstance(spec, str):
        return spec
    if spec == "lexical":
        return LexicalRetriever(graph)
    if spec in ("auto", "embedding"):
        from glmcot.graph.errors import RetrievalUnavailable
        from glmcot.graph.index.retrieval import NodeRetriever

        try:
            return NodeRetriever.open(graph)
        except RetrievalUnavailable:
            if spec == "embedding":
                raise
        return LexicalRetriever(graph)
    raise ValueError(f"unknown retriever {spec!r}: expected auto, embedding, lexical or an object")


def open_source_retriever(source, required: bool = False) -> Any:
    """RetrieveNode over a live source: glmcot's embedding index built from the source's texts,
    else (no embedder installed) lexical matching of the same texts."""
    from glmcot.graph.index.retrieval import source_retriever

    try:
        return source_retriever(source)
    except (ImportError, OSError) as error:
        if required:
            raise
        import logging

        logging.getLogger(__name__).warning("no embedder for %s (%s): RetrieveNode matches node texts", source.location, error)
        return "lexical"


class AgentContext:
    """`graph_dir`: any location `glmcot.graph.opener.open_source` takes (a store folder, a dataset
    folder holding one, or a database URL). `source` is the GraphSource every consumer reads;
    `graph` is the store's own `Graph` where the location is a store (its node index, prompts), else
    the source."""

    def __init__(
        self,
        graph_dir: str | Path,
        *,
        retriever: Any = "auto",
        workers: int = 2,
        limits: SandboxLimits | None = None,
        domain: str | None = None,
        retrieval_threads: int = 2,
    ):
        from glmcot.graph.tools.chunks import chunk_key
        from glmcot.graph.graph_source import store_of
        from glmcot.graph.opener import canonical_location, is_database, open_source

        from glmcot.graph.updates.versions import pin_version, unpin, version_of

        live = is_database(graph_dir)
        self._unpin = unpin
        self._pin = None
        self.version = None  # the store version this context serves (None for a live source)
        if live:
            # a database is one graph for every replica; its version token changes with each update
            self.graph_dir = Path(canonical_location(graph_dir))
            self.location = canonical_location(graph_dir)
            self.source = open_source(self.location)
        else:
            self.graph_dir = store_directory(graph_dir)
            self.location = str(self.graph_dir)
            # One version for everything this context serves: the sandbox workers (those started
            # after an update too) open exactly the version this graph is, and its files stay on
            # disk (a pin) until the context closes.
            for _ in range(5):
                self.source = open_source(self.graph_dir)
                self.version = version_of(store_of(self.source))
                self._pin = None
                if self.version.base == "." and self.version.delta is None:
                    break  # version 0's files are the store's own: never removed
                self._pin = pin_version(self.graph_dir, self.version)
                # An update that committed between the open and the pin may have removed the files.
                if (self.graph_dir / self.version.base).is_dir() and (
                        self.version.delta is None or (self.graph_dir / self.version.delta).is_file()):
                    break
                unpin(self._pin)
        try:
            store = store_of(self.source)
            self.graph = store if store is not None else self.source
            self.domain = domain or (self.source.schema().domain if live else dataset_domain(self.graph_dir))
            if live and retriever in ("auto", "embedding"):
                retriever = open_source_retriever(self.source, required=retriever == "embedding")
            self.retrieval = RetrievalService(open_retriever(retriever, self.graph_dir, self.graph), threads=retrieval_threads)
            if live:
                self.executor = SandboxExecutor(workers=workers, limits=limits, source=self.source)
            else:
                self.executor = SandboxExecutor(self.graph_dir, workers=workers, limits=limits,
                                                version=dataclasses.asdict(self.version))
        except BaseException:
            unpin(self._pin)
            self.source.close()
            raise
        self._chunk_key = chunk_key
        self._prompts: dict[tuple, PromptSet] = {}
        self._lock = threading.Lock()

    @property
    def is_live(self) -> bool:
        from glmcot.graph.graph_source import store_of

        return store_of(self.source) is None

    def chunk_key(self, node_id: str, text: str | None = None) -> str:
        """The KV reuse key of a node's vertex chunk; `text`: the chunk as the sandbox rendered it
        (a live source keys it by its digest, so a changed node never reuses old KV)."""
        return self._chunk_key(self.source, node_id, text=text)

    def prompts(self, domain: str | None = None, *, graphcot_examples: bool = True) -> PromptSet:
        key = (domain or self.domain, graphcot_examples)
        with self._lock:
            if key not in self._prompts:
                self._prompts[key] = load_prompts(key[0], self.graph, graphcot_examples=graphcot_examples)
            return self._prompts[key]

    def run_code(self, code: str) -> str:
        """Runs a snippet in the sandbox and returns what it printed ('' on error): the scripted
        policy's way to know what a GLM plan prints."""
        result = self.executor.run(code, resolve=self.retrieval.resolve)
        return result.output if result.ok else ""

    def close(self) -> None:
        self.executor.close()
        self.retrieval.close()
        self._unpin(self._pin)
        self._pin = None
        self.source.close()

    def __enter__(self) -> "AgentContext":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
