"""`glmcot ask --html FILE` and `glmcot eval --html DIR` write self-contained trace pages, against
a stand-in OpenAI server whose model answers nothing usable (so the page shows a failure)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from glmcot.cli import app

from tests.agents.fixtures import build_graph

QUESTION = 'Who wrote "<script>alert(1)</script>"?'


def _events(page: str) -> list:
    data = page.split('id="glmcot-events">', 1)[1].split("</script>", 1)[0]
    assert not re.search(r"[<>&]", data)
    return json.loads(data)


def test_ask_html_writes_one_self_contained_page(tmp_path: Path, table_server):
    url, _table = table_server
    graph = build_graph(tmp_path / "graph")
    page_path = tmp_path / "out" / "q.html"
    result = CliRunner().invoke(app, ["ask", QUESTION, "--graph", str(graph), "--llm", url,
                                      "--html", str(page_path)])
    # the table server's replies answer nothing (exit 3: no answer, with its category); the page
    # is written all the same
    assert result.exit_code == 3, result.output
    page = page_path.read_text(encoding="utf-8")
    assert "http://" not in page.split("<body", 1)[0] and "/ui/assets" not in page   # nothing fetched
    events = _events(page)
    names = [name for name, _ in events]
    assert names[0] == "start" and names[-1] == "result" and "llm" in names
    assert events[0][1]["question"] == QUESTION
    assert events[-1][1]["failure"] == "unexpected_output"   # "I do not know" is no agent reply
    assert str(page_path) in result.output.replace("\n", "")


def test_eval_html_writes_a_page_per_question_and_an_index(tmp_path: Path, table_server):
    url, _table = table_server
    graph = build_graph(tmp_path / "graph")
    questions = tmp_path / "q.jsonl"
    questions.write_text("".join(json.dumps({"qid": qid, "question": text, "answer": "x"}) + "\n"
                                 for qid, text in (("a/1", QUESTION), ("b", "Which venue?"))))
    pages = tmp_path / "pages"
    result = CliRunner().invoke(app, ["eval", "--questions", str(questions), "--graph", str(graph),
                                      "--method", "glm", "--llm", url, "--no-judge", "--out",
                                      str(tmp_path / "run"), "--html", str(pages), "--json"])
    assert result.exit_code == 0, result.output
    written = sorted(p.name for p in (pages / "glm").iterdir())
    assert written == ["a_1.html", "b.html", "index.html"]
    assert _events((pages / "glm" / "a_1.html").read_text())[0][1]["question"] == QUESTION
    index = (pages / "glm" / "index.html").read_text()
    assert 'href="a_1.html"' in index and 'href="b.html"' in index
