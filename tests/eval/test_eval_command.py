import json
from pathlib import Path

from typer.testing import CliRunner

from glmcot.cli import app

QUESTIONS = [
    {"qid": "0", "question": "Who wrote Alpha?", "answer": "Ann Lee"},
    {"qid": "1", "question": "Which venue published Beta?", "answer": "KDD"},
    {"qid": "2", "question": "How is the weather in Gamma?", "answer": "sunny"},
]


def _write_questions(path: Path) -> Path:
    path.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    return path


def test_eval_base_with_judge_then_resume(tmp_path: Path, table_server):
    url, table = table_server
    table.answers.update({"Who wrote Alpha?": "ann lee.", "Which venue published Beta?": "ICML",
                          "How is the weather in Gamma?": "sunny"})
    questions = _write_questions(tmp_path / "dblp.jsonl")
    out = tmp_path / "run"
    args = ["eval", "--questions", str(questions), "--method", "base", "--llm", url, "--out", str(out),
            "--json", "--price-input", "1000000", "--price-output", "0", "--price-cached-input", "0"]
    result = CliRunner().invoke(app, args, env={"GLMCOT_CONCURRENCY": "2"})
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout[result.stdout.index("{"):])["methods"]["base"]
    assert summary["questions"] == 3 and summary["em_count"] == 2
    # the original GPT4score rule: q0 Yes (same after lowercasing), q1 No, q2's reply is not Yes/No
    # -> 0, and every reply stays in the denominator
    assert summary["judged"] == 3 and summary["judge_score"] == 1 / 3 and summary["judge_unparsed"] == 0
    assert summary["em_exact"] == 1 / 3 and summary["em"] == 2 / 3  # exact EM beside the normalised one
    assert summary["llm_calls_per_question"] == 1
    # price: $1 per prompt token
    assert summary["cost_usd"] == summary["prompt_tokens"]

    rows = [json.loads(line) for line in (out / "base.jsonl").read_text().splitlines()]
    assert {r["qid"] for r in rows} == {"0", "1", "2"}
    row = next(r for r in rows if r["qid"] == "0")
    assert row["model_answer"] == "ann lee." and row["gt_answer"] == "Ann Lee" and row["question"] == "Who wrote Alpha?"
    assert row["em"] is True and row["judge"] is True and row["domain"] == "dblp"

    calls_before = len(table.calls)
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
    summary2 = json.loads(again.stdout[again.stdout.index("{"):])["methods"]["base"]
    assert summary2["answered_now"] == 0 and summary2["resumed"] == 3
    assert len(table.calls) == calls_before  # nothing was asked again
    assert summary2["em_count"] == 2
    assert (out / "summary.json").is_file()
    assert "only exactly 'Yes' is 1" in json.loads((out / "summary.json").read_text())["judge"]

    # the lenient judge, an option: the unreadable reply is left out and the report says so
    lenient = CliRunner().invoke(app, args + ["--judge-rule", "lenient", "--fresh"])
    assert lenient.exit_code == 0, lenient.output
    summary3 = json.loads(lenient.stdout[lenient.stdout.index("{"):])
    assert "lenient judge" in summary3["judge"]
    base = summary3["methods"]["base"]
    assert base["judged"] == 2 and base["judge_score"] == 0.5 and base["judge_unparsed"] == 1


def test_eval_table_output_and_scripted_judge_error(tmp_path: Path, table_server):
    url, table = table_server
    questions = _write_questions(tmp_path / "q.jsonl")
    result = CliRunner().invoke(app, ["eval", "--questions", str(questions), "--method", "base", "--llm", url,
                                      "--out", str(tmp_path / "o"), "--no-judge", "--limit", "2"],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "ROUGE-L" in text and "cost base: $" in text
    assert len((tmp_path / "o" / "base.jsonl").read_text().splitlines()) == 2
    scripted = CliRunner().invoke(app, ["eval", "--questions", str(questions), "--method", "base", "--scripted",
                                        "--out", str(tmp_path / "s")])
    assert scripted.exit_code == 2
    assert "gold plans" in " ".join(scripted.output.split())
