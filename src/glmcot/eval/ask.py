"""`glmcot ask`: one question, one answer, optionally with the agents' trace."""

from __future__ import annotations

import contextlib
import json
import sys
from dataclasses import asdict, is_dataclass
from enum import IntEnum
from pathlib import Path
from typing import Any

from glmcot.agents.trace import (AgentError, Answer, Classification, GraphCoTStep, LLMCall, NotebookUpdate,
                                 PrefetchTiming, Reasoning, SnippetRun, TraceEvent)
from glmcot.agents.records import QuestionResult
from glmcot.eval.config import EvalConfig
from glmcot.eval.progress import console as make_console
from glmcot.terminal import safe_text


def _as_dict(result: Any) -> dict[str, Any]:
    if callable(getattr(result, "to_dict", None)):  # QuestionResult: its events serialise themselves
        return result.to_dict()
    if is_dataclass(result):
        return asdict(result)
    if isinstance(result, dict):
        return dict(result)
    return {k: getattr(result, k) for k in dir(result) if not k.startswith("_") and not callable(getattr(result, k))}


def escape_text(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def _one_line(text: Any, limit: int = 300) -> str:
    text = "" if text is None else str(text)
    text = text.replace("\n", " \u23ce ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _seconds(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, (int, float)) else ""


def trace_rows(events: list[TraceEvent]) -> list[tuple[str, str, str, str]]:
    """(event, detail, tokens, seconds) per trace event."""
    rows: list[tuple[str, str, str, str]] = []
    for event in events:
        if isinstance(event, LLMCall):
            response, meta = event.response, event.metadata
            label = f"LLM {event.agent} (step {meta.get('step', 0)}"
            label += f", retry {meta['attempt']})" if meta.get("attempt") else ")"
            tokens = (f"{response.get('prompt_tokens', 0)} in ({response.get('cached_tokens', 0)} cached) / "
                      f"{response.get('output_tokens', 0)} out")
            rows.append((label, "reply: " + _one_line(event.text), tokens, _seconds(response.get("latency_s"))))
        elif isinstance(event, SnippetRun):
            result = event.result
            outcome = ("output: " + _one_line(result.get("output"))) if result.get("ok") else \
                ("error: " + _one_line(result.get("error")))
            extra = (f"\nRetrieveNode started while decoding: {', '.join(map(str, event.prefetched))}"
                     if event.prefetched else "")
            rows.append((f"snippet (step {event.step})", f"{event.code or ''}\n{outcome}{extra}", "",
                         _seconds(result.get("seconds") or result.get("elapsed_s"))))
        elif isinstance(event, PrefetchTiming):
            search = (f"search {event.search_start_s:.3f}-{event.search_end_s:.3f} s"
                      if event.search_start_s is not None and event.search_end_s is not None else event.source)
            rows.append((f"prefetch (step {event.step})",
                         f"RetrieveNode({_one_line(event.text, 80)!r}) seen at {event.seen_s:.3f} s, {search}, "
                         f"decoding ended at {event.decode_end_s:.3f} s", "", ""))
        elif isinstance(event, Reasoning):
            decision = f"missing: {_one_line(event.missing)}" if event.missing is not None else \
                f"answer: {_one_line(event.answer)}"
            rows.append((f"reasoning (step {event.step})", decision, "", ""))
        elif isinstance(event, NotebookUpdate):
            chunks = sum(1 for added in event.added if str(added).startswith("vertex:"))
            rows.append(("notebook", f"+{len(event.added) - chunks} fact(s), +{chunks} vertex chunk(s)", "", ""))
        elif isinstance(event, Classification):
            label = "deterministic (one lookup)" if event.deterministic else "non-deterministic (multi-step)"
            rows.append(("classify", label + ("" if event.parsed else " (reply unreadable)"), "", ""))
        elif isinstance(event, GraphCoTStep):
            rows.append((f"Graph-CoT step {event.step}",
                         f"Thought: {_one_line(event.thought)}\nAction: {_one_line(event.action)}\n"
                         f"Observation: {_one_line(event.observation)}", "", ""))
        elif isinstance(event, AgentError):
            rows.append(("error", f"{event.where}: {_one_line(event.message)}", "", ""))
        elif isinstance(event, Answer):
            rows.append(("result", f"answer: {_one_line(event.answer)}"
                         + (f"\nfailure: {event.failure}" if event.failure else ""), "", ""))
        else:
            data = event.to_dict()
            rows.append((str(data.get("type") or "event"), _one_line(json.dumps(data, default=str)), "", ""))
    return rows


def render_trace(events: list[TraceEvent]):
    from rich.table import Table

    table = Table(title="trace", title_justify="left", header_style="bold", show_lines=True)
    table.add_column("#", justify="right")
    table.add_column("event", no_wrap=True)
    table.add_column("detail", overflow="fold")
    table.add_column("tokens", justify="right")
    table.add_column("time s", justify="right")
    from rich.text import Text

    for number, row in enumerate(trace_rows(events), 1):
        # Text: brackets are not markup; safe_text: model and snippet text cannot drive the terminal
        table.add_row(str(number), *(Text(safe_text(cell)) for cell in row))
    return table


class AskExit(IntEnum):
    """`glmcot ask`'s exit codes (2 is the command line's own: bad arguments or setup)."""

    ANSWERED = 0
    BACKEND_ERROR = 1   # no answer because the LLM failed
    NO_ANSWER = 3       # no answer for another reason: the failure category says which


def ask_exit_code(data: dict[str, Any]) -> int:
    """What `glmcot ask` exits with for one result, so scripts can tell an answer from none."""
    if data.get("answer") not in (None, ""):
        return AskExit.ANSWERED
    return AskExit.BACKEND_ERROR if data.get("failure") == "backend_error" else AskExit.NO_ANSWER


def scripted_record(question: str, path: Path):
    """The record of `question` (its text, compared without case and extra spaces, or its qid) in a
    questions file with gold plans; a SetupError says what the file offers otherwise."""
    from glmcot.data.questions import read_questions
    from glmcot.eval import systems

    if not Path(path).is_file():
        raise systems.SetupError(f"--scripted needs gold plans: no questions file at {path} "
                                 "(glmcot data synth writes one beside the graph; or give --questions FILE)")
    records = read_questions(path)
    wanted = " ".join(question.split()).casefold()
    for record in records:
        if record.qid == question.strip() or " ".join(record.question.split()).casefold() == wanted:
            if record.plan is None:
                raise systems.SetupError(f"question {record.qid} in {path} has no gold plan; --scripted needs one")
            return record
    example = f'; e.g. "{records[0].question}" (qid {records[0].qid})' if records else ""
    raise systems.SetupError(f"--scripted answers only the questions of {path} (by text or qid): "
                             f"this question is not there{example}")


def ask(question: str, graph_path: Path, method: str, config: EvalConfig, *, trace: bool = False,
        as_json: bool = False, html: Path | None = None, scripted_questions: Path | None = None,
        grammar: Any = None) -> dict[str, Any]:
    """Answers one question; with `scripted_questions` the scripted policy answers from the
    question's gold plan in that file (a system demonstration, not model accuracy)."""
    from glmcot.eval import systems
    from glmcot.data.questions import QuestionRecord

    console = make_console(as_json)
    if not question.strip():
        raise systems.SetupError("the question is empty")
    scripted = scripted_questions is not None
    record = scripted_record(question, scripted_questions) if scripted else \
        QuestionRecord(qid="ask-0", question=question, answer="")
    if scripted:
        from glmcot.eval.report import SCRIPTED_NOTICE

        console.print(f"[bold yellow]{SCRIPTED_NOTICE}[/]", highlight=False)
    with contextlib.ExitStack() as stack:
        with console.status(f"loading the graph and {systems.describe_backend(config, scripted)}"):
            system = stack.enter_context(systems.open_system(config, graph=graph_path,
                                                             scripted_questions=scripted_questions, grammar=grammar))
        answer_fn = systems.method_answer_fn(method, system, config)
        with console.status(f"{method} is answering"):
            result = answer_fn(record)
    data = _as_dict(result)
    if scripted:
        data["gold_answer"] = record.answer
    if html is not None and isinstance(result, QuestionResult):
        from glmcot.eval.view import page_events, write_page

        write_page(html, page_events(result, graph=Path(graph_path).name, policy=result.backend),
                   title=f"glmcot {method}: {question[:80]}")
        console.print(f"[dim]wrote the trace page {escape_text(str(html))}[/]", highlight=False)
    if as_json:
        sys.stdout.write(json.dumps(data if trace else {k: v for k, v in data.items() if k != "trace"},
                                    indent=2, default=str, ensure_ascii=False) + "\n")
        return data
    if trace:
        console.print(render_trace(list(getattr(result, "trace", None) or [])))
    answer = data.get("answer")
    from rich.markup import escape

    console.print(f"[bold]answer:[/] {escape(safe_text(str(answer))) if answer not in (None, '') else '(no answer)'}",
                  highlight=False)
    if "gold_answer" in data:
        console.print(f"[dim]gold answer (questions file): {escape(str(data['gold_answer']))}[/]", highlight=False)
    summary = (f"{data.get('llm_calls', 0)} LLM calls, {data.get('prompt_tokens', 0)} prompt tokens "
               f"({data.get('cached_tokens', 0)} cached), {data.get('output_tokens', 0)} output tokens, "
               f"{(data.get('latency_s') or 0):.2f} s")
    console.print(f"[dim]{escape(summary)}[/]", highlight=False)
    if data.get("failure"):
        reason = data.get("failure_detail") or ""
        console.print(f"[bold yellow]failure:[/] {data['failure']}" + (f": {escape(safe_text(str(reason)))}" if reason else ""),
                      highlight=False)
    return data
