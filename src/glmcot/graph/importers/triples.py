"""Import RDF (N-Triples, Turtle, N-Quads, TriG, RDF/XML, JSON-LD; plain or gzip) into a store,
parsed by pyoxigraph while streaming.

The rule (docs/graph-formats.md):

- the syntax comes from the file's extension (``.nt``, ``.ttl``, ``.nq``, ``.trig``, ``.rdf``/
  ``.owl``, ``.jsonld``, each optionally ``.gz``) or ``rdf_format``; a quad's graph name is
  ignored (the graphs of a dataset are read as one graph);
- every IRI or blank node in subject or object position is a node; its id is the IRI (without
  ``id_prefix`` where it starts with it) or ``_:label`` for a blank node;
- ``rdf:type`` gives the node's type, the local name of its first type IRI in file order (further
  types are kept in the feature ``types``); a node without one has the type ``Resource``;
- a triple with a literal object is a feature named by the predicate's local name (the part
  after the last ``#`` or ``/``), typed by its datatype (xsd integers → int, decimals, floats and
  doubles → float, boolean → bool, anything else → text); several values make a list; an empty
  literal is no value; a language-tagged literal is kept only in the ``lang`` language (default
  ``en``; untagged literals are always kept; ``*`` keeps every language);
- a triple with an IRI or blank-node object is an edge whose relation is the predicate's local
  name; with ``reverse_suffix`` (default ``_reverse``) each edge is also stored backwards;
- predicates with one local name in different namespaces (``dbo:spouse``, ``dbp:spouse``) are
  merged into one relation or feature, deduplicated (one neighbour per fact); the import report
  lists them under ``merged_predicates``;
- each type's text key is the first label predicate it has (``text_predicate`` if given, then
  ``rdfs:label``, ``skos:prefLabel``, ``schema:name``, ``foaf:name``), else the rule of
  graph/importers/text_keys.py;
- an RDF graph is a set: identical triples count once (the import reports how many it dropped);
- a ``.gz`` may expand to at most ``max_expansion`` (default 200) times its size, past the
  first 256 MiB (``--max-expansion``; 0: no bound), so a gzip bomb stops with a clear error.

Triples arrive in any order, so one pass keeps the graph's ids, features and edges in memory
(about the size of the store) and writes the store type by type at the end; the file is read
once. A malformed line stops the import with the file, line and column.
"""

from __future__ import annotations

import gzip
import os
import time
from array import array
from pathlib import Path
from typing import Any

import numpy as np
import pyoxigraph as ox

from glmcot.graph.errors import GraphFormatError
from glmcot.graph.importers.loading import DEFAULT_REVERSE_SUFFIX, CountingReader, import_paths, ImportSummary, ProgressCallback, TypeRanges, add_grouped_edges
from glmcot.graph.importers.text_keys import TextKeyChoice, choose_text_key
from glmcot.graph.storage.writer import StoreWriter

RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
LABEL_PREDICATES = (
    RDFS_LABEL,
    "http://www.w3.org/2004/02/skos/core#prefLabel",
    "http://schema.org/name",
    "https://schema.org/name",
    "http://xmlns.com/foaf/0.1/name",
)
DEFAULT_LANG = "en"
RDF_SUFFIXES = {
    ".nt": ox.RdfFormat.N_TRIPLES, ".ntriples": ox.RdfFormat.N_TRIPLES, ".ttl": ox.RdfFormat.TURTLE,
    ".turtle": ox.RdfFormat.TURTLE, ".nq": ox.RdfFormat.N_QUADS, ".nquads": ox.RdfFormat.N_QUADS,
    ".trig": ox.RdfFormat.TRIG, ".rdf": ox.RdfFormat.RDF_XML, ".owl": ox.RdfFormat.RDF_XML,
    ".xml": ox.RdfFormat.RDF_XML, ".jsonld": ox.RdfFormat.JSON_LD, ".json-ld": ox.RdfFormat.JSON_LD,
}
RDF_FORMAT_NAMES = {
    "ntriples": ox.RdfFormat.N_TRIPLES, "turtle": ox.RdfFormat.TURTLE, "nquads": ox.RdfFormat.N_QUADS,
    "trig": ox.RdfFormat.TRIG, "rdfxml": ox.RdfFormat.RDF_XML, "jsonld": ox.RdfFormat.JSON_LD,
}


