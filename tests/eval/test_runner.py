import json
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from glmcot.data.questions import QuestionFormatError, QuestionRecord, read_questions
from glmcot.eval.runner import Prices, percentile, run_method, summarize
from glmcot.files import read_rows


@dataclass
class Result:
    answer: str
    failure: str | None = None
    llm_calls: int = 2
    prompt_tokens: int = 100
    cached_tokens: int = 40
    output_tokens: int = 10
    latency_s: float = 0.5
    llm_time_s: float = 0.4
    retrieval_time_s: float = 0.05


def _questions(n=4):
    return [QuestionRecord(qid=f"q{i}", question=f"What is {i}?", answer=f"value {i}", domain="dblp") for i in range(n)]


def _lookup(question):
    """Answers from a fixed table: right for even ids, wrong for odd ones, a crash for q3."""
    i = int(question.qid[1:])
    if i == 3:
        raise RuntimeError("backend went away")
    return Result(answer=f"Value {i}." if i % 2 == 0 else "no idea", failure=None if i % 2 == 0 else "step_limit")


def test_rows_carry_graphcot_fields_metrics_and_errors(tmp_path: Path):
    out = tmp_path / "glm.jsonl"
    outcome = run_method("glm", _questions(), _lookup, out, concurrency=2)
    assert [r["qid"] for r in outcome.results] == ["q0", "q1", "q2", "q3"]
    rows = {r["qid"]: r for r in read_rows(out)}
    assert set(rows) == {"q0", "q1", "q2", "q3"}
    assert rows["q0"]["model_answer"] == "Value 0." and rows["q0"]["gt_answer"] == "value 0"
    assert rows["q0"]["em"] is True and rows["q0"]["rouge_l"] == pytest.approx(1.0)
    assert rows["q1"]["em"] is False and rows["q1"]["failure"] == "step_limit"
    assert rows["q3"]["failure"] == "error" and "backend went away" in rows["q3"]["error"]
    summary = summarize(outcome.results, outcome.wall_s, outcome.new, Prices(1.0, 0.5, 2.0))
    assert summary["em_count"] == 2 and summary["em"] == 0.5
    assert summary["failures"]["step_limit"] == 1 and summary["failures"]["error"] == 1
    # three answered rows with 100 prompt (40 cached) and 10 output tokens, one crashed row with none
    assert summary["prompt_tokens"] == 300 and summary["cached_tokens"] == 120
    assert summary["cache_hit_rate"] == pytest.approx(0.4)
    assert summary["cost_usd"] == pytest.approx((180 * 1.0 + 120 * 0.5 + 30 * 2.0) / 1e6)
    assert summary["llm_calls_per_question"] == pytest.approx(6 / 4)


def test_resume_skips_finished_questions_and_repairs_a_torn_line(tmp_path: Path):
    out = tmp_path / "glm.jsonl"
    calls = []
    lock = threading.Lock()

    def answer(question):
        with lock:
            calls.append(question.qid)
        return Result(answer=question.answer)

    run_method("glm", _questions(2), answer, out)
    assert sorted(calls) == ["q0", "q1"]
    with out.open("ab") as handle:  # a crash in the middle of writing q2's row
        handle.write(b'{"qid": "q2", "question": "What is')
    calls.clear()
    outcome = run_method("glm", _questions(4), answer, out)
    assert sorted(calls) == ["q2", "q3"]
    assert outcome.skipped == 2 and outcome.new == 2
    lines = out.read_text().splitlines()
    assert len(lines) == 4 and all(json.loads(line)["qid"] for line in lines)
    calls.clear()
    run_method("glm", _questions(4), answer, out)
    assert calls == []
    run_method("glm", _questions(4), answer, out, resume=False)
    assert sorted(calls) == ["q0", "q1", "q2", "q3"]
    assert len(out.read_text().splitlines()) == 4


def test_malformed_row_in_the_middle_is_reported(tmp_path: Path):
    out = tmp_path / "r.jsonl"
    out.write_text('{"qid": "a"}\nnot json\n{"qid": "b"}\n')
    with pytest.raises(ValueError, match=r"r.jsonl:2: malformed"):
        read_rows(out)


