"""Resumable evaluation runs: one JSON Lines file per method, one row per question, appended
atomically as each question finishes; a rerun skips the questions already in the file.

Row format ``glmcot.eval/1``: Graph-CoT's ``{qid, question, model_answer, gt_answer}`` plus metrics
and costs (see docs/benchmarks.md)."""

from __future__ import annotations

import json
import math
import os
import queue
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from glmcot.eval.metrics import as_text, bootstrap_median, exact_match, exact_match_strict, rouge_l
from glmcot.data.questions import QuestionRecord

ROW_FORMAT = "glmcot.eval/1"
FAILURES = ("unexpected_output", "retrieval_error", "code_error", "step_limit", "backend_error", "error")

AnswerFn = Callable[[QuestionRecord], Any]
JudgeFn = Callable[[QuestionRecord, str], "tuple[bool | None, str]"]


# ---- JSON Lines with atomic appends -------------------------------------------------------------

def read_rows(path: Path) -> list[dict[str, Any]]:
    """Reads finished rows. A torn last line (a crash mid-write) is cut off the file so appends stay
    well-formed; a malformed line elsewhere is an error naming the line."""
    path = Path(path)
    if not path.exists():
        return []
    data = path.read_bytes()
    complete, _, tail = data.rpartition(b"\n") if b"\n" in data else (b"", b"", data)
    rows: list[dict[str, Any]] = []
    for number, raw in enumerate(complete.split(b"\n") if complete else [], 1):
        if not raw.strip():
            continue
        row = _parse_row(raw)
        if row is None:
            raise ValueError(f"{path}:{number}: malformed result row; fix or remove that line")
        rows.append(row)
    if tail.strip():
        row = _parse_row(tail)
        if row is None:  # torn by a crash: drop it, the question reruns
            _truncate(path, len(data) - len(tail))
        else:
            with path.open("ab") as handle:
                handle.write(b"\n")
            rows.append(row)
    return rows


def _parse_row(raw: bytes) -> dict[str, Any] | None:
    try:
        row = json.loads(raw)
    except ValueError:
        return None
    return row if isinstance(row, dict) and "qid" in row else None


def _truncate(path: Path, size: int) -> None:
    with path.open("r+b") as handle:
        handle.truncate(size)
        handle.flush()
        os.fsync(handle.fileno())


class RowWriter:
    """Appends one JSON object per line with a single write() on an O_APPEND descriptor, then fsync,
    so a crash leaves at most one torn line at the end (which read_rows cuts off)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, row: dict[str, Any]) -> None:
        data = (json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock:
            os.write(self._fd, data)
            os.fsync(self._fd)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> "RowWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_json_atomic(path: Path, data: Any) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


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


@dataclass
class RunOutcome:
    rows: list[dict[str, Any]]          # one per requested question, in question order
    new: int                            # questions answered in this run
    skipped: int                        # questions found finished in the file
    wall_s: float                       # wall time of this run's new questions


# Rows a resumed run answers again: the backend failed (now perhaps fixed) or the run crashed.
RETRY_ON_RESUME = ("backend_error", "error")


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run: the rows written so far are saved; a rerun resumes after them."""

    def __init__(self, method: str, path: Path, saved: int, total: int) -> None:
        super().__init__(f"{method}: {saved} of {total} answers saved in {path}")
        self.method, self.path, self.saved, self.total = method, path, saved, total


def _rewrite_without(path: Path, drop: set[str], method: str) -> None:
    """Rewrites `path` atomically without the rows of `drop` (failed rows about to be retried)."""
    kept = [r for r in read_rows(path) if not (str(r["qid"]) in drop and r.get("method", method) == method)]
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept), encoding="utf-8")
    os.replace(tmp, path)


def run_method(method: str, questions: Sequence[QuestionRecord], answer_fn: AnswerFn, out_path: Path, *,
               concurrency: int = 4, judge_fn: JudgeFn | None = None, resume: bool = True,
               on_done: Callable[[dict[str, Any]], None] | None = None,
               on_start: Callable[[int], None] | None = None,
               retry_failed: Sequence[str] = RETRY_ON_RESUME) -> RunOutcome:
    """Answers the questions not yet in ``out_path`` with ``concurrency`` workers. Rows whose
    failure is in ``retry_failed`` are answered again. ``on_start(done)`` is told how many were
    already done. Ctrl-C stops at once (questions in flight are dropped) and raises
    RunInterrupted; every row written before it is kept."""
    out_path = Path(out_path)
    if not resume and out_path.exists():
        out_path.unlink()
    finished = {str(r["qid"]): r for r in read_rows(out_path) if r.get("method", method) == method}
    retry = {qid for qid, r in finished.items() if r.get("failure") in retry_failed}
    if retry:
        _rewrite_without(out_path, retry, method)
        for qid in retry:
            del finished[qid]
    todo = [q for q in questions if q.qid not in finished]
    if on_start is not None:
        on_start(len(questions) - len(todo))
    new_rows: dict[str, dict[str, Any]] = {}
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

    # Daemon workers, not a ThreadPoolExecutor: on Ctrl-C the process must not wait for the
    # questions in flight (an executor joins its threads at exit).
    pending: queue.SimpleQueue = queue.SimpleQueue()
    results: queue.SimpleQueue = queue.SimpleQueue()
    for question in todo:
        pending.put(question)

    def worker() -> None:
        while not stop.is_set():
            try:
                question = pending.get_nowait()
            except queue.Empty:
                return
            try:
                results.put(work(question))
            except BaseException as exc:  # noqa: BLE001 - reported by the main thread
                results.put(exc)

    start = time.perf_counter()
    threads = [threading.Thread(target=worker, name=f"glmcot-eval-{i}", daemon=True)
               for i in range(min(max(1, concurrency), max(1, len(todo))))]
    with RowWriter(out_path) as writer:
        for thread in threads:
            thread.start()
        received = 0
        try:
            while received < len(todo):
                try:
                    row = results.get(timeout=0.2)   # a timeout keeps Ctrl-C deliverable
                except queue.Empty:
                    continue
                received += 1
                if isinstance(row, BaseException):
                    raise row
                writer.write(row)
                new_rows[row["qid"]] = row
                if on_done is not None:
                    on_done(row)
        except KeyboardInterrupt:
            stop.set()
            raise RunInterrupted(method, out_path, len(questions) - len(todo) + received,
                                 len(questions)) from None
        finally:
            stop.set()
    wall = time.perf_counter() - start
    rows = [new_rows.get(q.qid) or finished[q.qid] for q in questions]
    return RunOutcome(rows=rows, new=len(todo), skipped=len(questions) - len(todo), wall_s=wall)


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
