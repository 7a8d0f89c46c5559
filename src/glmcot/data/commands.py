"""`glmcot data ...` commands: synthetic datasets, GRBench question files, plan replay."""

from __future__ import annotations

import json
from collections import Counter
from enum import Enum
from pathlib import Path

import typer

app = typer.Typer(rich_markup_mode=None, help="Benchmark data: synthetic GRBench-schema domains and GRBench questions.",
                  no_args_is_help=True)


class OutputFormat(str, Enum):
    store = "store"
    grbench = "grbench"
    both = "both"


def _fail(message: str) -> None:
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(2)


@app.command()
def synth(
    domain: str = typer.Option(..., "--domain", "-d",
                               help="dblp, amazon, goodreads, biomedical or legal (aliases: academic, "
                                    "e-commerce, literature, healthcare)."),
    out: Path = typer.Option(..., "--out", "-o", help="Output directory (graph/, questions.jsonl, meta.json)."),
    scale: str = typer.Option("tiny", "--scale", "-s",
                              help="tiny (~1k nodes), small (1e5 edges), medium (1e6), large (1e7), "
                                   "or a number of edges such as 3e6."),
    seed: int = typer.Option(0, "--seed", help="Random seed; the same command gives byte-identical files."),
    questions_per_template: int = typer.Option(10, "--questions-per-template", "-q",
                                               help="Questions per template (GRBench uses 10)."),
    output_format: OutputFormat = typer.Option(OutputFormat.store, "--format",
                                               help="store: the project's graph store in graph/; "
                                                    "grbench: GRBench graph.json; both."),
    wordings: str = typer.Option("all", "--wordings",
                                 help="Which question wordings: all; seen (every wording but each template's last, "
                                      "for training); held-out (only the last, to test on phrasings never trained on)."),
    force: bool = typer.Option(False, "--force", help="Replace a non-empty output directory."),
    as_json: bool = typer.Option(False, "--json", help="Print meta.json to stdout instead of a summary."),
) -> None:
    """Generate a synthetic domain graph with template questions, gold answers and gold plans."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from glmcot.data.schemas import UnknownDomainError
    from glmcot.data.synth.generate import SynthConfig, generate

    formats = ("store", "grbench") if output_format == OutputFormat.both else (output_format.value,)
    try:
        config = SynthConfig(domain, scale, seed, questions_per_template, formats, wordings)
    except (UnknownDomainError, ValueError) as exc:
        _fail(str(exc))
    console = Console(stderr=True)
    with Progress(TextColumn("{task.description:<12}"), BarColumn(), TextColumn("{task.completed:,}/{task.total:,}"),
                  TimeElapsedColumn(), console=console, transient=as_json) as bar:
        tasks: dict[str, int] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)
        try:
            meta = generate(config, out, force=force, progress=progress)
        except (FileExistsError, ValueError) as exc:
            _fail(str(exc))
    if as_json:
        typer.echo(json.dumps(meta, indent=1))
        return
    counts = meta["counts"]
    typer.echo(f"{config.domain}: {counts['nodes']:,} nodes, {counts['edges']:,} edges, "
               f"{counts['questions']} questions in {len(counts['questions_per_template'])} templates -> {out}")


@app.command()
def grbench(
    paths: list[Path] = typer.Argument(..., help="GRBench question files (JSON Lines {qid, question, answer})."),
    domain: str = typer.Option(None, "--domain", help="Domain, when the file name does not say it."),
    out: Path = typer.Option(None, "--out", "-o", help="Write the questions with template and level as JSON Lines."),
    as_json: bool = typer.Option(False, "--json", help="Print counts as JSON."),
) -> None:
    """Load GRBench question files and assign template and level from the qid blocks."""
    from glmcot.data.grbench import load_grbench
    from glmcot.data.questions import QuestionFormatError, write_questions
    from glmcot.data.schemas import UnknownDomainError

    records = []
    try:
        for path in paths:
            records.extend(load_grbench(path, domain))
    except (FileNotFoundError, QuestionFormatError, UnknownDomainError) as exc:
        _fail(str(exc))
    summary: dict[str, dict] = {}
    for record in records:
        entry = summary.setdefault(record.domain, {"questions": 0, "levels": Counter(), "templates": Counter()})
        entry["questions"] += 1
        entry["levels"][record.level] += 1
        entry["templates"][record.template] += 1
    if out is not None:
        write_questions(out, records)
    if as_json:
        typer.echo(json.dumps({d: {"questions": v["questions"], "levels": dict(v["levels"]),
                                   "templates": len(v["templates"])} for d, v in summary.items()}, indent=1))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("domain", "questions", "templates", "easy", "medium", "hard")
    for name, v in summary.items():
        table.add_row(name, str(v["questions"]), str(len(v["templates"])),
                      *(str(v["levels"].get(level, 0)) for level in ("easy", "medium", "hard")))
    Console().print(table)


@app.command()
def replay(
    dataset: Path = typer.Argument(..., help="A directory written by `glmcot data synth` (graph/ and questions.jsonl)."),
    oracle: bool = typer.Option(False, "--oracle", help="Exact retrieval (each question's gold nodes) instead of vector search."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Run every gold plan through the primitives and report the share reproducing the gold answer."""
    from rich.console import Console
    from rich.table import Table

    from glmcot.data.questions import read_questions
    from glmcot.data.replay import EntityOracle, prefetch
    from glmcot.data.replay import replay as run_replay
    from glmcot.graph.tools.primitives import GraphTools
    from glmcot.graph.storage.store import Graph

    store, questions = dataset / "graph", dataset / "questions.jsonl"
    if not store.is_dir() or not questions.is_file():
        _fail(f"{dataset} needs graph/ and questions.jsonl (run `glmcot data synth --format store`)")
    graph = Graph.open(store)
    records = read_questions(questions)
    if oracle:
        retriever = EntityOracle()
    else:
        from glmcot.graph.index.retrieval import MiniLMEmbedder, NodeRetriever, build_node_index

        embedder = MiniLMEmbedder()
        if not (store / "retrieval" / "meta.json").is_file():
            Console(stderr=True).print(f"embedding {graph.num_nodes:,} nodes for RetrieveNode ...")
            build_node_index(graph, embedder)
        retriever = NodeRetriever.open(graph, embedder=embedder)
        prefetch(retriever, records)
    report = run_replay(records, GraphTools(graph, retriever), retriever if oracle else None)
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=1))
        return
    table = Table("template", "questions", "GLM plan correct", "share", "Graph-CoT plan ran")
    for name, t in report.templates.items():
        table.add_row(name, str(t.total), str(t.glm_correct), f"{t.share:.0%}", str(t.graphcot_ran))
    Console().print(table)
    typer.echo(f"total: {report.correct}/{report.total} gold plans reproduce the gold answer")