def rdf_format_of(path: Path, name: str | None = None) -> ox.RdfFormat:
    """The RDF syntax of ``path``: ``name`` (ntriples, turtle, nquads, trig, rdfxml, jsonld) if
    given, else its extension (a trailing ``.gz`` aside)."""
    if name:
        try:
            return RDF_FORMAT_NAMES[name]
        except KeyError:
            raise GraphFormatError(f"unknown RDF format {name!r}; one of {', '.join(RDF_FORMAT_NAMES)}") from None
    lowered = path.name.lower().removesuffix(".gz")
    for suffix, rdf_format in RDF_SUFFIXES.items():
        if lowered.endswith(suffix):
            return rdf_format
    raise GraphFormatError(f"{path}: cannot tell its RDF syntax from the name; pass --format "
                           f"({', '.join(RDF_FORMAT_NAMES)})")


def keeps_language(language: str | None, lang: str) -> bool:
    """Whether a literal tagged ``language`` is kept when importing in ``lang`` (untagged: always)."""
    if not language or lang == "*":
        return True
    language, lang = language.lower(), lang.lower()
    return language == lang or language.startswith(lang + "-")
XSD = "http://www.w3.org/2001/XMLSchema#"
DEFAULT_TYPE = "Resource"
_INTEGER_TYPES = {XSD + name for name in ("integer", "int", "long", "short", "byte", "nonNegativeInteger", "positiveInteger",
                                           "negativeInteger", "nonPositiveInteger", "unsignedInt", "unsignedLong",
                                           "unsignedShort", "unsignedByte")}
_FLOAT_TYPES = {XSD + name for name in ("decimal", "double", "float")}
_BATCH = 20_000
_INT64 = 2**63


def local_name(iri: str) -> str:
    """The part of an IRI after its last '#', '/' or ':' (the whole IRI if that is empty)."""
    for separator in ("#", "/", ":"):
        head, found, tail = iri.rpartition(separator)
        if found and tail:
            return tail
    return iri


def literal_value(literal: ox.Literal) -> Any:
    datatype = literal.datatype.value
    text = literal.value
    try:
        if datatype in _INTEGER_TYPES:
            value = int(text)
            return value if -_INT64 <= value < _INT64 else text  # beyond 64 bits: keep the digits as text
        if datatype in _FLOAT_TYPES:
            return float(text)
        if datatype == XSD + "boolean":
            if text in ("true", "1"):
                return True
            if text in ("false", "0"):
                return False
    except ValueError:
        pass  # an ill-typed literal keeps its lexical form
    return text


