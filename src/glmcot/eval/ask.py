"""`glmcot ask`: one question, one answer, optionally with the agents' trace."""

from __future__ import annotations

import contextlib
import json
import sys
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

from glmcot.eval.config import EvalConfig
from glmcot.eval.progress import console as make_console


def _as_dict(result: Any) -> dict[str, Any]:
    if is_dataclass(result):
        return asdict(result)
    if isinstance(result, dict):
        return dict(result)
    return {k: getattr(result, k) for k in dir(result) if not k.startswith("_") and not callable(getattr(result, k))}


def _short(value: Any, limit: int = 400) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def render_trace(events: list[dict[str, Any]]):
    """A table of trace events: step, agent/kind, what was sent or run, what came back, cost."""
    from rich.table import Table

    table = Table(title="trace", title_justify="left", header_style="bold", show_lines=True)
    for header in ("#", "event", "detail", "tokens", "time s"):
        table.add_column(header, justify="right" if header in ("#", "tokens", "time s") else "left",
                         overflow="fold")
    for number, event in enumerate(events, 1):
        event = _as_dict(event)
        kind = str(event.get("event") or event.get("kind") or event.get("type") or "")
        agent = event.get("agent")
        label = f"{kind} {agent}".strip() if agent else kind
        hidden = {"event", "kind", "type", "agent", "prompt_tokens", "cached_tokens", "output_tokens",
                  "latency_s", "time_s", "duration_s", "t"}
        detail = "\n".join(f"{k}: {_short(v)}" for k, v in event.items() if k not in hidden and v not in (None, "", []))
        tokens = ""
        if event.get("prompt_tokens") is not None:
            tokens = f"{event.get('prompt_tokens')} in ({event.get('cached_tokens') or 0} cached) / {event.get('output_tokens') or 0} out"
        seconds = event.get("latency_s") or event.get("time_s") or event.get("duration_s")
        table.add_row(str(number), label, detail, tokens, f"{seconds:.3f}" if isinstance(seconds, (int, float)) else "")
    return table


def ask(question: str, graph_path: Path, method: str, config: EvalConfig, *, trace: bool = False,
        as_json: bool = False) -> dict[str, Any]:
    from glmcot.eval import systems
    from glmcot.eval.questions import Question

    console = make_console(as_json)
    if not question.strip():
        raise systems.SetupError("the question is empty")
    with contextlib.ExitStack() as stack:
        with console.status(f"loading the graph and {systems.describe_backend(config, False)}"):
            context = stack.enter_context(systems.agent_context(graph_path, config))
            backend = stack.enter_context(systems.answer_backend(config, context=context))
        answer_fn = systems.method_answer_fn(method, context, backend, config)
        with console.status(f"{method} is answering"):
            result = answer_fn(Question(qid="ask-0", question=question, answer=""))
    data = _as_dict(result)
    if as_json:
        sys.stdout.write(json.dumps(data if trace else {k: v for k, v in data.items() if k != "trace"},
                                    indent=2, default=str, ensure_ascii=False) + "\n")
        return data
    if trace:
        console.print(render_trace(list(data.get("trace") or [])))
    answer = data.get("answer")
    console.print(f"[bold]answer:[/] {answer if answer not in (None, '') else '(no answer)'}", highlight=False)
    summary = (f"{data.get('llm_calls', 0)} LLM calls, {data.get('prompt_tokens', 0)} prompt tokens "
               f"({data.get('cached_tokens', 0)} cached), {data.get('output_tokens', 0)} output tokens, "
               f"{(data.get('latency_s') or 0):.2f} s")
    if data.get("failure"):
        summary += f", failure: {data['failure']}"
    console.print(f"[dim]{summary}[/]", highlight=False)
    return data