@app.command()
def schema(
    domain: str = typer.Argument(..., help="Domain code or alias."),
    as_json: bool = typer.Option(False, "--json", help="Print the schema as JSON."),
) -> None:
    """Show a domain's node types, features, relations and graph definition."""
    from dataclasses import asdict

    from glmcot.data.schemas import UnknownDomainError, load_schema

    try:
        s = load_schema(domain)
    except UnknownDomainError as exc:
        _fail(str(exc))
    if as_json:
        typer.echo(json.dumps(asdict(s), indent=1))
        return
    typer.echo(s.definition)
    for name, t in s.node_types.items():
        typer.echo(f"- {name} (text: {t.text_key}): features {', '.join(t.features)}; "
                   f"relations {', '.join(f'{r}->{v}' for r, v in t.relations.items())}")


@app.command()
def movies(
    out: Path = typer.Argument(..., help="Folder to write tables/ (Neo4j-style CSV), movies.nt, questions.jsonl and README.txt into."),
    count: int = typer.Option(40, "--movies", min=3, help="Number of movies."),
    people: int = typer.Option(30, "--people", min=5, help="Number of people (directors and actors)."),
    questions: int = typer.Option(6, "--questions", min=1, help="Questions with gold plans (for the scripted policy)."),
    seed: int = typer.Option(7, help="Random seed (the same seed writes the same files)."),
    as_json: bool = typer.Option(False, "--json", help="Print the written paths and the import commands as JSON."),
) -> None:
    """Write an example movies graph as CSV tables and as N-Triples, to try `glmcot graph import` on."""
    from glmcot.data.movies import write_example

    result = write_example(out, movies=count, people=people, seed=seed, count=questions)
    if as_json:
        typer.echo(json.dumps(result))
        return
    typer.echo(f"wrote {result['tables']}, {result['triples']} and {result['questions']}; next:")
    for command in result["commands"]:
        typer.echo(f"  {command}")
