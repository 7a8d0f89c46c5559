import json
from pathlib import Path

from typer.testing import CliRunner

from glmcot.cli import app
from tests.stubs import JSONHandler

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


class BrokenModel:
    """An OpenAI-compatible server that lists its model and then fails every completion (or, once
    `fixed`, answers "sunny")."""

    def __init__(self):
        import threading
        from http.server import ThreadingHTTPServer

        outer = self
        self.fixed = False
        self.posts = 0

        class Handler(JSONHandler):
            def _send(self, status, data):
                self.send_json(status, data)

            def do_GET(self):
                self._send(200, {"object": "list", "data": [{"id": "table-model", "object": "model"}]})

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.posts += 1
                if not outer.fixed:
                    self._send(400, {"error": {"message": "prompt is longer than the model's context"}})
                    return
                self._send(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": "sunny"},
                                              "finish_reason": "stop"}],
                                 "usage": {"prompt_tokens": 3, "completion_tokens": 1}})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def test_eval_checks_the_backend_before_the_run(tmp_path: Path, table_server):
    url, _ = table_server
    questions = _write_questions(tmp_path / "q.jsonl")
    base = ["eval", "--questions", str(questions), "--method", "base", "--no-judge", "--out", str(tmp_path / "o")]
    down = CliRunner().invoke(app, base + ["--llm", "http://127.0.0.1:9/v1", "--llm-retries", "0"])
    assert down.exit_code == 2
    text = " ".join(down.output.split())
    assert "cannot connect to http://127.0.0.1:9/v1" in text and "Traceback" not in text
    unknown = CliRunner().invoke(app, base + ["--llm", url, "--llm-model", "gpt-9"])
    assert unknown.exit_code == 2
    assert "'gpt-9' is not served" in " ".join(unknown.output.split())
    assert not (tmp_path / "o" / "base.jsonl").exists()


def test_eval_prints_every_failure_keeps_it_in_the_rows_and_resume_retries_it(tmp_path: Path):
    server = BrokenModel()
    try:
        questions = _write_questions(tmp_path / "q.jsonl")
        out = tmp_path / "o"
        args = ["eval", "--questions", str(questions), "--method", "base", "--no-judge", "--llm", server.url,
                "--llm-retries", "0", "--out", str(out)]
        first = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
        assert first.exit_code == 0, first.output
        text = " ".join(first.output.split())
        assert text.count("backend_error") >= 3 and "longer than the model's context" in text
        rows = [json.loads(line) for line in (out / "base.jsonl").read_text().splitlines()]
        assert len(rows) == 3 and all(r["failure"] == "backend_error" for r in rows)
        assert all("longer than the model's context" in r["error"] for r in rows)
        server.fixed = True
        second = CliRunner().invoke(app, args + ["--json"])
        assert second.exit_code == 0, second.output
        summary = json.loads(second.stdout[second.stdout.index("{"):])["methods"]["base"]
        assert summary["answered_now"] == 3 and summary["resumed"] == 0
        assert summary["failures"]["backend_error"] == 0
        rows = [json.loads(line) for line in (out / "base.jsonl").read_text().splitlines()]
        assert len(rows) == 3 and all(r["failure"] is None and r["error"] is None for r in rows)
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()


