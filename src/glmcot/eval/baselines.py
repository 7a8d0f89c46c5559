"""Table 4's accuracy baselines, one LLM call each: ``base`` (the question alone), ``text-rag``
(top-k node texts retrieved for the question) and ``graph-rag`` (the top-1 node's 1-2 hop
ego-graph, linearised and cut to a token budget, as Graph-CoT's RAG baseline). Prompts are
package data files (prompts/*.txt)."""

from __future__ import annotations

import time
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any, Callable

from glmcot.agents.trace import LLMCall
from glmcot.graph.errors import GraphToolError
from glmcot.graph.graph_source import as_source, require
from glmcot.llm.replay import prompt_hash

if TYPE_CHECKING:
    from glmcot.agents.records import QuestionResult

NEIGHBOURS_PER_RELATION = 20  # Graph-CoT's RAG baseline cap (grbench.md §5)
FEATURE_CHARS = 300           # long texts (abstracts, opinions) are cut so many nodes fit


@lru_cache(maxsize=None)
def prompt_text(name: str) -> str:
    return resources.files("glmcot.eval").joinpath(f"prompts/{name}.txt").read_text(encoding="utf-8")


def _value_text(value: Any) -> str:
    if isinstance(value, list):
        text = ", ".join(str(v) for v in value)
    else:
        text = str(value)
    text = " ".join(text.split())
    return text if len(text) <= FEATURE_CHARS else text[: FEATURE_CHARS - 3] + "..."


def node_label(graph: Any, node_id: str) -> str:
    """The node's retrieval text (title/name/...), or its id. `graph`: a GraphSource (or a store)."""
    source = as_source(graph)
    ref = source.resolve(node_id)
    if ref is None:
        return node_id
    try:
        key = source.schema().type(source.node_type(ref)).text_key
        value = source.feature(ref, key) if key else None
    except GraphToolError:  # a feature may be absent on some nodes
        return node_id
    return _value_text(value) if value not in (None, "") else node_id


def node_record(graph: Any, node_id: str) -> str:
    """`type id: feature: value. ...` with every feature of the node, each cut to FEATURE_CHARS."""
    source = as_source(graph)
    ref = require(source, node_id)
    parts = [f"{source.node_type(ref)} {node_id}:"]
    for name, value in source.features(ref).items():
        if value in (None, "", []):
            continue
        parts.append(f"{name}: {_value_text(value)}.")
    return " ".join(parts)


def ego_graph_lines(graph: Any, root: str, hops: int) -> list[str]:
    """Breadth-first linearisation: the root's record, then per node and relation its neighbours
    (at most NEIGHBOURS_PER_RELATION), each once, hop by hop."""
    source = as_source(graph)
    schema = source.schema()
    lines = [node_record(source, root)]
    seen = {root}
    frontier = [root]
    for _ in range(max(0, hops)):
        next_frontier: list[str] = []
        for node in frontier:
            ref = require(source, node)
            for relation in schema.type(source.node_type(ref)).relations:
                try:
                    neighbours = source.neighbours(ref, relation).ids
                except GraphToolError:
                    continue
                if not neighbours:
                    continue
                shown = neighbours[:NEIGHBOURS_PER_RELATION]
                known = {n for n in shown if source.resolve(n) is not None}
                names = [f"{n} ({node_label(source, n)})" if n in known else n for n in shown]
                more = f" and {len(neighbours) - len(shown)} more" if len(neighbours) > len(shown) else ""
                lines.append(f"{node} --{relation}--> {'; '.join(names)}{more}")
                for n in shown:
                    if n not in seen and n in known:
                        seen.add(n)
                        next_frontier.append(n)
        frontier = next_frontier
    return lines


def truncate_lines(lines: list[str], budget: int, count: Callable[[str], int]) -> str:
    """Keeps whole lines while they fit the token budget (the first line is cut to fit if needed)."""
    kept: list[str] = []
    used = 0
    for line in lines:
        cost = count(line + "\n")
        if used + cost > budget:
            if not kept:  # the root alone is too long: cut it by characters
                ratio = budget / max(1, cost)
                kept.append(line[: max(1, int(len(line) * ratio))])
            break
        kept.append(line)
        used += cost
    return "\n".join(kept)


class Baseline:
    """One baseline method over a graph (None for ``base``) and an LLM backend."""

    def __init__(self, method: str, graph: Any, backend: Any, retrieve: Callable[[str, int], list[str]] | None,
                 top_k: int = 5, hops: int = 2, token_budget: int = 2300,
                 count_tokens: Callable[[str], int] | None = None, max_tokens: int = 128):
        if method not in ("base", "text-rag", "graph-rag"):
            raise ValueError(f"unknown baseline {method!r}")
        if method != "base" and (graph is None or retrieve is None):
            raise ValueError(f"{method} needs a graph with a node index")
        self.method, self.graph, self.backend, self.retrieve = method, graph, backend, retrieve
        self.top_k, self.hops, self.token_budget, self.max_tokens = top_k, hops, token_budget, max_tokens
        if count_tokens is None:
            from glmcot.llm.tokens import qwen_counter

            count_tokens = qwen_counter().count
        self.count_tokens = count_tokens

    def context(self, question: str) -> tuple[str, float]:
        start = time.perf_counter()
        if self.method == "base":
            return "", 0.0
        if self.method == "text-rag":
            ids = self.retrieve(question, self.top_k)
            lines = [node_record(self.graph, node_id) for node_id in ids]
        else:
            ids = self.retrieve(question, 1)
            lines = ego_graph_lines(self.graph, ids[0], self.hops) if ids else []
        text = truncate_lines(lines, self.token_budget, self.count_tokens)
        return text, time.perf_counter() - start

    def prompt(self, question: str, context: str) -> str:
        template = prompt_text({"base": "base", "text-rag": "text_rag", "graph-rag": "graph_rag"}[self.method])
        return (template.replace("{question}", question.strip()).replace("{context}", context)
                .replace("{hops}", str(self.hops)))

    def answer(self, question: str, qid: str | None = None) -> QuestionResult:
        from glmcot.agents.records import QuestionResult
        from glmcot.llm import LLMRequest, Segment

        start = time.perf_counter()
        context, retrieval_s = self.context(question)
        request = LLMRequest(
            segments=[Segment(text=prompt_text("baseline_system").strip() + "\n\n", level=1, key=None),
                      Segment(text=self.prompt(question, context), level=4, key=None)],
            max_tokens=self.max_tokens, temperature=0.0, stop=["\n"],
            metadata={"qid": qid, "agent": f"baseline-{self.method}", "step": 0, "attempt": 0},
        )
        response = self.backend.complete(request)
        answer = response.text.strip()
        return QuestionResult(
            qid=qid, question=question, answer=answer, method=self.method, llm_calls=1, failure=None if answer else "unexpected_output",
            prompt_tokens=response.prompt_tokens, cached_tokens=response.cached_tokens,
            output_tokens=response.output_tokens, latency_s=time.perf_counter() - start,
            llm_time_s=response.latency_s, retrieval_time_s=retrieval_s,
            trace=[LLMCall(agent=f"baseline-{self.method}", metadata={**request.metadata, "context_chars": len(context)},
                           session="", prompt_sha=prompt_hash(request.prompt),
                           segments=[{"level": int(s.level), "key": s.key, "chars": len(s.text)} for s in request.segments],
                           response=response.to_dict())],
        )
