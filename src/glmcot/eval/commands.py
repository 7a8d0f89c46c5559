"""Top-level commands of glmcot.eval: demo, ask, eval, bench."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any, Iterator, Optional

import typer

METHODS = ("glm", "graphcot", "graphcot-repaired", "base", "text-rag", "graph-rag")
DOMAINS = ("dblp", "amazon", "goodreads", "biomedical", "legal")
from glmcot.benchmarks import NAMES as BENCHMARK_NAMES
from glmcot.llm.spec import FORCING_SERVER_SPECS

BENCHES = (*BENCHMARK_NAMES, "ablation", "all")

_TIMEOUT_HELP = "Seconds per HTTP request to the --llm (and judge) server [env GLMCOT_LLM_TIMEOUT; default 120]."
_RETRIES_HELP = ("Retries of a transient --llm failure (connection, 429/5xx, a stream cut short) "
                 "[env GLMCOT_LLM_RETRIES; default 4].")
_LLM_MODEL_HELP = "Model name on the --llm server [env GLMCOT_LLM_MODEL]."
_LLM_API_KEY_HELP = ("API key of the --llm server [env GLMCOT_LLM_API_KEY, else OPENAI_API_KEY]; "
                     "GLMCOT_API_KEY is glmcot serve's own login key, never sent upstream.")
_CONFIG_HELP = "TOML config file (default: $GLMCOT_CONFIG, else ~/.config/glmcot/config.toml)."


class UsageError(Exception):
    """A bad combination of options or a missing input; printed without a traceback, exit 2."""


@contextlib.contextmanager
def _errors() -> Iterator[None]:
    """Turns expected failures into one red line and exit code 2 (GLMCOT_DEBUG=1 shows tracebacks)."""
    from rich.console import Console

    try:
        yield
    except (typer.Exit, typer.Abort, typer.BadParameter, KeyboardInterrupt):
        raise
    except Exception as exc:  # noqa: BLE001 - the CLI's last line of defence
        if os.environ.get("GLMCOT_DEBUG"):
            raise
        from glmcot.eval.config import ConfigError
        from glmcot.data.questions import QuestionFormatError
        from glmcot.eval.systems import SetupError
        from glmcot.runs import ResumeMismatch

        known = (UsageError, ConfigError, QuestionFormatError, SetupError, ResumeMismatch, FileNotFoundError,
                 NotADirectoryError)
        message = str(exc) if isinstance(exc, known) else f"{type(exc).__name__}: {exc}"
        from rich.markup import escape

        Console(stderr=True).print(f"[bold red]error:[/] {escape(message)}", highlight=False, markup=True)
        raise typer.Exit(2 if isinstance(exc, known) else 1) from None


def _config(options: dict[str, Any], config_file: Optional[Path]):
    from glmcot.eval.config import load_config

    return load_config(options, config_file)


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def _parse_methods(method: str) -> list[str]:
    names: list[str] = []
    for part in method.split(","):
        part = part.strip().lower()
        if part == "both":
            names += ["graphcot", "glm"]
        elif part in METHODS:
            names.append(part)
        else:
            raise typer.BadParameter(f"unknown method {part!r}; choose from {', '.join(METHODS)}, both "
                                     "(comma-separated for several)", param_hint="--method")
    return list(dict.fromkeys(names))


def _backend_choice(model: Optional[str], llm: Optional[str], scripted: bool, llm_model: Optional[str]) -> str:
    chosen = [name for name, on in (("--model", model), ("--llm", llm), ("--scripted", scripted)) if on]
    if scripted and llm and llm.startswith(FORCING_SERVER_SPECS) and not model:
        return "scripted"  # the scripted policy force-decoded through that server
    if len(chosen) > 1:
        raise typer.BadParameter(f"give only one of --model, --llm, --scripted (got {', '.join(chosen)})")
    if llm_model and not llm:
        raise typer.BadParameter("--llm-model needs --llm URL", param_hint="--llm-model")
    return chosen[0].lstrip("-") if chosen else ""


def register(app: typer.Typer) -> None:
    """Adds this package's commands to the main app."""

    @app.command("demo")
    def demo_command(
        out: Path = typer.Option(Path("runs/demo"), "--out", help="Folder for report.md, results.json and the PNG plots."),
        questions: int = typer.Option(4, "--questions", "-n", min=1, help="Questions per domain."),
        domains: str = typer.Option(",".join(DOMAINS), help="Comma-separated domains to run."),
        model: str = typer.Option("random:qwen3:small", help="Engine model: random:qwen3:<tiny|tiny-qwen-vocab|small|0.6b|8b> (random weights) or a checkpoint dir."),
        concurrency: Optional[int] = typer.Option(None, help="Questions in flight per method [env GLMCOT_CONCURRENCY; default 4]."),
        ablation: bool = typer.Option(True, "--ablation/--no-ablation", help="Also run the ablation (Figure 15 bars)."),
        quick: bool = typer.Option(False, "--quick", help="Smallest run: 2 questions per domain, a short ablation."),
        mini: str = typer.Option("auto", "--mini", help="glmcot-mini (trained on synthetic data) then answers one question per domain with real decoding: auto (when its default folder is built), off, glmcot-mini, or a checkpoint folder."),
        as_json: bool = typer.Option(False, "--json", help="Print the results as JSON instead of tables."),
        config_file: Optional[Path] = typer.Option(None, "--config", help=_CONFIG_HELP),
    ) -> None:
        """GLM vs Graph-CoT on synthetic graphs of five domains: Table-1 view, report and plots.

        Answers come from the scripted policy on a random-weight model: it measures the system,
        not model accuracy. Writes report.md, results.json and the Figure 11 / 15 plots.
        """
        with _errors():
            chosen = [d.strip() for d in domains.split(",") if d.strip()]
            unknown = [d for d in chosen if d not in DOMAINS]
            if unknown or not chosen:
                raise typer.BadParameter(f"unknown domain(s) {', '.join(unknown) or '(none)'}; choose from "
                                         f"{', '.join(DOMAINS)}", param_hint="--domains")
            config = _config({"concurrency": concurrency}, config_file)
            from glmcot.eval.demo import DemoOptions, run_demo

            result = run_demo(DemoOptions(out=out, questions_per_domain=2 if quick else questions,
                                          domains=chosen, model=model, ablation=ablation, quick=quick,
                                          quiet=as_json, mini=mini), config)
            if as_json:
                _print_json(result)

    @app.command("ask")
    def ask_command(
        question: str = typer.Argument(..., help="The question, in quotes."),
        graph: Path = typer.Option(..., "--graph", help="Graph store folder (glmcot graph import / glmcot data synth)."),
        model: Optional[str] = typer.Option(None, "--model", help="Local checkpoint folder for the native engine, or glmcot-mini (glmcot train-mini builds it)."),
        llm: Optional[str] = typer.Option(None, "--llm", help="OpenAI-compatible server URL, e.g. http://localhost:8000/v1 [env GLMCOT_LLM]."),
        llm_model: Optional[str] = typer.Option(None, "--llm-model", help=_LLM_MODEL_HELP),
        llm_api_key: Optional[str] = typer.Option(None, "--llm-api-key", help=_LLM_API_KEY_HELP),
        llm_timeout: Optional[float] = typer.Option(None, "--llm-timeout", help=_TIMEOUT_HELP),
        llm_retries: Optional[int] = typer.Option(None, "--llm-retries", help=_RETRIES_HELP),
        method: str = typer.Option("glm", help="glm, graphcot (faithful to the original) or graphcot-repaired."),
        trace: bool = typer.Option(False, "--trace", help="Also print the agents' steps: calls, snippets, facts, tokens, time."),
        max_steps: Optional[int] = typer.Option(None, help="Step limit of the agent [default 10]."),
        device: Optional[str] = typer.Option(None, help="Native engine device: auto, cpu, cuda."),
        as_json: bool = typer.Option(False, "--json", help="Print the answer and trace as JSON."),
        html: Optional[Path] = typer.Option(None, "--html", help="Also write the trace as a self-contained web page to this file (agent calls with cache bars, snippets, notebook, the subgraph drawn); opens offline."),
        scripted: bool = typer.Option(False, "--scripted", help="The scripted policy answers from the question's gold plan (no model: shows the system, not model accuracy). The question must be in --questions (by text or qid)."),
        questions: Optional[Path] = typer.Option(None, "--questions", help="With --scripted: the questions.jsonl holding the gold plans [default: GRAPH/questions.jsonl]."),
        constrained: bool = typer.Option(False, "--constrained", help="Constrained decoding (beyond the paper): each agent's reply decoded under its grammar, relations and features from the graph's schema (native engine; vLLM structured outputs when the server takes them)."),
        question_spans: bool = typer.Option(False, "--question-spans", help="With --constrained: RetrieveNode's text must be a span of the question (native engine)."),
        config_file: Optional[Path] = typer.Option(None, "--config", help=_CONFIG_HELP),
    ) -> None:
        """Answer one question over a graph with your model (a local checkpoint or a server), or
        with the scripted policy (--scripted).

        Exit codes: 0 an answer; 1 no answer because the LLM failed (backend_error); 3 no answer
        for another reason (the failure category is printed: unexpected_output, retrieval_error,
        code_error, step_limit...); 2 bad arguments or setup."""
        with _errors():
            from glmcot.eval.ask import ask, ask_exit_code

            if method not in ("glm", "graphcot", "graphcot-repaired"):
                raise typer.BadParameter("choose glm, graphcot or graphcot-repaired", param_hint="--method")
            _backend_choice(model, llm, scripted, llm_model)
            config = _config({"model": model, "llm": llm, "llm_model": llm_model, "llm_api_key": llm_api_key, "max_steps": max_steps,
                              "device": device, "llm_timeout": llm_timeout, "llm_retries": llm_retries},
                             config_file)
            if not scripted and not config.model and not config.llm:
                raise typer.BadParameter("give --model PATH (local checkpoint, or glmcot-mini), --llm URL "
                                         "(OpenAI-compatible server) or --scripted, or set GLMCOT_MODEL / GLMCOT_LLM")
            if questions is not None and not scripted:
                raise typer.BadParameter("--questions goes with --scripted", param_hint="--questions")
            plans = (questions or graph / "questions.jsonl") if scripted else None
            if question_spans and not constrained:
                raise typer.BadParameter("--question-spans goes with --constrained", param_hint="--question-spans")
            grammar = None
            if constrained and not scripted:
                from glmcot.agents.grammar import GrammarSettings

                grammar = GrammarSettings(question_spans=question_spans)
            data = ask(question, graph, method, config, trace=trace, as_json=as_json, html=html,
                       scripted_questions=plans, grammar=grammar)
            raise typer.Exit(ask_exit_code(data))

    @app.command("eval")
    def eval_command(
        questions: Path = typer.Option(..., "--questions", help="questions.jsonl (glmcot data synth) or a GRBench file."),
        graph: Optional[Path] = typer.Option(None, "--graph", help="Graph store folder (not needed for --method base)."),
        method: str = typer.Option("glm", help="glm, graphcot (faithful to the original), graphcot-repaired (stronger), both (graphcot,glm), base, text-rag, graph-rag; comma-separated for several."),
        model: Optional[str] = typer.Option(None, "--model", help="Local checkpoint, glmcot-mini or random:qwen3:<size> on the native engine."),
        llm: Optional[str] = typer.Option(None, "--llm", help="OpenAI-compatible server URL [env GLMCOT_LLM]."),
        llm_model: Optional[str] = typer.Option(None, "--llm-model", help=_LLM_MODEL_HELP),
        llm_api_key: Optional[str] = typer.Option(None, "--llm-api-key", help=_LLM_API_KEY_HELP),
        llm_timeout: Optional[float] = typer.Option(None, "--llm-timeout", help=_TIMEOUT_HELP),
        llm_retries: Optional[int] = typer.Option(None, "--llm-retries", help=_RETRIES_HELP),
        scripted: bool = typer.Option(False, "--scripted", help="Scripted policy from the gold plans (system measurement, not accuracy); with --llm vllm+glmcot:URL force-decoded through that vLLM server."),
        out: Path = typer.Option(Path("runs/eval"), "--out", help="Folder for <method>.jsonl results and summary.json."),
        limit: Optional[int] = typer.Option(None, min=1, help="Only the first N questions."),
        judge: Optional[bool] = typer.Option(None, "--judge/--no-judge", help="LLM judge (GPT4score protocol); default on unless --scripted."),
        judge_llm: Optional[str] = typer.Option(None, "--judge-llm", help="Judge server URL (default: the answering backend)."),
        judge_model: Optional[str] = typer.Option(None, "--judge-model", help="Judge model name on that server (named in the report)."),
        judge_rule: Optional[str] = typer.Option(None, "--judge-rule", help="original (GPT4score: only exactly 'Yes' scores 1) or lenient (glmcot's prompt, labelled) [default original]."),
        fresh: bool = typer.Option(False, "--fresh", help="Start over instead of resuming from the results files."),
        concurrency: Optional[int] = typer.Option(None, help="Questions in flight [default 4]."),
        price_input: Optional[float] = typer.Option(None, help="$ per million uncached prompt tokens [default 75, GPT-4.5]."),
        price_cached_input: Optional[float] = typer.Option(None, help="$ per million cached prompt tokens [default 37.5]."),
        price_output: Optional[float] = typer.Option(None, help="$ per million output tokens [default 150]."),
        as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
        html: Optional[Path] = typer.Option(None, "--html", help="Also write each question answered now as a self-contained trace page: DIR/<method>/<qid>.html, and DIR/<method>/index.html."),
        config_file: Optional[Path] = typer.Option(None, "--config", help=_CONFIG_HELP),
    ) -> None:
        """Accuracy (ROUGE-L, EM, LLM judge) and cost of methods on a question file; resumable.

        Results are JSON Lines per method (Graph-CoT's fields plus metrics and costs) and
        summary.json; a rerun skips the questions already answered.
        """
        with _errors():
            from glmcot.eval.evaluate import EvalOptions, evaluate

            methods = _parse_methods(method)
            choice = _backend_choice(model, llm, scripted, llm_model)
            config = _config({"model": model, "llm": llm, "llm_model": llm_model, "llm_api_key": llm_api_key, "concurrency": concurrency,
                              "llm_timeout": llm_timeout, "llm_retries": llm_retries,
                              "judge_llm": judge_llm, "judge_model": judge_model, "judge_rule": judge_rule,
                              "price_input": price_input,
                              "price_cached_input": price_cached_input, "price_output": price_output}, config_file)
            if not choice and not config.model and not config.llm:
                raise typer.BadParameter("give one of --model, --llm or --scripted (or set GLMCOT_MODEL / GLMCOT_LLM)")
            if graph is None and any(m != "base" for m in methods):
                raise typer.BadParameter(f"--graph is needed for {', '.join(m for m in methods if m != 'base')}",
                                         param_hint="--graph")
            from glmcot.runs import RunInterrupted

            try:
                result = evaluate(EvalOptions(questions=questions, graph=graph, methods=methods, scripted=scripted,
                                              out=out, limit=limit, judge=(not scripted) if judge is None else judge,
                                              resume=not fresh, quiet=as_json, html=html), config)
            except RunInterrupted as stopped:
                from rich.console import Console

                Console(stderr=True).print(
                    f"[bold yellow]interrupted:[/] {stopped.name}: {stopped.saved} of {stopped.total} answers "
                    f"are saved in {stopped.path}; run the same command again (without --fresh) to resume "
                    "from there", highlight=False)
                raise typer.Exit(130) from None
            if as_json:
                _print_json(result)

    @app.command("bench", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def bench_command(
        context: typer.Context,
        which: str = typer.Argument("all", help=f"One of {', '.join(BENCHES)}. Arguments after `--` go to "
                                                "the benchmark itself (see `python -m glmcot.benchmarks.NAME --help`)."),
        quick: bool = typer.Option(False, "--quick", help="A small run of each benchmark."),
        out: Path = typer.Option(Path("runs/bench"), "--out", help="Folder for the JSON results."),
        model: str = typer.Option("random:qwen3:small", help="Engine model for the ablation (random:qwen3:<size> or a checkpoint dir)."),
        questions: Optional[int] = typer.Option(None, "--questions", "-n", min=1, help="Ablation: questions per domain [shared-vertices 24, 8 with --quick; templates 8, 3 with --quick]."),
        domains: Optional[str] = typer.Option(None, help="Ablation: comma-separated domains [shared-vertices: dblp; templates: all five, dblp,amazon with --quick]."),
        concurrency: Optional[int] = typer.Option(None, help="Ablation: questions in flight [default 4]."),
        repeats: int = typer.Option(1, min=1, help="Ablation: run the variants this many times, order alternating, pooled."),
        workload: str = typer.Option("shared-vertices", help="Ablation: shared-vertices (a few hot entities asked about "
                                     "several times, so vertex reuse, eviction and the caches act; dblp, 24 questions, "
                                     "KV pool 12,288 tokens) or templates (one question per template in turn; "
                                     "all five domains, 8 each, KV pool 8,192 tokens)."),
        as_json: bool = typer.Option(False, "--json", help="Print the collected results as JSON."),
        config_file: Optional[Path] = typer.Option(None, "--config", help=_CONFIG_HELP),
    ) -> None:
        """Run a benchmark (each prints a table and writes JSON), all of the main ones, or the ablation.

        `ablation` runs GLM with each co-design feature off in turn and Graph-CoT on an LRU
        prefix-cached engine, on the same questions.
        """
        with _errors():
            if which not in BENCHES:
                raise typer.BadParameter(f"unknown benchmark {which!r}; choose from {', '.join(BENCHES)}",
                                         param_hint="WHICH")
            chosen = None
            if domains is not None:
                chosen = [d.strip() for d in domains.split(",") if d.strip()]
                unknown = [d for d in chosen if d not in DOMAINS]
                if unknown or not chosen:
                    raise typer.BadParameter(f"unknown domain(s) {', '.join(unknown) or '(none)'}; choose from "
                                             f"{', '.join(DOMAINS)}", param_hint="--domains")
            from glmcot.eval.workload import WORKLOADS

            if workload not in WORKLOADS:
                raise typer.BadParameter(f"unknown workload {workload!r}; choose from {', '.join(WORKLOADS)}",
                                         param_hint="--workload")
            config = _config({"concurrency": concurrency}, config_file)
            from glmcot.eval.bench import run_bench

            if context.args and which in ("all", "ablation"):
                raise typer.BadParameter(f"extra arguments go to one benchmark, not to {which!r}: "
                                         f"{' '.join(context.args)}", param_hint="WHICH")
            result = run_bench(which, quick=quick, out=out, model=model, questions=questions, config=config,
                               quiet=as_json, domains=chosen, repeats=repeats, args=list(context.args),
                               workload=workload)
            if as_json:
                _print_json(result)