def test_percentile_is_numpy_linear():
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == pytest.approx(2.5)
    assert percentile([1.0, 2.0, 3.0, 4.0], 99) == pytest.approx(3.97)
    assert percentile([], 50) is None


def test_question_files(tmp_path: Path):
    good = tmp_path / "dblp.jsonl"
    good.write_text('{"qid": "0", "question": "Q?", "answer": "A"}\n\n{"qid": 1, "question": "R?", "answer": ["x", "y"]}\n')
    questions = read_questions(good)
    assert [q.qid for q in questions] == ["0", "1"] and questions[1].answer == "x, y"
    assert questions[0].domain == "dblp"
    assert len(read_questions(good, limit=1)) == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"qid": "0", "question": "Q?"}\n')
    with pytest.raises(QuestionFormatError, match="bad.jsonl:1: missing field.*answer"):
        read_questions(bad)
    bad.write_text('{"qid": "0", "question": "Q?", "answer": "A"}\n{oops\n')
    with pytest.raises(QuestionFormatError, match="bad.jsonl:2: not valid JSON"):
        read_questions(bad)
    with pytest.raises(QuestionFormatError, match="not found"):
        read_questions(tmp_path / "nope.jsonl")
    bad.write_text('{"qid": "0", "question": "Q?", "answer": "A"}\n{"qid": "0", "question": "R?", "answer": "B"}\n')
    with pytest.raises(QuestionFormatError, match="bad.jsonl:2: duplicate qid '0'"):
        read_questions(bad)
    bad.write_text("\n\n")
    with pytest.raises(QuestionFormatError, match="no questions in the file"):
        read_questions(bad)


def test_failure_reasons_are_kept_in_the_rows(tmp_path: Path):
    @dataclass
    class Failed(Result):
        failure_detail: str | None = None

    out = tmp_path / "glm.jsonl"
    run_method("glm", _questions(1), lambda q: Failed(answer="", failure="backend_error",
                                                      failure_detail="HTTP 404 from http://h/models"), out)
    row = read_rows(out)[0]
    assert row["failure"] == "backend_error" and row["error"] == "HTTP 404 from http://h/models"


def test_ctrl_c_stops_at_once_keeps_what_is_saved_and_resume_counts_it(tmp_path: Path):
    from glmcot.runs import RunInterrupted

    out = tmp_path / "glm.jsonl"
    release = threading.Event()

    def answer(question):
        if question.qid != "q0":
            release.wait(600)   # in flight when Ctrl-C comes: must not be waited for
        return Result(answer=question.answer)

    def interrupt(row):
        raise KeyboardInterrupt

    try:
        with pytest.raises(RunInterrupted) as stopped:
            run_method("glm", _questions(4), answer, out, concurrency=4, on_done=interrupt)
        assert (stopped.value.saved, stopped.value.total) == (1, 4)
        assert [r["qid"] for r in read_rows(out)] == ["q0"]
    finally:
        release.set()
    starts = []
    outcome = run_method("glm", _questions(4), answer, out, on_start=starts.append)
    assert starts == [1] and outcome.skipped == 1 and outcome.new == 3
    assert sorted(r["qid"] for r in read_rows(out)) == ["q0", "q1", "q2", "q3"]


def test_resume_refuses_rows_of_another_graph_and_keeps_the_file(tmp_path: Path):
    from glmcot.runs import ResumeMismatch

    out = tmp_path / "glm.jsonl"
    answered = []

    def answer(question):
        answered.append(question.qid)
        return Result(answer=question.answer)

    run_method("glm", _questions(2), answer, out, settings={"graph": "/data/a", "backend": "m"})
    before = out.read_bytes()
    with pytest.raises(ResumeMismatch, match=r"2 stored row\(s\) do not belong to this run \(graph was "
                                             r"'/data/a', now '/data/b'\).*--fresh"):
        run_method("glm", _questions(3), answer, out, settings={"graph": "/data/b", "backend": "m"})
    assert out.read_bytes() == before and sorted(answered) == ["q0", "q1"]
    outcome = run_method("glm", _questions(3), answer, out, settings={"graph": "/data/a", "backend": "m"})
    assert outcome.skipped == 2 and outcome.new == 1
