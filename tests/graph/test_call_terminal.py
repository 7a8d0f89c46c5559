"""`glmcot graph call` shows graph text that holds terminal escape codes instead of sending them."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from glmcot.cli import app
from glmcot.graph.storage.writer import StoreWriter

TITLE = "\x1b]0;pwned\x07\x1b[2JGraphs\r\u202eok"


def test_graph_text_with_escape_codes_is_shown_not_obeyed(tmp_path):
    store = tmp_path / "store"
    with StoreWriter(store) as writer:
        writer.add_nodes("paper", ["p\x1b[1m"], {"title": [TITLE]})
    runner = CliRunner()
    shown = runner.invoke(app, ["graph", "call", str(store), 'NodeFeature("p\\x1b[1m", "title")'])
    assert shown.exit_code == 0, shown.output
    assert shown.output == "\\x1b]0;pwned\\x07\\x1b[2JGraphs\\x0d\\u202eok\n"
    info = runner.invoke(app, ["graph", "call", str(store), 'NodeInfo("p\\x1b[1m")'])
    assert info.exit_code == 0 and "\x1b" not in info.output and "\\x1b]0;pwned" in info.output
    missing = runner.invoke(app, ["graph", "call", str(store), 'NodeFeature("\\x1b[2J", "title")'])
    assert missing.exit_code == 1 and "\x1b" not in missing.output and "\\x1b[2J" in missing.output
    exact = runner.invoke(app, ["graph", "call", str(store), 'NodeFeature("p\\x1b[1m", "title")', "--json"])
    assert json.loads(exact.output)["result"] == TITLE   # JSON carries the exact text
