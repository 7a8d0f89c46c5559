"""Import a GRBench ``graph.json`` into a store, streaming (files are up to tens of GB).

Layout (grbench.md §1): ``{"<type>_nodes": {id: {"features": {...}, "neighbors": {relation:
[ids]}}}}``; ids are unique across types. Two passes over the file with ijson: pass 1 collects
ids and types (so neighbour ids resolve to global indices) and bounds nesting depth, pass 2 reads
features and edges. Any malformed input raises GraphFormatError naming the place, and the output
directory is only created on success.

The real files' shapes are read as Graph-CoT reads them (Python's ``json.load``; grbench.md §9):
neighbour ids that name no node stay in their lists (and degrees), counted in the report;
``NaN``/``Infinity`` tokens and numbers beyond a double (``1e999``) are floats, integers beyond 64
bits stay exact, lone surrogate escapes (``\\ud800``) stay lone surrogates; a ``null`` feature
exists with the value None; and a neighbour value that is an object of lists (legal's
citation-depth-keyed ``reference`` / ``cited_by`` before GRBench's post-processing) is one list,
concatenated in key order as that post-processing does.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ijson
import numpy as np

from glmcot.graph.errors import GraphFormatError
from glmcot.graph.storage.idhash import find_duplicate, hash_ids
from glmcot.graph.importers.loading import CountingReader, ProgressCallback, import_paths
from glmcot.graph.storage.writer import NULL, StoreWriter

TYPE_SUFFIX = "_nodes"
_BUFFER = 1 << 16
_DANGLING_EXAMPLES = 10
DEFAULT_MAX_DEPTH = 64  # JSON levels inside one feature or neighbour value; real files use 1-2
_NODE_DEPTH = 4  # open containers around a feature value: top, type, node, "features"



@dataclass
class ImportReport:
    out_dir: str
    nodes: int
    edges: int
    node_types: dict[str, int]
    dangling_neighbors: int  # kept in their lists and degrees, as Graph-CoT does
    dangling_examples: list[str] = field(default_factory=list)
    seconds: float = 0.0
    non_finite_numbers: int = 0  # NaN / Infinity / -Infinity tokens (and numbers beyond a double) read as floats
    lone_surrogates: int = 0  # \ud800-style escapes kept as lone surrogates, as json.load keeps them
    null_features: int = 0  # features present with the value null (read as None)
    # "<type>.<relation>" -> nodes whose neighbour value was an object of lists, flattened
    flattened_neighbor_objects: dict[str, int] = field(default_factory=dict)
    absent_relation_keys: int = 0  # (node, relation) pairs where the type has the relation, the node not


# Python's json.load (Graph-CoT's loader) reads these tokens; yajl rejects them. Outside strings
# they are replaced by string sentinels, turned back into floats when a node is read. The same
# filter carries what else json.load accepts and yajl does not: numbers beyond a double or a
# 64-bit integer (1e999 is inf, a 30-digit integer stays exact) and lone surrogate escapes
# (\ud800 stays a lone surrogate, kept in the store with surrogatepass, as json.load keeps it).
_NON_FINITE = {b"NaN": float("nan"), b"Infinity": float("inf"), b"-Infinity": float("-inf")}
_SENTINELS = {token: b'"\\u0000glmcot:' + token + b'"' for token in _NON_FINITE}
_SENTINEL_VALUES = {"\x00glmcot:" + token.decode(): value for token, value in _NON_FINITE.items()}
_NUMBER_SENTINEL = "\x00glmcot:num:"
_SURROGATE = re.compile("\x00glmcot-surrogate:([0-9a-f]{4})\x00")
_LONE = re.compile("[\ud800-\udfff]")
_OUTSIDE = re.compile(rb'"|-Infinity|Infinity|NaN|-?[0-9][0-9.eE+-]*')
_INSIDE = re.compile(rb'[\\"]')
_HEX = re.compile(rb"[0-9a-fA-F]{4}")


def _wide_number(token: bytes) -> bool:
    """A number yajl cannot read but json.load can: an exponent (may overflow a double) or more
    digits than a 64-bit integer holds."""
    return b"e" in token or b"E" in token or len(token.lstrip(b"-")) >= 19


class _NonFiniteReader:
    """Byte stream filter: NaN / Infinity / -Infinity and wide numbers outside JSON strings become
    sentinel strings, lone surrogate escapes inside strings become marker text.

    Linear in the input (one regex scan per token boundary); only used on files that need it.
    """

    def __init__(self, raw: CountingReader):
        self._raw = raw
        self._in_string = False
        self._carry = b""
        self.replaced = 0  # non-finite numbers
        self.rewritten = 0  # every replacement (non-finite, wide numbers, lone surrogates)
        self.surrogates = 0

    def read(self, size: int = -1) -> bytes:
        if size == 0:  # ijson probes the stream type with read(0)
            return b""
        while True:
            data = self._raw.read(size if size > 0 else _BUFFER)
            if not data:
                tail, self._carry = self._carry, b""
                return self._convert(tail, final=True) if tail else b""
            out = self._convert(self._carry + data, final=False)
            if out:
                return out

    def _convert(self, chunk: bytes, final: bool) -> bytes:
        parts = []
        start = position = 0
        end = len(chunk)
        self._carry = b""

        def carry(at: int) -> None:
            nonlocal end, position
            self._carry = chunk[at:]
            end = position = at

        while position < end:
            if self._in_string:
                match = _INSIDE.search(chunk, position)
                if match is None:
                    position = end
                    break
                at = match.start()
                if chunk[at] != 0x5C:  # the closing quote
                    self._in_string = False
                    position = match.end()
                    continue
                if at + 2 > end or (chunk[at + 1] == 0x75 and at + 12 > end):  # an escape cut at the chunk's end
                    if not final:
                        carry(at)
                        break
                if chunk[at + 1 : at + 2] != b"u" or not _HEX.fullmatch(chunk, at + 2, at + 6):
                    position = at + 2
                    continue
                code = int(chunk[at + 2 : at + 6], 16)
                if 0xD800 <= code <= 0xDBFF and chunk[at + 6 : at + 8] == b"\\u" and _HEX.fullmatch(chunk, at + 8, at + 12) \
                        and 0xDC00 <= int(chunk[at + 8 : at + 12], 16) <= 0xDFFF:
                    position = at + 12  # a surrogate pair: one character, yajl reads it
                    continue
                if 0xD800 <= code <= 0xDFFF:
                    parts.append(chunk[start:at])
                    parts.append(b"\\u0000glmcot-surrogate:%04x\\u0000" % code)
                    self.surrogates += 1
                    self.rewritten += 1
                    start = position = at + 6
                    continue
                position = at + 6
                continue
            match = _OUTSIDE.search(chunk, position)
            if match is None:
                if not final:
                    # keep a token cut at the chunk's end for the next read
                    for cut in range(max(position, end - 9), end):
                        tail = chunk[cut:]
                        if any(token.startswith(tail) for token in _NON_FINITE):
                            carry(cut)
                            break
                position = end
                break
            token = match.group()
            if token == b'"':
                self._in_string = True
                position = match.end()
                continue
            if match.end() == end and not final:  # a token cut at the chunk's end
                carry(match.start())
                break
            if token in _SENTINELS:
                replacement = _SENTINELS[token]
                self.replaced += 1
            elif token[:1] in b"-0123456789" and token not in (b"-",) and _wide_number(token):
                replacement = b'"\\u0000glmcot:num:' + token + b'"'
                try:
                    if not math.isfinite(float(token)):
                        self.replaced += 1
                except ValueError:
                    pass  # not a number after all: json.loads says so when the node is read
            else:
                position = match.end()
                continue
            parts.append(chunk[start : match.start()])
            parts.append(replacement)
            self.rewritten += 1
            start = position = match.end()
        parts.append(chunk[start:end])
        return b"".join(parts)


def _restore_text(value: str) -> Any:
    if value.startswith("\x00glmcot:"):
        if value in _SENTINEL_VALUES:
            return _SENTINEL_VALUES[value]
        if value.startswith(_NUMBER_SENTINEL):
            return json.loads(value[len(_NUMBER_SENTINEL) :])  # exactly what json.load gives
    if "\x00glmcot-surrogate:" in value:
        return _SURROGATE.sub(lambda match: chr(int(match.group(1), 16)), value)
    return value


def restore_text(value: str) -> str:
    """A key or id read through the filter, with its lone surrogates back."""
    return _SURROGATE.sub(lambda match: chr(int(match.group(1), 16)), value) if "\x00glmcot-surrogate:" in value else value


def _stream_form(text: str) -> str:
    """A key as the filtered stream spells it (its lone surrogates as marker text)."""
    return _LONE.sub(lambda match: f"\x00glmcot-surrogate:{ord(match.group()):04x}\x00", text)


def _restore_non_finite(value: Any) -> Any:
    """Sentinels back to numbers and surrogates; depth is bounded by pass 1, so recursion is safe here."""
    if type(value) is str:
        return _restore_text(value)
    if type(value) is list:
        return [_restore_non_finite(item) for item in value]
    if type(value) is dict:
        return {restore_text(key): _restore_non_finite(item) for key, item in value.items()}
    return value


def _looks_non_finite(error: Exception) -> bool:
    # yajl's messages for NaN/Infinity ("invalid char") and for overflowing numbers; a lone
    # surrogate escape decodes to bytes that are not UTF-8
    message = str(error)
    return "invalid char" in message or "overflow" in message or isinstance(error, UnicodeDecodeError)


@dataclass
class _Pass1:
    types: list[tuple[str, int]]  # (type, node count) in file order
    blob: bytes
    offsets: np.ndarray
    sorted_hashes: np.ndarray
    order: np.ndarray
    non_finite: bool = False  # the file has tokens only json.load reads: pass 2 filters them too
    non_finite_count: int = 0
    lone_surrogates: int = 0


class _Context:
    """Where the parser is, for error messages."""

    def __init__(self, path: Path, reader: CountingReader):
        self.path = path
        self.reader = reader
        self.type_key: str | None = None
        self.node_id: str | None = None

    def place(self) -> str:
        parts = [f"{self.path}"]
        if self.type_key is not None:
            parts.append(f"in {self.type_key!r}")
        if self.node_id is not None:
            parts.append(f"at node {self.node_id!r}")
        parts.append(f"near byte {self.reader.position}")
        return ", ".join(parts)

    def error(self, message: str) -> GraphFormatError:
        return GraphFormatError(f"{self.place()}: {message}")


def _parse_error(error: Exception, context: _Context) -> GraphFormatError:
    message = " ".join(str(error).split()) or type(error).__name__
    if "premature EOF" in message:
        return context.error(f"truncated file ({message})")
    return context.error(f"malformed JSON: {message}")


def _type_name(key: str, context: _Context) -> str:
    if not isinstance(key, str) or not key.endswith(TYPE_SUFFIX) or len(key) == len(TYPE_SUFFIX):
        raise context.error(f"top-level key {key!r} is not of the form '<type>{TYPE_SUFFIX}'")
    return key[: -len(TYPE_SUFFIX)]


def _depth_error(context: _Context, keys: list, max_depth: int) -> GraphFormatError:
    section, name = keys[3], keys[4]
    if section == "features":
        what = f"feature {name!r}"
    elif section == "neighbors":
        what = f"neighbour list {name!r}"
    else:
        what = f"node key {section!r}"
    return context.error(
        f"{what} nests deeper than {max_depth} levels; glmcot reads values at most {max_depth} levels deep"
    )


def _pass1(path: Path, progress: ProgressCallback | None, max_depth: int = DEFAULT_MAX_DEPTH) -> _Pass1:
    try:
        return _scan_ids(path, progress, max_depth, non_finite=False)
    except _RetryNonFinite:
        return _scan_ids(path, progress, max_depth, non_finite=True)


class _RetryNonFinite(Exception):
    """Pass 1 met a token yajl rejects that json.load may accept: rescan with the filter."""


def _scan_ids(path: Path, progress: ProgressCallback | None, max_depth: int, non_finite: bool) -> _Pass1:
    total = path.stat().st_size
    types: list[tuple[str, int]] = []
    blob = bytearray()
    lengths = array("q")
    limit = _NODE_DEPTH + max_depth
    with open(path, "rb") as handle:
        reader = CountingReader(handle, "ids", total, progress)
        source = _NonFiniteReader(reader) if non_finite else reader
        context = _Context(path, reader)
        if total == 0:
            raise context.error("empty file")
        depth = 0
        keys: list = [None] * (_NODE_DEPTH + 1)  # the key at each depth up to a value's name
        expect_map = True  # the top level
        count = 0
        closed = False
        try:
            for event, value in ijson.basic_parse(source, use_float=True, buf_size=_BUFFER):
                if closed:
                    raise context.error("extra data after the top-level object")
                if expect_map:
                    if event != "start_map":
                        what = ("the top level", "the value of a node type", "a node")[min(depth, 2)]
                        raise context.error(f"{what} must be a JSON object, got {event}")
                    expect_map = False
                if event == "map_key":
                    if non_finite:
                        value = restore_text(value)
                    if depth == 1:
                        name = _type_name(value, context)
                        if any(existing == name for existing, _ in types):
                            raise context.error(f"node type key {value!r} appears twice")
                        context.type_key, context.node_id = value, None
                        types.append((name, 0))
                        count = 0
                        expect_map = True
                    elif depth == 2:
                        context.node_id = value
                        data = value.encode("utf-8", "surrogatepass")
                        if not data:
                            raise context.error("empty node id")
                        blob += data
                        lengths.append(len(data))
                        count += 1
                        expect_map = True
                    elif depth <= _NODE_DEPTH:
                        keys[depth] = value
                elif event == "start_map" or event == "start_array":
                    depth += 1
                    if depth > limit:
                        raise _depth_error(context, keys, max_depth)
                elif event == "end_map" or event == "end_array":
                    depth -= 1
                    if depth == 1 and types:
                        types[-1] = (types[-1][0], count)
                        context.node_id = None
                    elif depth == 0:
                        closed = True
        except ijson.JSONError as error:
            if not non_finite and _looks_non_finite(error):
                raise _RetryNonFinite() from None
            raise _parse_error(error, context) from None
        except UnicodeDecodeError as error:
            if not non_finite:
                raise _RetryNonFinite() from None
            raise context.error(f"malformed JSON: {error}") from None
        if not closed:
            raise context.error("truncated file (the top-level object is not closed)")
        replaced = source.replaced if non_finite else 0
        rewritten = source.rewritten if non_finite else 0
        surrogates = source.surrogates if non_finite else 0
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(np.frombuffer(lengths, dtype=np.int64), out=offsets[1:])
    ids = bytes(blob)
    del blob
    hash_array = hash_ids(ids, offsets)
    order = np.argsort(hash_array, kind="stable")
    sorted_hashes = hash_array[order]
    result = _Pass1(types, ids, offsets, sorted_hashes, order, rewritten > 0, replaced, surrogates)
    _check_duplicates(result, path)
    return result


def _check_duplicates(scan: _Pass1, path: Path) -> None:
    pair = find_duplicate(scan.sorted_hashes, scan.order, lambda index: scan.blob[scan.offsets[index] : scan.offsets[index + 1]])
    if pair is None:
        return
    first, second = pair
    starts = np.cumsum([0] + [count for _, count in scan.types])
    type_a = scan.types[int(np.searchsorted(starts, first, side="right")) - 1][0]
    type_b = scan.types[int(np.searchsorted(starts, second, side="right")) - 1][0]
    where = f"in types {type_a!r} and {type_b!r}" if type_a != type_b else f"twice in type {type_a!r}"
    node_id = scan.blob[scan.offsets[first] : scan.offsets[first + 1]].decode("utf-8", "surrogatepass")
    raise GraphFormatError(f"{path}: duplicate node id {node_id!r} {where} (ids must be unique across all types)")


class _Resolver:
    """Maps neighbour id strings to global indices using pass 1's sorted hashes.

    Vectorised: hash the batch, binary-search the hashes, then compare the id bytes of every
    candidate with numpy; only hash collisions fall back to a Python loop.
    """

    def __init__(self, scan: _Pass1):
        self.scan = scan
        self.blob = np.frombuffer(scan.blob, dtype=np.uint8)

    def resolve(self, blob: bytes, lengths: np.ndarray) -> np.ndarray:
        """Global index of each id in ``blob`` (concatenated UTF-8, ``lengths`` bytes each), or -1."""
        scan = self.scan
        count = len(lengths)
        result = np.full(count, -1, dtype=np.int64)
        size = len(scan.sorted_hashes)
        if not count or not size:
            return result
        query_offsets = np.zeros(count + 1, dtype=np.int64)
        np.cumsum(lengths, out=query_offsets[1:])
        query_blob = np.frombuffer(blob, dtype=np.uint8)
        keys = hash_ids(query_blob, query_offsets)
        positions = np.minimum(np.searchsorted(scan.sorted_hashes, keys), size - 1)
        hit = np.nonzero(scan.sorted_hashes[positions] == keys)[0]
        candidates = scan.order[positions[hit]].astype(np.int64)
        stored_start = scan.offsets[candidates]
        same_length = (scan.offsets[candidates + 1] - stored_start) == lengths[hit]
        rows, candidates, stored_start = hit[same_length], candidates[same_length], stored_start[same_length]
        row_lengths = lengths[rows]
        total = int(row_lengths.sum())
        if total:
            row_begin = np.zeros(len(rows), dtype=np.int64)
            np.cumsum(row_lengths[:-1], out=row_begin[1:])
            within = np.arange(total, dtype=np.int64) - np.repeat(row_begin, row_lengths)
            equal = query_blob[np.repeat(query_offsets[rows], row_lengths) + within] == self.blob[
                np.repeat(stored_start, row_lengths) + within
            ]
            matched = np.logical_and.reduceat(equal, row_begin)  # ids are never empty
            result[rows[matched]] = candidates[matched]
        # A hash shared by several ids: check the following equal hashes one by one.
        unresolved = hit[result[hit] < 0]
        for row in unresolved.tolist():
            position = int(positions[row]) + 1
            while position < size and scan.sorted_hashes[position] == keys[row]:
                index = int(scan.order[position])
                if scan.blob[scan.offsets[index] : scan.offsets[index + 1]] == blob[query_offsets[row] : query_offsets[row + 1]]:
                    result[row] = index
                    break
                position += 1
        return result


class _TypeBatch:
    """Nodes of one type read in pass 2, flushed to the writer in batches."""

    def __init__(self, node_type: str, stats: _Stats, start: int = 0, count: int = 0):
        self.node_type = node_type
        self.stats = stats
        self.start = start
        self.count = count
        # per relation: which of the type's nodes have the key (Graph-CoT raises KeyError on the
        # others, where an empty list would answer []); kept over all batches of the type
        self.present: dict[str, np.ndarray] = {}
        self.ids: list[str] = []
        self.features: dict[str, list[Any]] = {}
        self.relations: dict[str, tuple[list[int], list[Any], list[int]]] = {}

    def add(self, node_id: str, index: int, node: Any, context: _Context, non_finite: bool = False) -> None:
        if non_finite:
            node = _restore_non_finite(node)
        if not isinstance(node, dict):
            raise context.error("a node must be an object with 'features' and 'neighbors'")
        features = node.get("features", {})
        neighbours = node.get("neighbors", {})
        if not isinstance(features, dict):
            raise context.error(f"'features' must be an object, got {type(features).__name__}")
        if not isinstance(neighbours, dict):
            raise context.error(f"'neighbors' must be an object, got {type(neighbours).__name__}")
        row = len(self.ids)
        self.ids.append(node_id)
        for name, value in features.items():
            column = self.features.get(name)
            if column is None:
                column = self.features[name] = [None] * row
            if value is None:  # JSON null: the feature exists (Graph-CoT prints None)
                value = NULL
                self.stats.null_features += 1
            column.append(value)
        for column in self.features.values():
            if len(column) == row:
                column.append(None)
        for relation, targets in neighbours.items():
            if isinstance(targets, dict):
                targets = self._flatten(relation, targets, context)
            if not isinstance(targets, list):
                raise context.error(f"neighbour list {relation!r} must be a JSON array, got {type(targets).__name__}")
            sources, texts, positions = self.relations.setdefault(relation, ([], [], []))
            present = self.present.get(relation)
            if present is None:
                present = self.present[relation] = np.zeros(self.count, dtype=bool)
            present[index - self.start] = True
            sources.extend([index] * len(targets))
            texts.extend(targets)  # checked to be id strings in bulk at flush
            positions.extend(range(len(targets)))

    def _flatten(self, relation: str, targets: dict, context: _Context) -> list:
        """An object of lists (legal's depth-keyed citations) as one list, in key order, as
        GRBench's legal/id2idx.py post-processing concatenates them."""
        flat: list = []
        for key, part in targets.items():
            if not isinstance(part, list):
                raise context.error(
                    f"neighbour object {relation!r} must hold JSON arrays, got {type(part).__name__} under {key!r}"
                )
            flat.extend(part)
        name = f"{self.node_type}.{relation}"
        self.stats.flattened[name] = self.stats.flattened.get(name, 0) + 1
        return flat

    @staticmethod
    def _id_strings(relation: str, sources: list[int], texts: list[Any], resolver: _Resolver, context: _Context):
        fixed = []
        for source, target in zip(sources, texts):
            if isinstance(target, bool) or not isinstance(target, (str, int)):
                context.node_id = _id_at(resolver, source)
                raise context.error(f"neighbour {target!r} in {relation!r} is not a node id string")
            fixed.append(target if isinstance(target, str) else str(target))  # numeric ids
        return fixed

    def flush(self, writer: StoreWriter, resolver: _Resolver, context: _Context) -> int:
        """Write the batch; returns the number of edges to real nodes."""
        if self.ids:
            writer.add_nodes(self.node_type, self.ids, self.features)
        kept = 0
        stats = self.stats
        for relation, (sources, texts, positions) in self.relations.items():
            try:
                joined = "".join(texts)
            except TypeError:
                texts = self._id_strings(relation, sources, texts, resolver, context)
                joined = "".join(texts)
            if joined.isascii():  # the usual case: byte lengths are string lengths
                blob = joined.encode("ascii")
                lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
            else:
                encoded = [text.encode("utf-8", "surrogatepass") for text in texts]
                blob = b"".join(encoded)
                lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
            targets = resolver.resolve(blob, lengths)
            valid = targets >= 0
            src = np.asarray(sources, dtype=np.int64)
            missing_rows = np.nonzero(~valid)[0]
            if missing_rows.size:
                # Kept where they stand: Graph-CoT lists and counts them (grbench.md §9).
                stats.dangling += int(missing_rows.size)
                for row in missing_rows[: max(_DANGLING_EXAMPLES - len(stats.examples), 0)].tolist():
                    stats.examples.append(f"{_id_at(resolver, sources[row])} -{relation}-> {texts[row]}")
                rows = missing_rows.tolist()
                writer.add_dangling(self.node_type, relation, src[missing_rows],
                                    np.asarray(positions, dtype=np.int64)[missing_rows], [texts[row] for row in rows])
            writer.add_edges(self.node_type, relation, src[valid], targets[valid])
            kept += int(valid.sum())
        self.ids, self.features, self.relations = [], {}, {}
        return kept

    def finish(self, writer: StoreWriter) -> None:
        """Record, per relation, the nodes of the type that lack the key."""
        for relation, present in self.present.items():
            if not present.all():
                self.stats.absent_keys += int((~present).sum())
                writer.add_absent(self.node_type, relation, self.start + np.nonzero(~present)[0])


@dataclass
class _Stats:
    dangling: int = 0
    examples: list[str] = field(default_factory=list)
    null_features: int = 0
    flattened: dict[str, int] = field(default_factory=dict)
    absent_keys: int = 0


def _type_items(reader, key: str):
    if "." in key or " " in key:
        # ijson prefixes join keys with "."; such keys need the generic event walk.
        return _type_items_by_events(reader, key)
    return ijson.kvitems(reader, key, use_float=True, buf_size=_BUFFER)


def _type_items_by_events(reader, key: str):
    events = ijson.basic_parse(reader, use_float=True, buf_size=_BUFFER)
    depth = 0
    inside = False
    for event, value in events:
        if event == "map_key" and depth == 1:
            inside = value == key
        elif event == "map_key" and depth == 2 and inside:
            builder = ijson.ObjectBuilder()
            for inner_event, inner_value in events:
                builder.event(inner_event, inner_value)
                if inner_event in ("start_map", "start_array"):
                    depth += 1
                elif inner_event in ("end_map", "end_array"):
                    depth -= 1
                    if depth == 2:
                        break
            yield value, builder.value
        elif event in ("start_map", "start_array"):
            depth += 1
        elif event in ("end_map", "end_array"):
            depth -= 1


def _id_at(resolver: _Resolver, index: int) -> str:
    scan = resolver.scan
    return scan.blob[scan.offsets[index] : scan.offsets[index + 1]].decode("utf-8", "surrogatepass")


def import_graph_json(
    path: str | os.PathLike,
    out_dir: str | os.PathLike,
    overwrite: bool = False,
    batch_size: int = 20_000,
    progress: ProgressCallback | None = None,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> ImportReport:
    """Import a GRBench ``graph.json`` into a store at ``out_dir``.

    ``max_depth`` bounds the JSON nesting inside one feature or neighbour value (a deeper file is
    refused with an error naming the node and the feature, before anything is built)."""
    started = time.perf_counter()
    path, out_dir = import_paths(path, out_dir, overwrite)
    if max_depth < 1:
        raise ValueError("max_depth must be at least 1")
    scan = _pass1(path, progress, max_depth)
    resolver = _Resolver(scan)
    total = path.stat().st_size
    stats = _Stats()
    edges = 0
    stat = path.stat()
    source = {"path": str(path.resolve()), "bytes": stat.st_size, "mtime": int(stat.st_mtime), "importer": "grbench-json"}
    with StoreWriter(out_dir, overwrite=overwrite, source=source) as writer:
        index = 0
        blob, offsets = scan.blob, memoryview(scan.offsets)
        for type_number, (node_type, count) in enumerate(scan.types):
            key = f"{node_type}{TYPE_SUFFIX}"
            writer.add_nodes(node_type, [], {})  # a type with no nodes still exists
            if count == 0:
                continue
            batch = _TypeBatch(node_type, stats, start=index, count=count)
            with open(path, "rb") as handle:
                phase = f"nodes {type_number + 1}/{len(scan.types)}: {node_type}"
                reader = CountingReader(handle, phase, total, progress)
                source = _NonFiniteReader(reader) if scan.non_finite else reader
                context = _Context(path, reader)
                context.type_key = key
                seen = 0
                try:
                    # ijson's C kvitems builds each node; a scan stops once its type is complete.
                    for node_id, node in _type_items(source, _stream_form(key) if scan.non_finite else key):
                        if scan.non_finite:
                            node_id = restore_text(node_id)
                        context.node_id = node_id
                        if blob[offsets[index] : offsets[index + 1]] != node_id.encode("utf-8", "surrogatepass"):
                            raise context.error("the file changed between the two import passes")
                        batch.add(node_id, index, node, context, scan.non_finite)
                        index += 1
                        seen += 1
                        if len(batch.ids) >= batch_size:
                            edges += batch.flush(writer, resolver, context)
                        if seen == count:
                            break
                except ijson.JSONError as error:
                    raise _parse_error(error, context) from None
                if seen != count:
                    raise context.error("the file changed between the two import passes")
                edges += batch.flush(writer, resolver, context)
                batch.finish(writer)
        if stats.dangling:
            writer.warnings["dangling_neighbors"] = stats.dangling
            writer.warnings["dangling_examples"] = stats.examples
        if stats.flattened:
            writer.warnings["flattened_neighbor_objects"] = stats.flattened
        non_finite = scan.non_finite_count if scan.non_finite else 0
        if non_finite:
            writer.warnings["non_finite_numbers"] = non_finite
        if scan.lone_surrogates:
            writer.warnings["lone_surrogates"] = scan.lone_surrogates
    return ImportReport(
        out_dir=str(out_dir),
        nodes=len(scan.offsets) - 1,
        edges=edges,
        node_types={name: count for name, count in scan.types},
        dangling_neighbors=stats.dangling,
        dangling_examples=stats.examples,
        seconds=time.perf_counter() - started,
        non_finite_numbers=non_finite,
        lone_surrogates=scan.lone_surrogates,
        null_features=stats.null_features,
        flattened_neighbor_objects=stats.flattened,
        absent_relation_keys=stats.absent_keys,
    )


__all__ = ["import_graph_json", "ImportReport", "TYPE_SUFFIX", "DEFAULT_MAX_DEPTH"]
