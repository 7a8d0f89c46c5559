"""`glmcot eval`: accuracy and cost of methods on a question file, resumable."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.markup import escape

from glmcot.eval.config import EvalConfig
from glmcot.eval.progress import console as make_console, progress as make_progress
from glmcot.data.questions import read_questions
from glmcot.eval.report import SCRIPTED_NOTICE, summary_rich
from glmcot.eval.runner import Prices, run_method, summarize
from glmcot.files import write_json_atomic


@dataclass
class EvalOptions:
    questions: Path
    graph: Path | None
    methods: list[str]
    scripted: bool = False
    out: Path = Path("runs/eval")
    limit: int | None = None
    judge: bool = True
    resume: bool = True
    quiet: bool = False
    domain: str | None = None
    html: Path | None = None   # a trace page per question answered now: html/<method>/<qid>.html


def evaluate(options: EvalOptions, config: EvalConfig) -> dict[str, Any]:
    from glmcot.eval import systems

    out_console = make_console(options.quiet)
    questions = read_questions(options.questions, limit=options.limit, domain=options.domain)
    if options.scripted:
        out_console.print(f"[bold yellow]{SCRIPTED_NOTICE}[/]")
        missing_plans = [q.qid for q in questions if q.plan is None]
        if missing_plans:
            raise systems.SetupError(f"--scripted needs gold plans (glmcot data synth questions); "
                                     f"{len(missing_plans)} question(s) have none, e.g. {missing_plans[0]}")
    prices = Prices(config.price_input, config.price_cached_input, config.price_output)
    options.out.mkdir(parents=True, exist_ok=True)
    summaries: dict[str, dict[str, Any]] = {}
    with systems.open_system(config, graph=options.graph, domain=options.domain,
                             scripted_questions=options.questions if options.scripted else None) as system:
        judge_fn = systems.judge_function(config, system.backend, options) if options.judge else None
        with make_progress(options.quiet) as bar:
            for method in options.methods:
                answer_fn = systems.method_answer_fn(method, system, config)
                if options.html is not None:
                    answer_fn = _with_pages(answer_fn, options.html / method, options,
                                            systems.describe_backend(config, options.scripted))
                task = bar.add_task(f"{method}", total=len(questions))

                def tick(row: dict[str, Any], task=task, method=method) -> None:
                    bar.advance(task)
                    if row.get("failure"):   # every failure says why, above the bar
                        bar.console.print(f"[yellow]{escape(method)} {escape(str(row['qid']))}: "
                                          f"{row['failure']}[/]: {escape(str(row.get('error') or ''))}",
                                          highlight=False)

                def resumed(done: int, task=task) -> None:
                    bar.update(task, completed=done)   # the bar counts what earlier runs did

                outcome = run_method(method, questions, answer_fn, options.out / f"{method}.jsonl",
                                     concurrency=config.concurrency, judge_fn=judge_fn, resume=options.resume,
                                     on_done=tick, on_start=resumed)
                bar.update(task, completed=len(questions))
                summary = summarize(outcome.results, outcome.wall_s, outcome.new, prices)
                summary.update({"resumed": outcome.skipped, "answered_now": outcome.new,
                                "results": str(options.out / f"{method}.jsonl")})
                summaries[method] = summary
    if options.html is not None:
        for method in options.methods:
            _index_pages(options.html / method, method)
    result = {
        "format": "glmcot.eval-summary/1",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "questions_file": str(options.questions),
        "graph": str(options.graph) if options.graph else None,
        "backend": systems.describe_backend(config, options.scripted),
        "scripted_policy": options.scripted,
        "judge": systems.describe_judge(config, options) if options.judge else None,
        "methods": summaries,
    }
    write_json_atomic(options.out / "summary.json", result)
    if not options.quiet:
        out_console.print(summary_rich(summaries, title=f"glmcot eval: {options.questions.name} "
                                                        f"({result['backend']})"))
        for method, s in summaries.items():
            out_console.print(f"cost {method}: ${s['cost_usd']:.4f} total, ${s['cost_per_question_usd']:.5f}/question "
                              f"at ${config.price_input:g}/${config.price_cached_input:g}/${config.price_output:g} "
                              "per million input/cached-input/output tokens"
                              + (f"; {s['resumed']} question(s) resumed from the file" if s.get("resumed") else ""))
        out_console.print(f"results: {options.out}/<method>.jsonl, summary: {options.out / 'summary.json'}")
    return result


def _with_pages(answer_fn, folder: Path, options: EvalOptions, backend: str):
    """answer_fn that also writes each question's trace page into folder (agents' answers only:
    the baselines keep no trace)."""
    from glmcot.agents.records import QuestionResult
    from glmcot.eval.view import page_events, page_name, write_page

    graph = options.graph.name if options.graph else ""

    def answer(question):
        result = answer_fn(question)
        if isinstance(result, QuestionResult):
            write_page(folder / page_name(question.qid, 0), page_events(result, graph=graph, policy=backend),
                       title=f"glmcot {result.method} {question.qid}")
        return result

    return answer


def _index_pages(folder: Path, method: str) -> None:
    """folder/index.html linking the pages written there (this run's and earlier runs')."""
    from glmcot.eval.view import write_index

    if not folder.is_dir():
        return
    pages = sorted(p.name for p in folder.glob("*.html") if p.name != "index.html")
    write_index(folder, [(name, name[:-5], "") for name in pages], f"glmcot eval: {method} trace pages")
