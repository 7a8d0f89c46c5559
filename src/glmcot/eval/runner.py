"""Evaluation runs: one JSON Lines file per method, one row per question (`glmcot.runs` appends
each as it finishes and skips, on a rerun, the questions already in the file).

Row format ``glmcot.eval/1``: Graph-CoT's ``{qid, question, model_answer, gt_answer}`` plus metrics
and costs (see docs/benchmarks.md)."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from glmcot.data.questions import QuestionRecord
from glmcot.eval.metrics import as_text, bootstrap_median, exact_match, exact_match_strict, rouge_l
from glmcot.runs import RunOutcome, Storage, run_resumable

ROW_FORMAT = "glmcot.eval/1"
FAILURES = ("unexpected_output", "retrieval_error", "code_error", "step_limit", "backend_error", "graph_source_error", "error")

AnswerFn = Callable[[QuestionRecord], Any]
JudgeFn = Callable[[QuestionRecord, str], "tuple[bool | None, str]"]


# ---- one question -> one row --------------------------------------------------------------------

def _get(result: Any, name: str, default: Any = None) -> Any:
    if isinstance(result, dict):
        return result.get(name, default)
    return getattr(result, name, default)


def make_row(method: str, question: QuestionRecord, result: Any, wall_s: float,
             error: str | None = None, failure: str = "error") -> dict[str, Any]:
    """Builds the result row from an agent's QuestionResult (or any object with its fields).
    `error`: why the question failed (an exception; else the result's failure detail);
    `failure`: the category when there is no result."""
    answer = as_text(_get(result, "answer")) if result is not None else ""
    if result is not None:
        failure = _get(result, "failure")
        if failure and error is None:   # the reason goes into the row, never just the category
            error = _get(result, "failure_detail") or failure
    row = {
        "format": ROW_FORMAT,
        "qid": question.qid,
        "question": question.question,
        "model_answer": answer,
        "gt_answer": question.answer,
        "method": method,
        "domain": question.domain,
        "level": question.level,
        "em": exact_match(answer, question.answer),  # normalised
        "em_exact": exact_match_strict(answer, question.answer),  # eval.py's exact string equality
        "rouge_l": round(rouge_l(answer, question.answer), 6),
        "judge": None,
        "judge_reply": None,
        "failure": failure,
        "error": error,
        "llm_calls": int(_get(result, "llm_calls", 0) or 0),
        "prompt_tokens": int(_get(result, "prompt_tokens", 0) or 0),
        "cached_tokens": int(_get(result, "cached_tokens", 0) or 0),
        "output_tokens": int(_get(result, "output_tokens", 0) or 0),
        "latency_s": float(_get(result, "latency_s", None) or wall_s),
        "llm_time_s": float(_get(result, "llm_time_s", 0.0) or 0.0),
        "retrieval_time_s": float(_get(result, "retrieval_time_s", 0.0) or 0.0),
    }
    return row


def result_rows(method: str, questions: Sequence[QuestionRecord], results: Sequence[Any]) -> list[dict[str, Any]]:
    """Rows for results that an agents run (`glmcot.agents.run_questions`) returned, one per question."""
    return [make_row(method, question, result, _get(result, "latency_s", 0.0)) for question, result in zip(questions, results)]


# Rows a resumed run answers again: the backend failed (now perhaps fixed) or the run crashed.
RETRY_ON_RESUME = ("backend_error", "error")


def run_method(method: str, questions: Sequence[QuestionRecord], answer_fn: AnswerFn, out_path: Path, *,
               concurrency: int = 4, judge_fn: JudgeFn | None = None, resume: bool = True,
               on_done: Callable[[dict[str, Any]], None] | None = None,
               on_start: Callable[[int], None] | None = None,
               retry_failed: Sequence[str] = RETRY_ON_RESUME) -> RunOutcome[dict[str, Any]]:
    """Answers the questions not yet in ``out_path`` with ``concurrency`` workers; the outcome's
    results are the rows, in question order. Rows whose failure is in ``retry_failed`` are answered
    again. ``on_start(done)`` is told how many were already done. Ctrl-C stops at once (questions
    in flight are dropped) and raises RunInterrupted; every row written before it is kept."""
    stop = threading.Event()

    def work(question: QuestionRecord) -> dict[str, Any]:
        start = time.perf_counter()
        failure = "error"
        try:
            result = answer_fn(question)
            error = None
        except Exception as exc:  # one bad question must not sink the run; the row records why
            from glmcot.llm.types import LLMError

            result, error = None, f"{type(exc).__name__}: {exc}"
            failure = "backend_error" if isinstance(exc, LLMError) else "error"
        row = make_row(method, question, result, time.perf_counter() - start, error, failure)
        if judge_fn is not None and not stop.is_set():
            try:
                row["judge"], row["judge_reply"] = judge_fn(question, row["model_answer"])
            except Exception as exc:
                row["judge_reply"] = f"judge failed: {type(exc).__name__}: {exc}"
        return row

    storage = Storage(encode=lambda question, row: row, decode=lambda row: row,
                      belongs=lambda row: row.get("method", method) == method,
                      retry=lambda row: row.get("failure") in retry_failed)
    try:
        return run_resumable(questions, work, item_key=lambda question: question.qid, storage=storage,
                             path=out_path, name=method, concurrency=concurrency, resume=resume,
                             on_start=on_start, on_done=on_done)
    finally:
        stop.set()


# ---- summaries -----------------------------------------------------------------------------------

def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default), None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


@dataclass
class Prices:
    """Dollars per million tokens."""
    input: float = 75.0
    cached_input: float = 37.5
    output: float = 150.0

    def cost(self, prompt: int, cached: int, output: int) -> float:
        fresh = max(0, prompt - cached)
        return (fresh * self.input + cached * self.cached_input + output * self.output) / 1e6


def summarize(rows: Sequence[dict[str, Any]], wall_s: float | None = None, new: int | None = None,
              prices: Prices | None = None) -> dict[str, Any]:
    """Accuracy and cost of one method on a set of rows. Throughput = new questions / wall time."""
    prices = prices or Prices()
    n = len(rows)
    if n == 0:
        return {"questions": 0}
    total = lambda key: sum(int(r.get(key) or 0) for r in rows)  # noqa: E731
    prompt, cached, output, calls = total("prompt_tokens"), total("cached_tokens"), total("output_tokens"), total("llm_calls")
    latencies = [float(r.get("latency_s") or 0.0) for r in rows]
    judged = [r["judge"] for r in rows if r.get("judge") is not None]
    failures = {name: 0 for name in FAILURES}
    for r in rows:
        if r.get("failure"):
            failures[r["failure"]] = failures.get(r["failure"], 0) + 1
    cost = prices.cost(prompt, cached, output)
    answered = new if new is not None else n
    return {
        "questions": n,
        "rouge_l": sum(float(r.get("rouge_l") or 0.0) for r in rows) / n,
        # Graph-CoT's aggregation (HF evaluate's bootstrap median), seeded
        "rouge_l_bootstrap_median": bootstrap_median([float(r.get("rouge_l") or 0.0) for r in rows]),
        "em": sum(bool(r.get("em")) for r in rows) / n,
        "em_exact": sum(bool(r.get("em_exact")) for r in rows) / n if all("em_exact" in r for r in rows) else None,
        "em_count": sum(bool(r.get("em")) for r in rows),
        "judge_score": (sum(judged) / len(judged)) if judged else None,
        "judged": len(judged),
        "judge_unparsed": sum(1 for r in rows if r.get("judge") is None and r.get("judge_reply") is not None),
        "tokens_per_question": (prompt + output) / n,
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "output_tokens": output,
        "llm_calls_per_question": calls / n,
        "tokens_per_call": (prompt + output) / calls if calls else None,
        "cache_hit_rate": cached / prompt if prompt else None,
        "latency_mean_s": sum(latencies) / n,
        "latency_p50_s": percentile(latencies, 50),
        "latency_p99_s": percentile(latencies, 99),
        "llm_time_mean_s": sum(float(r.get("llm_time_s") or 0.0) for r in rows) / n,
        "retrieval_time_mean_s": sum(float(r.get("retrieval_time_s") or 0.0) for r in rows) / n,
        "throughput_qps": (answered / wall_s) if wall_s and answered else None,
        "failures": failures,
        "cost_usd": cost,
        "cost_per_question_usd": cost / n,
        "prices_per_mtok": asdict(prices),
    }


def group_rows(rows: Iterable[dict[str, Any]], key: str = "domain") -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(str(row.get(key) or "all"), []).append(row)
    return groups
