"""Graph import and update benchmark: import throughput per format, update and read latency.

One synthetic graph (``--nodes`` papers and authors, ``--edges`` edges, titles and years) is
written as a GRBench graph.json, as CSV tables, as Parquet tables and as N-Triples; each is
imported in the same run (rows/s counts nodes + edges, or triples; MB/s the input bytes). Then
deltas of 1 % and 10 % of the nodes (feature upserts, renamed titles, added edges) are applied
to copies of the store: update latency, read latency of the primitives on the merged version
against the compacted store, and the compaction time.

    python -m glmcot.benchmarks.graph_update                       # 1e5 nodes, 1e6 edges
    python -m glmcot.benchmarks.graph_update --nodes 20000 --edges 100000 --out runs/graph_update.json
"""

from __future__ import annotations

from glmcot.offline import stay_offline

import argparse
import json
import platform
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from glmcot.graph.tools.chunks import render_chunk_at
from glmcot.graph.updates.delta import Operation
from glmcot.graph.importers.importer import import_graph_json
from glmcot.graph.importers.sources import SourceFormat, import_source
from glmcot.graph.storage.store import Graph
from glmcot.graph.updates.versions import apply_update, compact

EX = "http://example.org/"


def make_graph(nodes: int, edges: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    papers = nodes * 3 // 4
    authors = nodes - papers
    src = rng.integers(0, papers, size=edges)
    dst = papers + rng.integers(0, authors, size=edges)
    return {"papers": papers, "authors": authors, "src": src, "dst": dst,
            "years": rng.integers(1970, 2025, size=papers)}


def node_id(index: int, papers: int) -> str:
    return f"p{index}" if index < papers else f"a{index - papers}"


def write_json(graph: dict, path: Path) -> None:
    papers = graph["papers"]
    order = np.argsort(graph["src"], kind="stable")
    src, dst = graph["src"][order], graph["dst"][order]
    bounds = np.searchsorted(src, np.arange(papers + 1))
    with open(path, "w", encoding="utf-8") as out:
        out.write('{"paper_nodes": {')
        for index in range(papers):
            targets = [f'"a{value - papers}"' for value in dst[bounds[index]:bounds[index + 1]].tolist()]
            out.write(("," if index else "") + f'"p{index}": {{"features": {{"title": "Paper number {index}", '
                      f'"year": {int(graph["years"][index])}}}, "neighbors": {{"author": [{",".join(targets)}]}}}}')
        out.write('}, "author_nodes": {')
        for index in range(graph["authors"]):
            out.write(("," if index else "") + f'"a{index}": {{"features": {{"name": "Author {index}"}}, "neighbors": {{}}}}')
        out.write("}}")


def write_tables(graph: dict, folder: Path, fmt: str) -> None:
    folder.mkdir()
    papers, authors = graph["papers"], graph["authors"]
    tables = {
        "paper": pa.table({":ID": [f"p{i}" for i in range(papers)], "title": [f"Paper number {i}" for i in range(papers)],
                           "year:int": graph["years"].astype(np.int64)}),
        "author": pa.table({":ID": [f"a{i}" for i in range(authors)], "name": [f"Author {i}" for i in range(authors)]}),
        "author_edges": pa.table({":START_ID": [f"p{i}" for i in graph["src"].tolist()],
                                  ":END_ID": [f"a{i - papers}" for i in graph["dst"].tolist()],
                                  ":TYPE": pa.array(["author"] * len(graph["src"]))}),
    }
    for name, table in tables.items():
        if fmt == "csv":
            pa_csv.write_csv(table, folder / f"{name}.csv", pa_csv.WriteOptions(quoting_style="needed"))
        else:
            pq.write_table(table, folder / f"{name}.parquet")


def write_triples(graph: dict, path: Path) -> None:
    papers = graph["papers"]
    rdf_type = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
    with open(path, "w", encoding="utf-8") as out:
        for index in range(papers):
            out.write(f'<{EX}p{index}> {rdf_type} <{EX}paper> .\n<{EX}p{index}> <{EX}title> "Paper number {index}" .\n'
                      f'<{EX}p{index}> <{EX}year> "{int(graph["years"][index])}"^^<http://www.w3.org/2001/XMLSchema#integer> .\n')
        for index in range(graph["authors"]):
            out.write(f'<{EX}a{index}> {rdf_type} <{EX}author> .\n<{EX}a{index}> <{EX}name> "Author {index}" .\n')
        for source, target in zip(graph["src"].tolist(), graph["dst"].tolist()):
            out.write(f"<{EX}p{source}> <{EX}author> <{EX}a{target - papers}> .\n")


def size_of(path: Path) -> int:
    return path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def operations(graph: dict, fraction: float, seed: int) -> list[Operation]:
    rng = np.random.default_rng(seed)
    papers, authors = graph["papers"], graph["authors"]
    count = max(1, int((papers + authors) * fraction))
    chosen = rng.choice(papers, size=count, replace=count > papers)
    ops = []
    for number, index in enumerate(chosen.tolist()):
        if number % 2:
            ops.append(Operation("upsert_node", id=f"p{index}", features={"year": 2030}, where="bench"))
        else:
            ops.append(Operation("upsert_node", id=f"p{index}", features={"title": f"Renamed paper {index}"}, where="bench"))
        ops.append(Operation("upsert_edge", source=f"p{index}", relation="author",
                             target=f"a{int(rng.integers(authors))}", where="bench"))
    return ops


def read_latency(store: Path, graph: dict, samples: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    opened = Graph.open(store)
    ids = [f"p{i}" for i in rng.integers(0, graph["papers"], size=samples).tolist()]
    timings = {}
    started = time.perf_counter()
    for node in ids:
        opened.feature(node, "year")
    timings["feature_us"] = (time.perf_counter() - started) / samples * 1e6
    started = time.perf_counter()
    for node in ids:
        opened.neighbors(node, "author")
    timings["neighbours_us"] = (time.perf_counter() - started) / samples * 1e6
    started = time.perf_counter()
    for node in ids[: max(samples // 10, 1)]:
        render_chunk_at(opened, opened.index(node))
    timings["chunk_us"] = (time.perf_counter() - started) / max(samples // 10, 1) * 1e6
    return {key: round(value, 2) for key, value in timings.items()}


def main(argv: list[str] | None = None) -> None:
    stay_offline()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--edges", type=int, default=1_000_000)
    parser.add_argument("--samples", type=int, default=20_000, help="reads per latency figure")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    parser.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.work is not None:
        args.work.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="graph-update-", dir=args.work))
    try:
        graph = make_graph(args.nodes, args.edges)
        sources = {"json": work / "graph.json", "csv": work / "csv", "parquet": work / "parquet", "triples": work / "graph.nt"}
        write_json(graph, sources["json"])
        write_tables(graph, sources["csv"], "csv")
        write_tables(graph, sources["parquet"], "parquet")
        write_triples(graph, sources["triples"])
        results: dict = {"nodes": args.nodes, "edges": args.edges, "machine": platform.platform(),
                         "date": time.strftime("%Y-%m-%d"), "imports": {}, "updates": {}}
        for name, source in sources.items():
            out = work / f"store-{name}"
            started = time.perf_counter()
            if name == "json":
                report = import_graph_json(source, out).__dict__
                rows = args.nodes + args.edges
            else:
                fmt = SourceFormat.TRIPLES if name == "triples" else SourceFormat.TABLES
                report = import_source([source], out, fmt, id_prefix=EX)
                rows = report["rows"]
            seconds = time.perf_counter() - started
            mb = size_of(source) / 1e6
            results["imports"][name] = {"seconds": round(seconds, 2), "input_mb": round(mb, 1), "rows": rows,
                                        "rows_per_s": round(rows / seconds), "mb_per_s": round(mb / seconds, 1),
                                        "nodes": report["nodes"], "edges": report["edges"]}
            print(name, results["imports"][name], flush=True)
        base = work / "store-parquet"
        results["updates"]["compacted_read"] = read_latency(base, graph, args.samples, 1)
        for fraction in (0.01, 0.10):
            store = work / f"update-{fraction}"
            shutil.copytree(base, store)
            ops = operations(graph, fraction, 2)
            started = time.perf_counter()
            result = apply_update(store, ops, auto_compact_bytes=0)  # measures reads over the whole delta
            update_s = time.perf_counter() - started
            merged = read_latency(store, graph, args.samples, 1)
            delta_mb = size_of(store / "deltas") / 1e6
            started = time.perf_counter()
            compact(store)
            compact_s = time.perf_counter() - started
            entry = {"operations": len(ops), "update_s": round(update_s, 2), "ops_per_s": round(len(ops) / update_s),
                     "delta_mb": round(delta_mb, 2), "merged_read": merged,
                     "compact_s": round(compact_s, 2), "compacted_read": read_latency(store, graph, args.samples, 1),
                     "version": result.version}
            results["updates"][f"{fraction:.0%}"] = entry
            print(f"delta {fraction:.0%}", entry, flush=True)
        text = json.dumps(results, indent=1)
        print(text)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(text + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
