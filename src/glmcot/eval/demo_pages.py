"""`glmcot demo`'s traced question: one question answered by GLM and by Graph-CoT, each written
as a trace page (glmcot.eval.view), and a page showing the two side by side."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

from glmcot.data.questions import QuestionRecord
from glmcot.eval.config import EvalConfig
from glmcot.files import write_text_atomic

METHODS = (("glm", "GLM"), ("graphcot", "Graph-CoT (faithful)"))


def pick(questions: list[QuestionRecord]) -> QuestionRecord:
    """A multi-step question where there is one (the notebook and the scratchpad then grow)."""
    for question in questions:
        if question.deterministic is False:
            return question
    return questions[0]


def write_trace_pages(question: QuestionRecord, dataset: Path, config: EvalConfig,
                      engines: dict[str, dict[str, Any]], folder: Path) -> dict[str, str]:
    """Answers `question` with each method on its demo engine and writes folder/<method>.html
    and folder/side-by-side.html; returns {name: path}."""
    from glmcot.eval import systems
    from glmcot.eval.view import page_events, write_page

    pages: dict[str, str] = {}
    for method, label in METHODS:
        with systems.open_system(config, graph=dataset, scripted_questions=[question],
                                 engine=engines.get(method)) as system:
            result = systems.method_answer_fn(method, system, config)(question)
        events = page_events(result, graph=dataset.name, policy=result.backend)
        pages[method] = str(write_page(folder / f"{method}.html", events,
                                       title=f"glmcot demo, {label}: {question.question[:80]}"))
    side = folder / "side-by-side.html"
    frames = "".join(f'<div><h2>{escape(label)}</h2><iframe src="{method}.html" title="{escape(label)}"></iframe></div>'
                     for method, label in METHODS)
    write_text_atomic(side, (
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "frame-src 'self' file:\"><title>glmcot demo: GLM and Graph-CoT on one question</title><style>"
        "body{margin:0;font:14px system-ui,sans-serif}h1{font-size:16px;margin:8px}"
        ".two{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:6px}h2{font-size:14px;margin:4px 8px}"
        "iframe{width:100%;height:calc(100vh - 90px);border:1px solid #ccc}</style></head><body>"
        f"<h1>{escape(question.question)}</h1><div class=\"two\">{frames}</div></body></html>\n"))
    pages["side-by-side"] = str(side)
    return pages
