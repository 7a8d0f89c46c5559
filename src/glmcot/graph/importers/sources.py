"""Which importer reads a source: GRBench JSON, tables (CSV/Parquet, Neo4j and APOC exports) or
RDF (N-Triples, Turtle, N-Quads, TriG, RDF/XML, JSON-LD)."""

from __future__ import annotations

import os
from dataclasses import asdict
from enum import Enum
from pathlib import Path

from glmcot.graph.importers.loading import DEFAULT_REVERSE_SUFFIX, ProgressCallback
from glmcot.graph.importers.tables import TABLE_SUFFIXES


class SourceFormat(str, Enum):
    AUTO = "auto"
    JSON = "json"
    TABLES = "tables"
    TRIPLES = "triples"  # RDF, its syntax from the file's extension
    NTRIPLES = "ntriples"
    TURTLE = "turtle"
    NQUADS = "nquads"
    TRIG = "trig"
    RDFXML = "rdfxml"
    JSONLD = "jsonld"


RDF_SYNTAXES = (SourceFormat.NTRIPLES, SourceFormat.TURTLE, SourceFormat.NQUADS, SourceFormat.TRIG, SourceFormat.RDFXML,
                SourceFormat.JSONLD)
TRIPLE_SUFFIXES = (".nt", ".nt.gz", ".ntriples")
RDF_FILE_SUFFIXES = tuple(suffix + gz for suffix in (".nt", ".ntriples", ".ttl", ".turtle", ".nq", ".nquads", ".trig",
                                                      ".rdf", ".owl", ".jsonld", ".json-ld") for gz in ("", ".gz"))


def detect_format(paths: list[Path]) -> SourceFormat:
    """The format of the sources, from their names (a folder is tables)."""
    kinds = set()
    for path in paths:
        name = path.name.lower()
        if path.is_dir() or name.endswith(TABLE_SUFFIXES):
            kinds.add(SourceFormat.TABLES)
        elif name.endswith(RDF_FILE_SUFFIXES):
            kinds.add(SourceFormat.TRIPLES)
        elif name.endswith((".json", ".json.gz")):
            kinds.add(SourceFormat.JSON)
        else:
            raise ValueError(f"cannot tell the format of {path}; pass --format json, tables, triples or an RDF syntax "
                             f"({', '.join(kind.value for kind in RDF_SYNTAXES)})")
    if len(kinds) != 1:
        raise ValueError(f"sources mix formats ({', '.join(sorted(kind.value for kind in kinds))}); import one format at a time")
    kind = kinds.pop()
    if kind is not SourceFormat.TABLES and len(paths) != 1:
        raise ValueError(f"{kind.value} imports read one file, got {len(paths)}")
    return kind


def import_source(
    paths: list[str | os.PathLike],
    out_dir: str | os.PathLike,
    source_format: SourceFormat = SourceFormat.AUTO,
    overwrite: bool = False,
    batch_size: int = 20_000,
    reverse_suffix: str = DEFAULT_REVERSE_SUFFIX,
    text_keys: dict[str, str] | None = None,
    text_predicate: str | None = None,
    id_prefix: str = "",
    progress: ProgressCallback | None = None,
    max_depth: int | None = None,
    max_expansion: int | None = None,
    lang: str | None = None,
) -> dict:
    """Import ``paths`` into a store; returns the report as a dict (the same keys for every format)."""
    paths = [Path(path) for path in paths]
    for path in paths:
        if not path.exists():
            raise FileNotFoundError(f"no such file or folder: {path}")
    replaced = _check_output(paths, Path(out_dir), overwrite)
    kind = detect_format(paths) if source_format is SourceFormat.AUTO else SourceFormat(source_format)
    if kind in RDF_SYNTAXES and len(paths) != 1:
        raise ValueError(f"RDF imports read one file, got {len(paths)}")
    result = _import(paths, out_dir, kind, overwrite, batch_size, reverse_suffix, text_keys, text_predicate, id_prefix,
                     progress, max_depth, max_expansion, lang)
    if replaced is not None:
        result["replaced"] = replaced
    return result


def _check_output(paths: list[Path], out_dir: Path, overwrite: bool) -> dict | None:
    """What an import at ``out_dir`` replaces (None: nothing). Only a glmcot store is replaced,
    and never one holding or being the import's own source."""
    from glmcot.graph.storage.writer import store_manifest

    out = out_dir.resolve()
    for path in paths:
        source = path.resolve()
        if source == out or out in source.parents:
            raise ValueError(f"--out {out_dir} is or holds the import's source {path}; choose another output folder")
    if not out_dir.exists():
        return None
    if not overwrite:
        raise FileExistsError(f"{out_dir} exists; pass --force to replace the store there")
    manifest = store_manifest(out_dir)
    if manifest is None:
        raise FileExistsError(f"{out_dir} exists and is not a glmcot store (no glmcot manifest.json); --force "
                              f"replaces only a store: choose another --out or remove the folder yourself")
    return {"path": str(out_dir), "store_id": manifest.get("store_id"), "nodes": manifest.get("num_nodes"),
            "edges": manifest.get("num_edges"), "created": manifest.get("created")}


def _import(paths, out_dir, kind, overwrite, batch_size, reverse_suffix, text_keys, text_predicate, id_prefix,
            progress, max_depth, max_expansion, lang) -> dict:
    if kind is SourceFormat.JSON:
        from glmcot.graph.importers.importer import import_graph_json

        depth = {} if max_depth is None else {"max_depth": max_depth}
        report = import_graph_json(paths[0], out_dir, overwrite=overwrite, batch_size=batch_size, progress=progress,
                                   **depth)
        result = dict(report.__dict__)
        result.setdefault("format", "grbench-json")
        result.setdefault("input_bytes", paths[0].stat().st_size)
        return result
    if kind is SourceFormat.TABLES:
        from glmcot.graph.importers.tables import import_tables

        return asdict(import_tables(paths, out_dir, overwrite=overwrite, batch_rows=max(batch_size, 1024),
                                    reverse_suffix=reverse_suffix, text_keys=text_keys, progress=progress))
    from glmcot.graph.importers.triples import DEFAULT_LANG, DEFAULT_MAX_EXPANSION, import_triples

    return asdict(import_triples(paths[0], out_dir, overwrite=overwrite, text_predicate=text_predicate or None,
                                 id_prefix=id_prefix, reverse_suffix=reverse_suffix, progress=progress,
                                 max_expansion=DEFAULT_MAX_EXPANSION if max_expansion is None else max_expansion,
                                 rdf_format=None if kind is SourceFormat.TRIPLES else kind.value,
                                 lang=lang or DEFAULT_LANG))


__all__ = ["SourceFormat", "detect_format", "import_source", "TRIPLE_SUFFIXES", "RDF_FILE_SUFFIXES", "RDF_SYNTAXES"]
