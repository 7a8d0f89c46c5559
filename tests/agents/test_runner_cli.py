import json

from typer.testing import CliRunner

from glmcot.agents import ScriptedBackend, run_questions
from glmcot.cli import app
from glmcot.files import read_rows
from glmcot.llm.replay import ReplayBackend


def test_run_questions_writes_traces_and_resumes(tmp_path, context, records):
    traces = tmp_path / "run" / "glm.jsonl"
    backend = ScriptedBackend(records, code_runner=context.run_code)
    results = run_questions(records[:2], method="glm", backend=backend, context=context, concurrency=2, traces=traces)
    assert [r.qid for r in results] == ["t-0", "t-1"]
    lines = traces.read_text().splitlines()
    assert len(lines) == 2
    row = json.loads(lines[0])
    assert row["format"] == "glmcot.trace/1" and row["backend"] == "scripted policy"
    assert any(e["type"] == "exec" for e in row["trace"])
    with open(traces, "a") as handle:
        handle.write('{"qid": "t-9", "answ')  # a crash mid-write
    seen = []
    results = run_questions(records, method="glm", backend=backend, context=context, concurrency=2, traces=traces, on_result=seen.append)
    assert [r.answer for r in results] == [r["answer"] for r in records]
    assert len(seen) == 4
    assert sorted(row["qid"] for row in read_rows(traces)) == ["t-0", "t-1", "t-2", "t-3"]
    assert all(r.failure is None for r in results)
    assert 2 <= sum(r.llm_calls for r in results) / len(results) <= 6


def test_traces_replay_to_the_same_answers(tmp_path, context, records):
    traces = tmp_path / "graphcot.jsonl"
    backend = ScriptedBackend(records, code_runner=context.run_code)
    first = run_questions(records, method="graphcot", backend=backend, context=context, traces=traces)
    replay = ReplayBackend(traces)
    again = run_questions(records, method="graphcot", backend=replay, context=context)
    assert [r.answer for r in again] == [r.answer for r in first]
    assert [r.prompt_tokens for r in again] == [r.prompt_tokens for r in first]
    assert all(r.backend.startswith("replay") for r in again)


def test_exec_command(tmp_path, graph_dir):
    snippet = tmp_path / "s.py"
    snippet.write_text('p = RetrieveNode("Learning to Rank Nodes")\nprint(NodeFeature(p, "year"))\n')
    runner = CliRunner()
    result = runner.invoke(app, ["exec", "--graph", str(graph_dir), "--retriever", "lexical", str(snippet)])
    assert result.exit_code == 0, result.output
    assert result.stdout == "2020\n"
    result = runner.invoke(app, ["exec", "--graph", str(graph_dir), "--json", "-"], input="import os\n")
    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload["ok"] is False and payload["error"]["kind"] == "rejected"
    result = runner.invoke(app, ["exec", "--graph", str(tmp_path / "nope"), str(snippet)])
    assert result.exit_code != 0 and "no graph directory" in result.output


def test_exec_prints_a_deep_nesting_rejection_not_a_traceback(tmp_path, graph_dir):
    snippet = tmp_path / "deep.py"
    snippet.write_text("x = " + "not " * 1900 + "1\n")
    result = CliRunner().invoke(app, ["exec", "--graph", str(graph_dir), "--retriever", "lexical", str(snippet)])
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "error (rejected)" in result.output and "nests too deeply" in result.output
    assert "Traceback" not in result.output


def test_run_questions_refuses_to_resume_traces_of_another_backend(tmp_path, context, records):
    import pytest

    from glmcot.runs import ResumeMismatch

    traces = tmp_path / "glm.jsonl"
    backend = ScriptedBackend(records, code_runner=context.run_code)
    run_questions(records[:2], method="glm", backend=backend, context=context, traces=traces)
    before = traces.read_bytes()
    other = ScriptedBackend(records, code_runner=context.run_code)
    other.label = "another model"
    with pytest.raises(ResumeMismatch, match=r"backend was 'scripted policy', now 'another model'.*resume=False"):
        run_questions(records, method="glm", backend=other, context=context, traces=traces)
    assert traces.read_bytes() == before
    results = run_questions(records, method="glm", backend=other, context=context, traces=traces, resume=False)
    assert all(r.backend == "another model" for r in results)


def test_exec_refuses_a_snippet_that_is_not_utf8_with_a_clear_error(tmp_path, graph_dir):
    snippet = tmp_path / "latin1.py"
    snippet.write_bytes('print("caf\xe9")\n'.encode("latin-1"))
    for args, kwargs in ((["exec", "--graph", str(graph_dir), str(snippet)], {}),
                         (["exec", "--graph", str(graph_dir), "-"], {"input": snippet.read_bytes()})):
        result = CliRunner().invoke(app, args, **kwargs)
        assert result.exit_code == 2
        text = " ".join(result.output.split())
        assert "is not UTF-8 text: byte 0xe9 at offset 10 (line 1)" in text and "Traceback" not in text
        assert result.exception is None or isinstance(result.exception, SystemExit)


def test_exec_shows_terminal_escapes_in_snippet_output_instead_of_sending_them(tmp_path, graph_dir):
    snippet = tmp_path / "escape.py"
    snippet.write_text('print("\\x1b]0;owned\\x07\\x1b[2Jred\\rX\\u202eok\\tend")\nprint(1 / 0)\n')
    result = CliRunner().invoke(app, ["exec", "--graph", str(graph_dir), str(snippet)])
    assert result.exit_code == 1
    assert result.stdout == "\\x1b]0;owned\\x07\\x1b[2Jred\\x0dX\\u202eok\tend\n"
    assert not set(result.output) & {"\x1b", "\x07", "\r", "\u202e"}
    as_json = CliRunner().invoke(app, ["exec", "--graph", str(graph_dir), "--json", str(snippet)])
    assert json.loads(as_json.stdout)["output"] == "\x1b]0;owned\x07\x1b[2Jred\rX\u202eok\tend\n"  # JSON: the exact text


def test_safe_text_keeps_text_and_makes_controls_visible():
    from glmcot.terminal import safe_text

    assert safe_text("caf\u00e9 \u4e2d\n\tx") == "caf\u00e9 \u4e2d\n\tx"
    assert safe_text("\x1b[31m\x00\x7f\x9b\u2066") == "\\x1b[31m\\x00\\x7f\\x9b\\u2066"
