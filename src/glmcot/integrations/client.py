"""One graph, reached over HTTP (a running `glmcot serve`) or in this process (a built `System`):
what the LangChain and LlamaIndex adapters call. Both give the same records:

- `search(query, k)` -> `GraphDocument`s: vertex chunks with node ids and scores;
- `ask(question)` -> `GraphAnswer`: the answer, the agents' steps, the chunks they read, usage.

Each has an async twin (`asearch`, `aask`) that never blocks the event loop.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import quote

from glmcot.agents.trace import event_from_dict
from glmcot.serve.graph_models import steps_of
from glmcot.system.graph_calls import GraphCalls, touched_node_ids

MAX_CHUNKS = 20   # vertex chunks reported with an answer
TOOL_DESCRIPTION = ("Answers a question over the knowledge graph {graph!r} with glmcot's {method} agents, which "
                    "look nodes up and follow relations; returns the answer and how it was found.")


class GlmcotError(RuntimeError):
    """The server refused or failed a request; `status` is its HTTP status (0: no answer)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class GraphDocument:
    """A node's vertex chunk: the text the agents read for it."""

    node_id: str
    node_type: str
    text: str
    score: float | None = None
    graph: str = ""


@dataclass
class GraphAnswer:
    graph: str
    method: str
    question: str
    answer: str
    failure: str | None = None
    failure_detail: str | None = None
    steps: list[str] = field(default_factory=list)
    chunks: list[GraphDocument] = field(default_factory=list)
    llm_calls: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0

    def __str__(self) -> str:
        """What a calling agent reads: the answer (or why there is none), then the steps."""
        head = self.answer if not self.failure else f"(no answer: {self.failure})"
        if not self.steps:
            return head
        return head + "\n\nHow glmcot found it:\n" + "\n".join(f"- {step}" for step in self.steps)


class Graph(Protocol):
    name: str
    method: str

    def search(self, query: str, k: int = 4) -> list[GraphDocument]: ...
    async def asearch(self, query: str, k: int = 4) -> list[GraphDocument]: ...
    def ask(self, question: str) -> GraphAnswer: ...
    async def aask(self, question: str) -> GraphAnswer: ...


