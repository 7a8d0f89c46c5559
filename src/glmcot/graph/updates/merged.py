"""One version of an updated store: the immutable, memory-mapped base with a delta merged at read.

`MergedGraph` answers everything `Graph` answers. Base nodes keep their indices; nodes new in the
delta get the indices after the base's (``num_nodes`` counts these slots, deleted ones included).
A deleted node is not found by id, and edges to it are not returned. A vertex chunk's reuse key
gains a digest of the chunk's text (``content_digest``), so KV computed for a chunk is reused
only while its text is byte-identical, whichever version computed it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from glmcot.graph.updates.delta import Delta
from glmcot.graph.storage.domains import default_text_key
from glmcot.graph.errors import FeatureNotFound, NodeNotFound, RelationNotFound
from glmcot.graph.storage.store import Graph
from glmcot.graph.storage.values import fresh, value_kind


class MergedGraph(Graph):
    """A base store plus a delta; read-only. Open with ``open_version`` (graph/updates/versions.py)."""

    def __init__(self, directory: Path, manifest: dict, delta: Delta, version: int, root: Path):
        super().__init__(directory, manifest)
        self.delta = delta
        self.version = version
        self.root = root
        base_count = self._base_count = int(manifest["num_nodes"])
        self._new_ids = list(delta.new_nodes)
        self._new_index = {node_id: base_count + offset for offset, node_id in enumerate(self._new_ids)}
        self._new_types = [delta.nodes[node_id]["type"] for node_id in self._new_ids]
        total = base_count + len(self._new_ids)
        self._deleted = np.zeros(total, dtype=bool)
        self._entries: dict[int, dict] = {}
        self._extra_features: dict[str, dict[str, str]] = {}
        self._extra_relations: dict[str, list[str]] = {}
        self._extra_types: list[str] = []
        for node_id, entry in delta.nodes.items():
            index = self._new_index.get(node_id)
            if index is None:
                index = Graph._find(self, node_id)
            if index < 0:
                continue
            if entry.get("deleted"):
                self._deleted[index] = True
                continue
            self._entries[index] = entry
            node_type = entry["type"]
            if node_type not in self._types and node_type not in self._extra_types:
                self._extra_types.append(node_type)
            known = self._types[node_type].features if node_type in self._types else {}
            for name, value in entry["features"].items():
                if name not in known:
                    self._extra_features.setdefault(node_type, {}).setdefault(name, value_kind(value))
        self._any_deleted = bool(self._deleted.any())
        self._deleted_ids = {node_id for node_id, entry in delta.nodes.items() if entry.get("deleted")}
        self._changed = np.zeros(total, dtype=bool)  # nodes whose features or edges the delta holds
        self._changed[list(self._entries)] = True
        self._overrides: dict[tuple[int, str], tuple[list[str], list]] = {}
        for node_id, relations in delta.edges.items():
            index = self._find(node_id)
            if index < 0:
                continue
            self._changed[index] = True  # its degree is the delta's, not the base's
            node_type = self.type_of_index(index)
            for relation, pairs in relations.items():
                self._overrides[(index, relation)] = ([pair[0] for pair in pairs], [pair[1] for pair in pairs])
                base_relations = self._types[node_type].relations if node_type in self._types else {}
                extra = self._extra_relations.setdefault(node_type, [])
                if relation not in base_relations and relation not in extra:
                    extra.append(relation)
        self._resolved: dict[tuple[int, str], tuple[np.ndarray, np.ndarray | None]] = {}

    # schema ----------------------------------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        """Index slots: base nodes, then nodes added by the delta (deleted ones keep their slot)."""
        return self._base_count + len(self._new_ids)

    @property
    def live_nodes(self) -> int:
        return self.num_nodes - int(self._deleted.sum())

    @property
    def num_edges(self) -> int:
        return int(self.manifest["num_edges"])  # the base's; `info` reports the delta's size

    @property
    def node_types(self) -> list[str]:
        return list(self._type_names) + self._extra_types

    def feature_names(self, node_type: str) -> list[str]:
        base = list(self._types[node_type].features) if node_type in self._types else []
        if node_type not in self._types and node_type not in self._extra_types:
            self._type(node_type)  # raises with the list of types
        return base + list(self._extra_features.get(node_type, {}))

    def relation_names(self, node_type: str) -> list[str]:
        base = list(self._types[node_type].relations) if node_type in self._types else []
        if node_type not in self._types and node_type not in self._extra_types:
            self._type(node_type)
        return base + self._extra_relations.get(node_type, [])

    def text_key(self, node_type: str) -> str | None:
        if node_type in self._types:
            return self._types[node_type].text_key
        features = [{"name": name, "kind": kind} for name, kind in self._extra_features.get(node_type, {}).items()]
        return default_text_key(node_type, features)

    def feature_kind(self, node_type: str, feature: str) -> str:
        if node_type in self._types and feature in self._types[node_type].features:
            return super().feature_kind(node_type, feature)
        return self._extra_features[node_type][feature]

    def type_indices(self, node_type: str) -> np.ndarray:
        """Global indices of the live nodes of a type (base range, then added nodes)."""
        parts = []
        if node_type in self._types:
            start, stop = Graph.type_range(self, node_type)
            parts.append(np.arange(start, stop, dtype=np.int64))
        added = [self._base_count + offset for offset, name in enumerate(self._new_types) if name == node_type]
        parts.append(np.asarray(added, dtype=np.int64))
        indices = np.concatenate(parts)
        return indices[~self._deleted[indices]]

    def type_range(self, node_type: str) -> tuple[int, int]:
        if node_type in self._types:
            return super().type_range(node_type)
        return self._base_count, self._base_count  # added types have no base range; see type_indices

    def count(self, node_type: str) -> int:
        return len(self.type_indices(node_type))

    # ids -------------------------------------------------------------------------------------------
    def _find(self, node_id: str) -> int:
        if type(node_id) is not str:
            return -1
        index = self._new_index.get(node_id)
        if index is None:
            index = super()._find(node_id)
        if index >= 0 and self._any_deleted and self._deleted[index]:
            return -1
        return index

    def node_id(self, index: int) -> str:
        if index >= self._base_count and index < self.num_nodes:
            return self._new_ids[index - self._base_count]
        return super().node_id(index)

    def node_ids(self, indices) -> list[str]:
        values = indices.tolist() if isinstance(indices, np.ndarray) else list(indices)
        if not values or max(values) < self._base_count:
            return super().node_ids(indices)
        return [self.node_id(int(index)) for index in values]

    def type_of_index(self, index: int) -> str:
        if self._base_count <= index < self.num_nodes:
            return self._new_types[index - self._base_count]
        return super().type_of_index(index)

    def _live(self, index: int) -> None:
        if self._any_deleted and 0 <= index < self.num_nodes and self._deleted[index]:
            raise NodeNotFound(f"node {self.node_id(index)!r} was deleted")

    # features --------------------------------------------------------------------------------------
    def has_feature_at(self, index: int, feature: str) -> bool:
        self._live(index)
        entry = self._entries.get(index)
        if entry is not None:
            return feature in entry["features"]
        return super().has_feature_at(index, feature)

    def feature_at(self, index: int, feature: str) -> Any:
        self._live(index)
        entry = self._entries.get(index)
        if entry is None:
            return super().feature_at(index, feature)
        features = entry["features"]
        if feature in features:
            return fresh(features[feature])  # the delta's own objects never reach a reader
        node_type = entry["type"]
        names = self.feature_names(node_type)
        if feature not in names:
            raise FeatureNotFound(f"{node_type} node {self.node_id(index)!r} has no feature {feature!r}; "
                                  f"{node_type} features: {', '.join(names) or '(none)'}")
        raise FeatureNotFound(f"{node_type} node {self.node_id(index)!r} has no value for feature {feature!r}; "
                              f"features present on this node: {', '.join(features) or '(none)'}")

    def features_at(self, index: int) -> dict[str, Any]:
        self._live(index)
        entry = self._entries.get(index)
        if entry is None:
            return super().features_at(index)
        order = self.feature_names(entry["type"])
        features = entry["features"]
        return {name: fresh(features[name]) for name in order if name in features}

    def text_at(self, index: int) -> str:
        entry = self._entries.get(index)
        if entry is None:
            return super().text_at(index)
        key = self.text_key(entry["type"])
        value = entry["features"].get(key) if key else None
        if value is None:
            return self.node_id(index)
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    # topology --------------------------------------------------------------------------------------
    def _check_relation(self, index: int, relation: str) -> str:
        node_type = self.type_of_index(index)
        if relation not in self.relation_names(node_type):
            names = self.feature_names(node_type)
            hint = " (that is a feature; use NodeFeature)" if relation in names else ""
            raise RelationNotFound(f"{node_type} node {self.node_id(index)!r} has no relation {relation!r}{hint}; "
                                   f"{node_type} relations: {', '.join(self.relation_names(node_type)) or '(none)'}")
        return node_type

    def _neighbours(self, index: int, relation: str) -> tuple[np.ndarray, np.ndarray | None]:
        self._live(index)
        node_type = self._check_relation(index, relation)
        key = (index, relation)
        cached = self._resolved.get(key)
        if cached is not None:
            return cached
        override = self._overrides.get(key)
        entry = self._entries.get(index)
        if override is not None:
            targets = np.asarray([self._find(target) for target in override[0]], dtype=np.int64)
            weights = override[1]
            weighted = any(weight is not None for weight in weights) or (
                node_type in self._types and relation in self._types[node_type].relations
                and bool(self._types[node_type].relations[relation].get("weighted")))
            weight = np.asarray([1.0 if value is None else value for value in weights], dtype=np.float32) if weighted else None
            keep = targets >= 0
            result = (targets[keep], None if weight is None else weight[keep])
            for array in result:  # cached and shared by every later reader: never writable
                if array is not None:
                    array.setflags(write=False)
            self._resolved[key] = result  # bounded: one entry per changed neighbour list
        elif index >= self._base_count or (entry is not None and entry.get("fresh")) \
                or relation not in self._types[node_type].relations:
            result = (np.zeros(0, dtype=np.int64), None)
        else:
            targets = super().neighbor_indices(index, relation)
            weight = super().neighbor_weights(index, relation)
            if self._any_deleted:
                keep = ~self._deleted[targets]
                if not keep.all():
                    targets, weight = targets[keep], None if weight is None else weight[keep]
            result = (targets, weight)
        return result

    def neighbor_id_list(self, index: int, relation: str, limit: int | None = None) -> list[str]:
        """Neighbour ids in stored order, dangling ones (naming no node) included, as the base
        gives them; deleted nodes are left out."""
        self._live(index)
        node_type = self._check_relation(index, relation)
        override = self._overrides.get((index, relation))
        entry = self._entries.get(index)
        if override is not None:
            ids = [target for target in override[0] if target not in self._deleted_ids]
        elif index >= self._base_count or (entry is not None and entry.get("fresh")) \
                or relation not in self._types[node_type].relations:
            ids = []
        else:
            ids = super().neighbor_id_list(index, relation)
            if self._deleted_ids:
                ids = [target for target in ids if target not in self._deleted_ids]
        return ids if limit is None else ids[: max(limit, 0)]

    def dangling_count_at(self, index: int, relation: str) -> int:
        return len(self.neighbor_id_list(index, relation)) - len(self._neighbours(index, relation)[0])

    def neighbors(self, node_id: str, relation: str) -> list[str]:
        return self.neighbor_id_list(self.index(node_id), relation)

    def neighbor_indices(self, index: int, relation: str) -> np.ndarray:
        return self._neighbours(index, relation)[0]

    def edge_feature_names(self, node_type: str, relation: str) -> list[str]:
        return super().edge_feature_names(node_type, relation) if node_type in self._types else []

    def edge_features_at(self, index: int, relation: str) -> list[dict]:
        """Edge features aligned with ``neighbor_indices``: the base's; in a list an update
        changed, an edge the base had keeps its features and a new edge has none (updates do
        not write edge features)."""
        targets, _ = self._neighbours(index, relation)
        node_type = self.type_of_index(index)
        entry = self._entries.get(index)
        if (index >= self._base_count or (entry is not None and entry.get("fresh"))
                or relation not in self._types[node_type].relations):
            return [{} for _ in range(len(targets))]
        features = super().edge_features_at(index, relation)
        if self._overrides.get((index, relation)) is not None:
            by_target: dict[int, list[dict]] = {}
            for target, values in zip(super().neighbor_index_list(index, relation), features):
                by_target.setdefault(target, []).append(values)
            return [by_target[target].pop(0) if by_target.get(target) else {} for target in targets.tolist()]
        if self._any_deleted:
            keep = ~self._deleted[super().neighbor_indices(index, relation)]
            features = [values for values, kept in zip(features, keep.tolist()) if kept]
        return features

    def neighbor_index_list(self, index: int, relation: str) -> list[int]:
        return self._neighbours(index, relation)[0].tolist()

    def neighbor_weights(self, index: int, relation: str) -> np.ndarray | None:
        return self._neighbours(index, relation)[1]

    def degree_at(self, index: int, relation: str) -> int:
        """Length of the neighbour list, dangling ids included (as the base counts)."""
        return len(self.neighbor_id_list(index, relation))

    def total_degree(self, indices: np.ndarray) -> np.ndarray:
        indices = np.asarray(indices, dtype=np.int64)
        base = indices < self._base_count
        result = np.zeros(len(indices), dtype=np.int64)
        if base.any():
            result[base] = super().total_degree(indices[base])
        for position in np.flatnonzero(~base | self._changed[indices]).tolist():
            index = int(indices[position])
            if self._deleted[index]:
                continue
            result[position] = sum(self.degree_at(index, name) for name in self.relation_names(self.type_of_index(index)))
        return result

    # versions --------------------------------------------------------------------------------------
    def content_digest(self, node_id: str, config=None) -> str:
        """A digest of the node's vertex chunk text: part of its reuse key (graph/tools/chunks.py)."""
        from glmcot.graph.tools.chunks import DEFAULT_CHUNK_CONFIG, render_chunk

        text = render_chunk(self, node_id, config or DEFAULT_CHUNK_CONFIG)
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]

    def info(self) -> dict:
        info = super().info()
        info["version"] = self.version
        info["nodes"] = self.live_nodes
        info["delta"] = {"nodes": len(self.delta.nodes), "edge_lists": sum(len(r) for r in self.delta.edges.values()),
                         "new_nodes": len(self._new_ids), "deleted_nodes": int(self._deleted.sum())}
        return info


__all__ = ["MergedGraph"]