def test_ctrl_c_in_eval_stops_at_once_and_says_how_to_resume(tmp_path: Path):
    import os
    import signal
    import subprocess
    import sys
    import threading
    import time
    from http.server import ThreadingHTTPServer

    release = threading.Event()

    class Handler(JSONHandler):
        def _send(self, data):
            self.send_json(200, data)

        def do_GET(self):
            self._send({"object": "list", "data": [{"id": "table-model", "object": "model"}]})

        def do_POST(self):
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            if "Alpha" not in request["messages"][-1]["content"]:
                release.wait(600)   # the other questions are still being answered at Ctrl-C
            self._send({"choices": [{"index": 0, "message": {"role": "assistant", "content": "Ann Lee"},
                                     "finish_reason": "stop"}], "usage": {"prompt_tokens": 3, "completion_tokens": 2}})

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    out = tmp_path / "o"
    questions = _write_questions(tmp_path / "q.jsonl")
    process = subprocess.Popen(
        [sys.executable, "-m", "glmcot.cli", "eval", "--questions", str(questions), "--method", "base", "--no-judge",
         "--llm", f"http://127.0.0.1:{httpd.server_address[1]}/v1", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "COLUMNS": "300"},
        # a suite started in the background (`cmd &` in a script) inherits SIGINT ignored, and Python
        # then installs no KeyboardInterrupt handler: give the child the default, as a terminal would
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 600   # generous: only a bound against hanging forever
        results = out / "base.jsonl"
        while not (results.exists() and results.read_text().count("\n") >= 1):
            assert process.poll() is None, process.stdout.read()
            assert time.monotonic() < deadline, "the first answer never arrived"
            time.sleep(0.1)
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=600)   # would wait for the stuck questions before
    finally:
        release.set()
        if process.poll() is None:
            process.terminate()
        httpd.shutdown()
        httpd.server_close()
    text = " ".join(output.split())
    assert process.returncode == 130, output
    assert "1 of 3 answers are saved" in text and "again" in text and "resume" in text
    assert "Traceback" not in text
    assert [json.loads(line)["qid"] for line in (out / "base.jsonl").read_text().splitlines()] == ["0"]


def test_eval_resumes_only_rows_of_the_same_settings_and_refuses_others(tmp_path: Path, table_server):
    """Rows written for another backend, judge or question text are never resumed into this run
    (summary.json would name the new settings over the old answers): the run refuses, says why
    and how to go on, and changes nothing."""
    url, table = table_server
    table.answers.update({"Who wrote Alpha?": "Ann Lee"})
    questions = _write_questions(tmp_path / "q.jsonl")
    out = tmp_path / "o"
    args = ["eval", "--questions", str(questions), "--method", "base", "--no-judge", "--llm", url, "--out", str(out)]
    first = CliRunner().invoke(app, args + ["--json"])
    assert first.exit_code == 0, first.output
    rows = [json.loads(line) for line in (out / "base.jsonl").read_text().splitlines()]
    assert all(row["settings"]["backend"] == f"server default model at {url}" for row in rows)
    saved = ((out / "base.jsonl").read_bytes(), (out / "summary.json").read_bytes())

    other_backend = CliRunner().invoke(app, args + ["--llm-model", "table-model"], env={"COLUMNS": "300"})
    assert other_backend.exit_code == 2
    text = " ".join(other_backend.output.split())
    assert "3 stored row(s) do not belong to this run" in text and "backend was 'server default model at" in text
    assert "now 'table-model at" in text and "--fresh" in text and "Traceback" not in text
    judged = CliRunner().invoke(app, [a for a in args if a != "--no-judge"], env={"COLUMNS": "300"})
    assert judged.exit_code == 2 and "judge was None" in " ".join(judged.output.split())
    assert ((out / "base.jsonl").read_bytes(), (out / "summary.json").read_bytes()) == saved

    changed = tmp_path / "changed.jsonl"   # the same qids asking something else
    changed.write_text("".join(json.dumps({**q, "question": q["question"] + " Really?"}) + "\n" for q in QUESTIONS))
    stale = CliRunner().invoke(app, ["eval", "--questions", str(changed), *args[3:]], env={"COLUMNS": "300"})
    assert stale.exit_code == 2 and "0: the question text differs" in " ".join(stale.output.split())

    same = CliRunner().invoke(app, args + ["--json"])
    assert same.exit_code == 0, same.output
    summary = json.loads(same.stdout[same.stdout.index("{"):])["methods"]["base"]
    assert summary["resumed"] == 3 and summary["answered_now"] == 0

    # rows of an older glmcot record no settings: nothing says what they answered, so not resumed
    (out / "base.jsonl").write_text("".join(json.dumps({k: v for k, v in row.items() if k != "settings"}) + "\n"
                                            for row in rows))
    legacy = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
    assert legacy.exit_code == 2 and "record no settings" in " ".join(legacy.output.split())
    fresh = CliRunner().invoke(app, args + ["--llm-model", "table-model", "--fresh", "--json"])
    assert fresh.exit_code == 0, fresh.output
    assert json.loads(fresh.stdout[fresh.stdout.index("{"):])["methods"]["base"]["answered_now"] == 3
