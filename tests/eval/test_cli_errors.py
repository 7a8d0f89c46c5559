"""Bad arguments get one clear line and exit code 2, never a traceback."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from glmcot.cli import app


def _run(args, env=None):
    result = CliRunner().invoke(app, args, env=env or {})
    output = result.output
    return result, " ".join(output.split())


@pytest.mark.parametrize("args,message", [
    (["eval", "--questions", "nope.jsonl", "--graph", ".", "--method", "sideways", "--scripted"], "unknown method 'sideways'"),
    (["eval", "--questions", "nope.jsonl", "--graph", ".", "--model", "x", "--llm", "http://h"], "only one of --model, --llm"),
    # the scripted policy force-decodes only through glmcot's vLLM backend (or the native engine)
    (["eval", "--questions", "nope.jsonl", "--graph", ".", "--scripted", "--llm", "http://h"], "only one of --model, --llm"),
    (["eval", "--questions", "nope.jsonl", "--method", "glm", "--scripted"], "--graph is needed for glm"),
    (["eval", "--questions", "nope.jsonl", "--graph", ".", "--llm-model", "m", "--model", "x"], "--llm-model needs --llm"),
    (["ask", "Who?", "--graph", "."], "give --model PATH"),
    (["ask", "Who?", "--graph", ".", "--model", "m", "--method", "magic"], "choose glm, graphcot or graphcot-repaired"),
    (["bench", "everything"], "unknown benchmark 'everything'"),
    (["bench", "ablation", "--workload", "random"], "unknown workload 'random'"),
    (["demo", "--domains", "dblp,mars"], "unknown domain(s) mars"),
])
def test_bad_arguments_exit_2_with_a_message(args, message):
    result, output = _run(args)
    assert result.exit_code == 2, output
    assert message in output
    assert "Traceback" not in output


def test_missing_question_file_is_a_clear_error(tmp_path: Path):
    result, output = _run(["eval", "--questions", str(tmp_path / "absent.jsonl"), "--method", "base",
                           "--llm", "http://127.0.0.1:9/v1", "--no-judge"])
    assert result.exit_code == 2
    assert "question file not found" in output and "Traceback" not in output


def test_bad_config_file_is_a_clear_error(tmp_path: Path):
    bad = tmp_path / "c.toml"
    bad.write_text("concurrency = 'lots'\n")
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"qid": "0", "question": "Q?", "answer": "A"}\n')
    result, output = _run(["eval", "--questions", str(questions), "--method", "base", "--llm", "http://127.0.0.1:9/v1",
                           "--config", str(bad)])
    assert result.exit_code == 2
    assert "concurrency must be an integer" in output


def test_missing_graph_folder_is_a_clear_error(tmp_path: Path):
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"qid": "0", "question": "Q?", "answer": "A"}\n')
    result, output = _run(["eval", "--questions", str(questions), "--graph", str(tmp_path / "nograph"),
                           "--method", "graph-rag", "--llm", "http://127.0.0.1:9/v1", "--no-judge"])
    assert result.exit_code == 2
    assert "graph folder not found" in output
