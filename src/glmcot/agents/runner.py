"""Running many questions: a thread pool of agents over one shared context and backend, one JSON
line of trace per question, resumable.

    context = AgentContext("data/dblp")              # graph, RetrieveNode service, sandbox pool
    backend = ScriptedBackend("data/dblp/questions.jsonl", code_runner=context.run_code)  # or any LLMBackend
    results = run_questions(records, method="glm", backend=backend, context=context,
                            concurrency=8, traces="runs/glm.jsonl")
"""

from __future__ import annotations

import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable, Iterable

from glmcot.agents.config import AgentConfig
from glmcot.agents.context import AgentContext
from glmcot.data.questions import QuestionRecord
from glmcot.agents.records import QuestionResult
from glmcot.llm import LLMBackend

METHODS = ("glm", "graphcot", "graphcot-repaired")  # graphcot: faithful to the original


def make_agent(method: str, backend: LLMBackend, context: AgentContext, config: AgentConfig | None = None):
    if method == "glm":
        from glmcot.agents.glm import GLMAgent

        return GLMAgent(backend, context, config)
    if method == "graphcot":
        from glmcot.agents.graphcot_faithful import FaithfulGraphCoTAgent

        return FaithfulGraphCoTAgent(backend, context, config)
    if method == "graphcot-repaired":
        from glmcot.agents.graphcot import GraphCoTAgent

        return GraphCoTAgent(backend, context, config)
    raise ValueError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")


def read_done(path: Path) -> dict[str, dict]:
    """qid -> record of a traces file, ignoring a torn last line (a crash mid-write)."""
    done: dict[str, dict] = {}
    if not path.exists():
        return done
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and record.get("qid") is not None:
                done[str(record["qid"])] = record
    return done


def repair_tail(path: Path) -> None:
    """Cuts a torn last line (a crash mid-write) so appended lines start on a line of their own."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as handle:
        handle.seek(-1, os.SEEK_END)
        if handle.read(1) == b"\n":
            return
        size = handle.seek(0, os.SEEK_END)
        position = size
        block = 65536
        while position > 0:
            start = max(0, position - block)
            handle.seek(start)
            chunk = handle.read(position - start)
            cut = chunk.rfind(b"\n")
            if cut != -1:
                handle.truncate(start + cut + 1)
                return
            position = start
        handle.truncate(0)


def _qid_and_question(position: int, record: Any) -> tuple[str | None, str]:
    """A QuestionRecord's (or a {"qid", "question"} mapping's) qid and text."""
    if isinstance(record, QuestionRecord):
        return record.qid, record.question
    if not isinstance(record, dict) or "question" not in record:
        raise ValueError(f"question record {position} has no 'question' field")
    return (str(record["qid"]) if record.get("qid") is not None else None), str(record["question"])


def run_questions(
    questions: Iterable[QuestionRecord | dict],
    *,
    method: str = "glm",
    backend: LLMBackend,
    context: AgentContext,
    config: AgentConfig | None = None,
    concurrency: int = 4,
    traces: str | Path | None = None,
    resume: bool = True,
    on_result: Callable[[QuestionResult], None] | None = None,
) -> list[QuestionResult]:
    """Answers every record (a QuestionRecord, or {"qid", "question", ...}) with `method`, `concurrency` at a time.

    With `traces`, each finished question is appended as one JSON line (flushed and fsynced, so a
    crash loses at most the questions in flight); with `resume`, qids already in that file are not
    run again and their stored results are returned in place. Results come back in input order.
    `on_result` is called (from worker threads, serialised) as each question finishes, e.g. to
    advance a progress bar.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    records = [_qid_and_question(position, record) for position, record in enumerate(questions)]
    agent = make_agent(method, backend, context, config)
    path = Path(traces) if traces is not None else None
    done: dict[str, dict] = {}
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if resume:
            repair_tail(path)
            done = {qid: rec for qid, rec in read_done(path).items() if rec.get("method", method) == method}
        elif path.exists():
            path.unlink()
    lock = threading.Lock()
    handle = open(path, "a", encoding="utf-8") if path is not None else None
    results: list[QuestionResult | None] = [None] * len(records)

    def work(position: int) -> None:
        qid, question = records[position]
        if qid is not None and qid in done:
            result = QuestionResult.from_dict(done[qid])
        else:
            result = agent.answer(question, qid=qid)
            if handle is not None:
                line = json.dumps(result.to_dict(), ensure_ascii=False) + "\n"
                with lock:
                    handle.write(line)
                    handle.flush()
                    os.fsync(handle.fileno())
        results[position] = result
        if on_result is not None:
            with lock:
                on_result(result)

    try:
        with ThreadPoolExecutor(max_workers=max(1, int(concurrency)), thread_name_prefix=f"{method}-q") as pool:
            futures = [pool.submit(work, position) for position in range(len(records))]
            for future in as_completed(futures):
                future.result()  # agents turn every question error into a result; this re-raises bugs
    finally:
        if handle is not None:
            handle.close()
    return [result for result in results if result is not None]


def summarise(results: list[QuestionResult]) -> dict[str, Any]:
    """Per-run totals and means (tokens and calls per question, failures by category)."""
    count = len(results)
    failures: dict[str, int] = {}
    for result in results:
        if result.failure:
            failures[result.failure] = failures.get(result.failure, 0) + 1
    def mean(values):
        values = list(values)
        return sum(values) / len(values) if values else 0.0
    return {
        "questions": count,
        "tokens_per_question": mean(r.prompt_tokens + r.output_tokens for r in results),
        "prompt_tokens_per_question": mean(r.prompt_tokens for r in results),
        "cached_tokens_per_question": mean(r.cached_tokens for r in results),
        "calls_per_question": mean(r.llm_calls for r in results),
        "tokens_per_call": (sum(r.prompt_tokens + r.output_tokens for r in results) / max(1, sum(r.llm_calls for r in results))),
        "latency_s": mean(r.latency_s for r in results),
        "retrieval_time_s": mean(r.retrieval_time_s for r in results),
        "failures": failures,
    }