class _Collected:
    """Everything read from the triples, by first-seen node number."""

    def __init__(self, id_prefix: str):
        self.id_prefix = id_prefix
        self.numbers: dict[str, int] = {}
        self.ids: list[str] = []
        self.types: list[int] = []  # type code per node, -1: none yet
        self.type_names: list[str] = []
        self.type_codes: dict[str, int] = {}
        self.extra_types: dict[int, list[str]] = {}
        self.features: dict[str, dict[int, Any]] = {}
        self.src, self.dst, self.relation = array("q"), array("q"), array("q")
        self.relation_names: list[str] = []
        self.relation_codes: dict[str, int] = {}
        self.duplicates = 0  # identical triples: an RDF graph is a set, so they count once
        self.other_languages = 0  # literals tagged with a language other than the import's
        self.empty_literals = 0
        self.predicates: dict[str, dict[str, None]] = {}  # local name -> the predicate IRIs read as it
        self._values: dict[tuple[int, str], set] = {}  # the values of multi-valued features, for duplicates

    def node(self, term) -> int:
        if isinstance(term, ox.BlankNode):
            key = f"_:{term.value}"
        else:
            key = term.value
            if self.id_prefix and key.startswith(self.id_prefix) and len(key) > len(self.id_prefix):
                key = key[len(self.id_prefix) :]
        number = self.numbers.get(key)
        if number is None:
            number = self.numbers[key] = len(self.ids)
            self.ids.append(key)
            self.types.append(-1)
        return number

    def set_type(self, node: int, iri: str) -> None:
        name = local_name(iri)
        if self.types[node] < 0:
            code = self.type_codes.get(name)
            if code is None:
                code = self.type_codes[name] = len(self.type_names)
                self.type_names.append(name)
            self.types[node] = code
            return
        first = self.type_names[self.types[node]]
        if name != first:
            names = self.extra_types.setdefault(node, [first])
            if name not in names:  # a repeated rdf:type triple is one triple
                names.append(name)
            else:
                self.duplicates += 1
        else:
            self.duplicates += 1

    def add_feature(self, node: int, name: str, value: Any) -> None:
        column = self.features.setdefault(name, {})
        if node not in column:
            column[node] = value
            return
        key = (type(value), value)  # 1 and true are different values
        seen = self._values.get((node, name))
        if seen is None:
            first = column[node]
            seen = self._values[(node, name)] = {(type(first), first)}
        if key in seen:
            self.duplicates += 1
            return
        seen.add(key)
        if len(seen) == 2:
            column[node] = [column[node], value]
        else:
            column[node].append(value)

    def add_edge(self, source: int, name: str, target: int) -> None:
        code = self.relation_codes.get(name)
        if code is None:
            code = self.relation_codes[name] = len(self.relation_names)
            self.relation_names.append(name)
        if self.src and self.src[-1] == source and self.dst[-1] == target and self.relation[-1] == code:
            self.duplicates += 1  # a run of one repeated triple never grows memory
            return
        self.src.append(source)
        self.dst.append(target)
        self.relation.append(code)

    def drop_duplicate_edges(self) -> None:
        """Keep the first of identical (source, relation, target) triples, in file order."""
        count = len(self.src)
        if count < 2:
            return
        keys = np.stack([np.frombuffer(self.src, dtype=np.int64), np.frombuffer(self.relation, dtype=np.int64),
                         np.frombuffer(self.dst, dtype=np.int64)], axis=1)
        _, first = np.unique(keys, axis=0, return_index=True)
        if len(first) == count:
            return
        first.sort()
        self.duplicates += count - len(first)
        self.src, self.relation, self.dst = (array("q", keys[first, column].tobytes()) for column in range(3))


DEFAULT_MAX_EXPANSION = 200  # a .nt.gz may expand to this many times its size (past the first 256 MiB)
_EXPANSION_FLOOR = 256 << 20


class _BoundedStream:
    """A decompressed stream that stops, with a clear error, past ``limit`` bytes (a gzip bomb)."""

    def __init__(self, stream, path: Path, compressed: int, max_expansion: int):
        self.stream = stream
        self.path = path
        self.max_expansion = max_expansion
        self.limit = max(_EXPANSION_FLOOR, compressed * max_expansion) if max_expansion > 0 else None
        self.read_bytes = 0

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size)
        self.read_bytes += len(data)
        if self.limit is not None and self.read_bytes > self.limit:
            raise GraphFormatError(
                f"{self.path}: expands to more than {self.limit:,} bytes ({self.max_expansion} times its compressed "
                f"size, at least {_EXPANSION_FLOOR >> 20} MiB); a gzip bomb? Raise --max-expansion to import it anyway")
        return data


def _parse_error(path: Path, error: SyntaxError) -> GraphFormatError:
    message = " ".join(str(error).split())
    return GraphFormatError(f"{path}: line {error.lineno}, column {error.offset}: bad triple: {message}")


