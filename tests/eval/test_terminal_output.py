"""What a model or a snippet wrote reaches the terminal as visible text, never as escape codes."""

from __future__ import annotations

import io

from rich.console import Console

from glmcot.agents.trace import LLMCall
from glmcot.eval.ask import render_trace


def test_the_trace_table_shows_escape_codes_in_a_model_reply_instead_of_sending_them():
    reply = "\x1b]52;c;cGF5bG9hZA==\x07\x1b[2J[bold]Paris\r"
    event = LLMCall(agent="A", metadata={"step": 1}, session="s", prompt_sha="x", segments=[],
                    response={"text": reply, "prompt_tokens": 3, "output_tokens": 2})
    out = io.StringIO()
    Console(file=out, width=200, force_terminal=True, color_system=None).print(render_trace([event]))
    text = out.getvalue()
    assert "\\x1b]52;c;cGF5bG9hZA==\\x07\\x1b[2J[bold]Paris\\x0d" in text
    assert "\x07" not in text and "\x1b]52" not in text and "\x1b[2J" not in text
