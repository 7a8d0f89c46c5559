"""Running many questions: a thread pool of agents over one shared context and backend, one JSON
line of trace per question, resumable.

    context = AgentContext("data/dblp")              # graph, RetrieveNode service, sandbox pool
    backend = ScriptedBackend("data/dblp/questions.jsonl", code_runner=context.run_code)  # or any LLMBackend
    results = run_questions(records, method="glm", backend=backend, context=context,
                            concurrency=8, traces="runs/glm.jsonl")
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable

from glmcot.agents.config import AgentConfig
from glmcot.agents.context import AgentContext
from glmcot.agents.records import QuestionResult
from glmcot.data.questions import QuestionRecord
from glmcot.llm import LLMBackend
from glmcot.runs import Storage, run_resumable

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

    With `traces`, each finished question is appended as one JSON line (`glmcot.runs`: fsynced, so
    a crash loses at most the questions in flight); with `resume`, qids already in that file are
    not run again and their stored results are returned in place (only rows recorded for the same
    method, graph, backend and question text: anything else raises `glmcot.runs.ResumeMismatch`).
    Results come back in input order.
    `on_result` is called in the calling thread for each stored and each new result, e.g. to
    advance a progress bar.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    records = [_qid_and_question(position, record) for position, record in enumerate(questions)]
    agent = make_agent(method, backend, context, config)
    # a traces file resumes only what was answered on this graph by this backend, for these questions
    settings = {"method": method, "graph": str(Path(context.graph_dir).resolve()),
                "backend": str(getattr(backend, "label", type(backend).__name__))}
    storage = Storage(encode=lambda record, result: result.to_dict(), decode=QuestionResult.from_dict,
                      belongs=lambda row: row.get("method", method) == method, settings=settings,
                      stale=lambda record, row: None if row.get("question") == record[1] else "the question text differs",
                      on_mismatch="pass resume=False to replace them, or write the traces to another file")
    outcome = run_resumable(records, lambda record: agent.answer(record[1], qid=record[0]),
                            item_key=lambda record: record[0], storage=storage, path=traces, name=method,
                            concurrency=concurrency, resume=resume, on_stored=on_result, on_done=on_result)
    return outcome.results