def collect_triples(path: Path, text_predicate: str | None = None, id_prefix: str = "",
                    progress: ProgressCallback | None = None,
                    max_expansion: int = DEFAULT_MAX_EXPANSION, rdf_format: str | None = None,
                    lang: str = DEFAULT_LANG) -> tuple[_Collected, int, int]:
    """Read every triple of an RDF file (plain or gzip) by the rule; (collected, triples, bytes).
    Identical triples count once; a .gz that expands past ``max_expansion`` times its size (0: no
    bound) stops the import."""
    total = path.stat().st_size
    syntax = rdf_format_of(path, rdf_format)
    collected = _Collected(id_prefix)
    text_predicate = text_predicate or RDFS_LABEL
    text_feature = local_name(text_predicate)
    triples = 0
    with open(path, "rb") as raw:
        counting = CountingReader(raw, "triples", total, progress)
        with open(path, "rb") as probe:
            gzipped = probe.read(2) == b"\x1f\x8b"
        stream = _BoundedStream(gzip.GzipFile(fileobj=counting), path, total, max_expansion) if gzipped else counting
        try:
            for triple in ox.parse(stream, format=syntax):
                triples += 1
                predicate = triple.predicate.value
                target = triple.object
                if isinstance(target, ox.Literal):
                    if target.value == "":
                        collected.empty_literals += 1  # an empty literal is no value
                        continue
                    if not keeps_language(target.language, lang):
                        collected.other_languages += 1
                        continue
                    subject = collected.node(triple.subject)
                    name = text_feature if predicate == text_predicate else local_name(predicate)
                    collected.predicates.setdefault(name, {})[predicate] = None
                    collected.add_feature(subject, name, literal_value(target))
                elif predicate == RDF_TYPE and isinstance(target, ox.NamedNode):
                    collected.set_type(collected.node(triple.subject), target.value)
                else:
                    subject = collected.node(triple.subject)
                    name = local_name(predicate)
                    collected.predicates.setdefault(name, {})[predicate] = None
                    collected.add_edge(subject, name, collected.node(target))
        except SyntaxError as error:
            raise _parse_error(path, error) from None
        except (OSError, EOFError, gzip.BadGzipFile) as error:
            raise GraphFormatError(f"{path}: cannot read: {error} (a truncated .gz?)") from None
    collected.drop_duplicate_edges()
    return collected, triples, total


def import_triples(
    path: str | os.PathLike,
    out_dir: str | os.PathLike,
    overwrite: bool = False,
    text_predicate: str | None = None,
    id_prefix: str = "",
    reverse_suffix: str = DEFAULT_REVERSE_SUFFIX,
    progress: ProgressCallback | None = None,
    max_expansion: int = DEFAULT_MAX_EXPANSION,
    rdf_format: str | None = None,
    lang: str = DEFAULT_LANG,
) -> ImportSummary:
    """Import an RDF file (plain or gzip) into a store at ``out_dir`` (rule in the module doc)."""
    started = time.perf_counter()
    path, out_dir = import_paths(path, out_dir, overwrite)
    syntax = rdf_format_of(path, rdf_format)
    collected, triples, total = collect_triples(path, text_predicate, id_prefix, progress, max_expansion,
                                                rdf_format, lang)
    text_features = [local_name(text_predicate)] if text_predicate else []
    text_features += [local_name(iri) for iri in LABEL_PREDICATES if local_name(iri) not in text_features]
    if not collected.ids:
        raise GraphFormatError(f"{path}: no triples")
    return _write(collected, path, out_dir, overwrite, text_features, reverse_suffix, triples, total, started,
                  _SYNTAX_NAMES.get(syntax, "rdf"))


_SYNTAX_NAMES = {value: name for name, value in RDF_FORMAT_NAMES.items()}