class HttpGraph:
    """A graph on a running `glmcot serve` at `url` (e.g. http://127.0.0.1:8000)."""

    def __init__(self, url: str, graph: str, *, api_key: str | None = None, method: str = "glm",
                 timeout_s: float = 300.0) -> None:
        self.url = url.rstrip("/")
        self.name = graph
        self.method = method
        self.timeout_s = timeout_s
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def _path(self, tail: str) -> str:
        return f"/v1/graphs/{quote(self.name, safe='')}/{tail}"

    @staticmethod
    def _check(response: Any) -> Any:
        if response.status_code >= 400:
            try:
                message = response.json()["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = response.text[:500]
            raise GlmcotError(f"glmcot server: HTTP {response.status_code}: {message}", response.status_code)
        return response.json()

    def _documents(self, data: dict) -> list[GraphDocument]:
        return [GraphDocument(graph=self.name, **doc) for doc in data["documents"]]

    def _answer(self, data: dict, chunks: list[GraphDocument]) -> GraphAnswer:
        trace = [event_from_dict(event) for event in data.get("trace") or []]
        usage = data.get("usage") or {}
        return GraphAnswer(graph=data["graph"], method=data["method"], question=data["question"], answer=data["answer"],
                           failure=data.get("failure"), failure_detail=data.get("failure_detail"),
                           steps=steps_of(trace), chunks=chunks, llm_calls=usage.get("llm_calls", 0),
                           prompt_tokens=usage.get("prompt_tokens", 0), output_tokens=usage.get("output_tokens", 0))

    def _ask_body(self, question: str) -> dict:
        return {"question": question, "graph": self.name, "method": self.method, "options": {"include_trace": True}}

    def search(self, query: str, k: int = 4) -> list[GraphDocument]:
        import httpx

        with httpx.Client(base_url=self.url, headers=self.headers, timeout=self.timeout_s) as client:
            return self._documents(self._check(client.post(self._path("search"), json={"query": query, "k": k})))

    async def asearch(self, query: str, k: int = 4) -> list[GraphDocument]:
        import httpx

        async with httpx.AsyncClient(base_url=self.url, headers=self.headers, timeout=self.timeout_s) as client:
            return self._documents(self._check(await client.post(self._path("search"), json={"query": query, "k": k})))

    def ask(self, question: str) -> GraphAnswer:
        import httpx

        with httpx.Client(base_url=self.url, headers=self.headers, timeout=self.timeout_s) as client:
            data = self._check(client.post("/v1/ask", json=self._ask_body(question)))
            ids = touched_node_ids([event_from_dict(event) for event in data.get("trace") or []], MAX_CHUNKS)
            chunks = [GraphDocument(graph=self.name, **self._check(client.get(self._path("nodes/" + quote(i, safe="")))))
                      for i in ids]
        return self._answer(data, chunks)

    async def aask(self, question: str) -> GraphAnswer:
        import httpx

        async with httpx.AsyncClient(base_url=self.url, headers=self.headers, timeout=self.timeout_s) as client:
            data = self._check(await client.post("/v1/ask", json=self._ask_body(question)))
            ids = touched_node_ids([event_from_dict(event) for event in data.get("trace") or []], MAX_CHUNKS)
            chunks = [GraphDocument(graph=self.name,
                                    **self._check(await client.get(self._path("nodes/" + quote(i, safe="")))))
                      for i in ids]
        return self._answer(data, chunks)


class LocalGraph:
    """A graph of a `System` built in this process (glmcot.system.build_system)."""

    def __init__(self, system: Any, graph: str | None = None, *, method: str = "glm") -> None:
        self.system = system
        self.context = system.context(graph)
        if self.context is None:
            raise ValueError("the system has no graph")
        self.name = graph or next(iter(system.contexts))
        self.method = method
        self._qids: dict[str, str] = {}
        if system.config.scripted:   # the scripted policy follows a question's gold plan: find it by text
            from glmcot.agents.scripted import load_questions

            for qid, record in load_questions(system.config.scripted_questions).items():
                self._qids.setdefault(" ".join(str(record["question"]).split()), qid)

    def _qid(self, question: str) -> str | None:
        return self._qids.get(" ".join(question.split()))

    def search(self, query: str, k: int = 4) -> list[GraphDocument]:
        return [GraphDocument(graph=self.name, node_id=chunk.node_id, node_type=chunk.node_type, text=chunk.text,
                              score=chunk.score) for chunk in GraphCalls(self.context).search(query, k)]

    async def asearch(self, query: str, k: int = 4) -> list[GraphDocument]:
        return await asyncio.to_thread(self.search, query, k)

    def _answer(self, result: Any) -> GraphAnswer:
        calls = GraphCalls(self.context)
        chunks = [GraphDocument(graph=self.name, node_id=c.node_id, node_type=c.node_type, text=c.text)
                  for c in calls.chunks_used(result.trace, MAX_CHUNKS)]
        return GraphAnswer(graph=self.name, method=self.method, question=result.question, answer=result.answer,
                           failure=result.failure, failure_detail=result.failure_detail, steps=steps_of(result.trace),
                           chunks=chunks, llm_calls=result.llm_calls, prompt_tokens=result.prompt_tokens,
                           output_tokens=result.output_tokens)

    def ask(self, question: str) -> GraphAnswer:
        return self._answer(self.system.agent(self.method, self.name).answer(question, self._qid(question)))

    async def aask(self, question: str) -> GraphAnswer:
        return self._answer(await self.system.agent(self.method, self.name).aanswer(question, self._qid(question)))
