"""The operations of an update, read from any supported source: JSON Lines of operations
(graph/updates/delta.py), node and edge tables (rows are upserts), or N-Triples (triples are upserts)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from glmcot.graph.updates.delta import Operation, read_operations
from glmcot.graph.errors import GraphFormatError
from glmcot.graph.importers.tables import TABLE_SUFFIXES, _id_strings, _labels, column_values, find_tables, iter_batches, read_layout
from glmcot.graph.importers.triples import DEFAULT_MAX_EXPANSION, DEFAULT_TYPE, RDFS_LABEL, collect_triples

_ROWS = 65_536


def _table_operations(source: Path, reverse_suffix: str) -> Iterator[Operation]:
    layouts = [read_layout(path, name) for path, name in find_tables(source)]
    # Nodes first, so edges in the same update may point at nodes it adds.
    for layout in sorted(layouts, key=lambda item: item.kind != "nodes"):
        for first_row, batch in iter_batches(layout, None, _ROWS):
            if layout.kind == "nodes":
                ids = _id_strings(batch.column(layout.id.header), layout.id, layout, first_row)
                labels = _labels(batch.column(layout.label.header) if layout.label else None, layout.default_name, len(ids))
                columns = {spec.name: column_values(batch.column(spec.header), spec, layout, first_row) for spec in layout.features}
                for row, node_id in enumerate(ids):
                    features = {}
                    for name, values in columns.items():
                        value = values[row]
                        features[name] = value.item() if isinstance(value, np.generic) else value
                    yield Operation("upsert_node", id=node_id, type=labels[row][0] if labels else layout.default_name,
                                    type_is_hint=labels is None, features={k: v for k, v in features.items() if v is not None},
                                    where=f"{layout.path}: row {first_row + row}")
            else:
                starts = _id_strings(batch.column(layout.start.header), layout.start, layout, first_row)
                ends = _id_strings(batch.column(layout.end.header), layout.end, layout, first_row)
                names = ([value or layout.default_name for value in batch.column(layout.relation.header).to_pylist()]
                         if layout.relation else [layout.default_name] * len(starts))
                weights = (column_values(batch.column(layout.weight.header), layout.weight, layout, first_row)
                           if layout.weight else [None] * len(starts))
                for row, (start, end, name) in enumerate(zip(starts, ends, names)):
                    weight = None if weights[row] is None else float(weights[row])
                    where = f"{layout.path}: row {first_row + row}"
                    yield Operation("upsert_edge", source=start, relation=name, target=end, weight=weight, where=where)
                    if reverse_suffix:
                        yield Operation("upsert_edge", source=end, relation=name + reverse_suffix, target=start,
                                        weight=weight, where=where)


def _triple_operations(path: Path, text_predicate: str, id_prefix: str, reverse_suffix: str,
                       max_expansion: int) -> Iterator[Operation]:
    collected, _, _ = collect_triples(path, text_predicate, id_prefix, max_expansion=max_expansion)
    where = str(path)
    for node, node_id in enumerate(collected.ids):
        code = collected.types[node]
        features = {name: column[node] for name, column in collected.features.items() if node in column}
        if node in collected.extra_types:
            features["types"] = collected.extra_types[node]
        yield Operation("upsert_node", id=node_id, type=collected.type_names[code] if code >= 0 else DEFAULT_TYPE,
                        type_is_hint=code < 0, features=features, where=f"{where}: node {node_id}")
    for source, target, code in zip(collected.src, collected.dst, collected.relation):
        name = collected.relation_names[code]
        yield Operation("upsert_edge", source=collected.ids[source], relation=name, target=collected.ids[target], where=where)
        if reverse_suffix:
            yield Operation("upsert_edge", source=collected.ids[target], relation=name + reverse_suffix,
                            target=collected.ids[source], where=where)


def read_changes(source: str | Path, reverse_suffix: str = "", text_predicate: str | None = None,
                 id_prefix: str = "", max_expansion: int = DEFAULT_MAX_EXPANSION) -> Iterator[Operation]:
    """Operations from a .jsonl file, a table file or folder, or an N-Triples file."""
    source = Path(source)
    name = source.name.lower()
    if not source.exists():
        raise FileNotFoundError(f"no such file or folder: {source}")
    if name.endswith((".jsonl", ".ndjson")):
        return read_operations(source)
    if source.is_dir() or name.endswith(TABLE_SUFFIXES):
        return _table_operations(source, reverse_suffix)
    if name.endswith((".nt", ".nt.gz", ".ntriples")):
        return _triple_operations(source, text_predicate or RDFS_LABEL, id_prefix, reverse_suffix, max_expansion)
    raise GraphFormatError(f"{source}: an update is a .jsonl file of operations, tables (.csv, .parquet) or N-Triples (.nt)")


__all__ = ["read_changes"]