def _write(collected: _Collected, path: Path, out_dir: Path, overwrite: bool, text_features: list[str],
           reverse_suffix: str, triples: int, total: int, started: float, syntax: str) -> ImportSummary:
    types = np.asarray(collected.types, dtype=np.int64)
    untyped = types < 0
    names = list(collected.type_names)
    if untyped.any():
        if DEFAULT_TYPE not in collected.type_codes:
            names.append(DEFAULT_TYPE)
        types[untyped] = names.index(DEFAULT_TYPE)
    order = np.argsort(types, kind="stable")  # node numbers type by type, first-seen order within
    position = np.empty_like(order)
    position[order] = np.arange(len(order))
    counts = np.bincount(types, minlength=len(names))
    written = [(names[code], int(counts[code])) for code in range(len(names)) if counts[code]]
    extra = collected.extra_types
    source = {"path": str(path.resolve()), "bytes": total, "importer": "n-triples" if syntax == "ntriples" else "rdf",
              "syntax": syntax, "empty_relations": "left out"}  # vertex chunks leave out relations without neighbours
    if reverse_suffix:
        source["reverse_suffix"] = reverse_suffix  # updates add and delete the reverse edges too
    chosen: dict[str, str | None] = {}
    with StoreWriter(out_dir, overwrite=overwrite, source=source) as writer:
        start = 0
        for name, count in written:
            members = order[start : start + count]
            start += count
            writer.add_nodes(name, [], {})
            for first in range(0, count, _BATCH):
                batch = members[first : first + _BATCH].tolist()
                features: dict[str, list] = {}
                for feature, column in collected.features.items():
                    values = [column.get(node) for node in batch]
                    if any(value is not None for value in values):
                        features[feature] = values
                if extra:
                    values = [extra.get(node) for node in batch]
                    if any(value is not None for value in values):
                        features["types"] = values
                writer.add_nodes(name, [collected.ids[node] for node in batch], features)
            present = writer.text_features(name)
            label = next((feature for feature in text_features if feature in present), None)
            choice = TextKeyChoice(label, reason="label predicate") if label else choose_text_key(present)
            if choice.feature is not None:
                writer.set_text_key(name, choice.feature)
            chosen[name] = choice.describe()
        src = position[np.frombuffer(collected.src, dtype=np.int64)] if len(collected.src) else np.zeros(0, np.int64)
        dst = position[np.frombuffer(collected.dst, dtype=np.int64)] if len(collected.dst) else np.zeros(0, np.int64)
        relations = np.frombuffer(collected.relation, dtype=np.int64) if len(collected.relation) else np.zeros(0, np.int64)
        edges = add_grouped_edges(writer, TypeRanges(written), relations, collected.relation_names, src, dst, None, reverse_suffix)
        if collected.duplicates:
            writer.warnings["duplicate_triples"] = collected.duplicates
        if collected.other_languages:
            writer.warnings["other_language_literals"] = collected.other_languages
        if collected.empty_literals:
            writer.warnings["empty_literals"] = collected.empty_literals
        merged = {name: list(iris) for name, iris in collected.predicates.items() if len(iris) > 1}
        if merged:
            writer.warnings["merged_predicates"] = merged
        warnings = dict(writer.warnings)
    return ImportSummary(
        out_dir=str(out_dir), nodes=len(collected.ids), edges=edges, node_types=dict(written), dangling_neighbors=0,
        seconds=time.perf_counter() - started, format="n-triples" if syntax == "ntriples" else syntax,
        input_bytes=total, rows=triples, warnings=warnings, text_keys=chosen,
    )


__all__ = ["import_triples", "collect_triples", "local_name", "literal_value", "rdf_format_of", "keeps_language",
           "RDFS_LABEL", "RDF_TYPE", "DEFAULT_TYPE", "LABEL_PREDICATES", "RDF_SUFFIXES", "RDF_FORMAT_NAMES", "DEFAULT_LANG"]
