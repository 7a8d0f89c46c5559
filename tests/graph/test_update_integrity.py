"""Graph updates under attack: values readers get cannot be changed, every field of an operation
has one exact type, nothing half-applies, and derived structures follow (issue 30)."""

import json

import numpy as np
import pytest

from glmcot.graph.tools.chunks import render_chunk
from glmcot.graph.updates.delta import parse_operation, read_operations
from glmcot.graph.errors import GraphFormatError
from glmcot.graph.tools.primitives import GraphTools
from glmcot.graph.storage.store import Graph
from glmcot.graph.updates.versions import CURRENT, READERS, VersionInfo, apply_update, compact, open_version, pin_version, unpin
from glmcot.graph.storage.writer import StoreWriter


def build(path):
    with StoreWriter(path) as writer:
        writer.add_nodes("movie", ["m1", "m2"], {"title": ["Heat", "Alien"], "year": [1995, 1979],
                                                 "rating": [8.3, 8.5], "tags": [["crime"], ["space"]],
                                                 "extra": [{"a": 1}, ["x", 2]]})
        writer.add_nodes("person", ["p1", "p2"], {"name": ["Al Pacino", "Sigourney Weaver"]})
        writer.add_edges("movie", "actor", np.array([0, 1]), np.array([2, 3]))
        writer.add_edges("person", "actor_of", np.array([2, 3]), np.array([0, 1]))
    return path


def ops(*rows):
    return [parse_operation(row, f"op {number}") for number, row in enumerate(rows, 1)]


@pytest.fixture
def store(tmp_path):
    return build(tmp_path / "store")


@pytest.fixture
def updated(store):
    apply_update(store, ops({"op": "upsert_node", "id": "m1", "features": {
        "tags": ["crime", "heist"], "extra": {"cast": ["Al"], "budget": {"usd": 60}}}}))
    return store


# Critical 1: values handed out are fresh ------------------------------------------------------------

def test_values_from_a_delta_are_fresh_copies(updated):
    graph = Graph.open(updated)
    index = graph.index("m1")
    tags = graph.feature_at(index, "tags")
    tags.append("FORGED")
    extra = graph.feature_at(index, "extra")
    extra["cast"].append("FORGED")
    extra["budget"]["usd"] = -1
    extra["new"] = 1
    graph.features_at(index)["tags"].append("FORGED")
    assert graph.feature_at(index, "tags") == ["crime", "heist"]
    assert graph.feature_at(index, "extra") == {"cast": ["Al"], "budget": {"usd": 60}}
    assert "FORGED" not in render_chunk(graph, "m1") and "-1" not in render_chunk(graph, "m1")


@pytest.mark.parametrize("fresh_store", ["base", "delta"])
def test_a_primitive_caller_cannot_change_what_the_next_caller_reads(store, updated, fresh_store):
    graph = Graph.open(updated) if fresh_store == "delta" else Graph.open(updated, follow_updates=False)
    tools = GraphTools(graph)
    first = tools.NodeFeature("m1", "tags")
    first.append("FORGED")
    first_extra = tools.NodeFeature("m1", "extra")
    (first_extra.setdefault("cast", []) if isinstance(first_extra, dict) else first_extra).append("FORGED")
    chunk = tools.NodeInfo("m1")
    neighbours = tools.NeighbourCheck("m1", "actor")
    neighbours.append("FORGED")
    assert "FORGED" not in tools.NodeFeature("m1", "tags") and "FORGED" not in json.dumps(tools.NodeFeature("m1", "extra"))
    assert tools.NodeInfo("m1") == chunk and "FORGED" not in chunk
    assert tools.NeighbourCheck("m1", "actor") == ["p1"]


def test_cached_neighbour_arrays_are_read_only(updated):
    apply_update(updated, ops({"op": "upsert_edge", "source": "m1", "relation": "actor", "target": "p2", "weight": 2.0}))
    graph = Graph.open(updated)
    targets = graph.neighbor_indices(graph.index("m1"), "actor")
    with pytest.raises(ValueError):
        targets[0] = 3
    assert graph.neighbors("m1", "actor") == ["p1", "p2"]


# Critical 2: exact types, all or nothing -----------------------------------------------------------

@pytest.mark.parametrize("replace", ["false", "no", "0", 0, 1, None, [], "true"])
def test_replace_must_be_a_json_boolean(store, tmp_path, replace):
    line = json.dumps({"op": "upsert_node", "id": "m1", "features": {"year": 2000}, "replace": replace})
    path = tmp_path / "changes.jsonl"
    path.write_text('{"op": "upsert_node", "id": "m2", "features": {"year": 1980}}\n' + line + "\n")
    with pytest.raises(GraphFormatError, match=r"changes.jsonl: line 2: field 'replace' must be true or false"):
        apply_update(store, read_operations(path))
    assert not (store / CURRENT).exists()
    graph = Graph.open(store)
    assert graph.features_at(graph.index("m1"))["title"] == "Heat" and graph.feature("m2", "year") == 1979


def test_replace_true_and_false_do_what_they_say(store):
    apply_update(store, ops({"op": "upsert_node", "id": "m1", "features": {"year": 2000}, "replace": False},
                            {"op": "upsert_node", "id": "m2", "features": {"year": 1980}, "replace": True}))
    graph = Graph.open(store)
    assert graph.feature("m1", "title") == "Heat" and graph.features_at(graph.index("m2")) == {"year": 1980}


@pytest.mark.parametrize("bad, message", [
    ({"op": "upsert_node", "id": "m1", "features": {"year": 2000}, "replce": True}, "upsert_node has no field 'replce'"),
    ({"op": "upsert_node", "id": 7, "type": "movie"}, "field 'id' must be a non-empty string, got 7"),
    ({"op": "delete_edge", "source": "m1", "relation": "actor", "target": "p1", "weight": 1}, "delete_edge has no field 'weight'"),
    ({"op": "upsert_edge", "source": "m1", "relation": "actor", "target": "p2", "weight": True}, "field 'weight' must be a finite"),
    ({"op": "upsert_node", "id": "m1", "features": [["year", 1]]}, "field 'features' must be an object"),
    ({"op": "upsert_node", "id": "m\ud800", "type": "movie"}, "field 'id' holds a lone surrogate"),
    ({"op": "upsert_node", "id": "m1", "features": {"title": "Heat\udfff"}}, "feature 'title' holds a lone surrogate"),
    ({"op": "upsert_node", "id": "m1", "features": {"ti\ud800tle": "x"}}, "lone surrogate"),
    ({"op": "upsert_node", "id": "m1", "features": {"extra": {"k": ["\ud800"]}}}, "feature 'extra' holds a lone surrogate"),
    ({"op": "upsert_edge", "source": "m1", "relation": "act\ud800", "target": "p2"}, "field 'relation' holds a lone surrogate"),
    ({"op": "upsert_node", "id": "m1", "features": {"": 1}}, "empty feature name"),
    ({"op": "upsert_node", "id": "m1", "features": {"  ": 1}}, "empty feature name"),
    ({"op": "upsert_node", "id": "m1", "features": {"extra": {"x": float("inf")}}}, "use null to remove"),
    ({"op": "delete_edge", "source": "ghost", "relation": "actor", "target": "p1"}, "no node 'ghost'"),
    ({"op": "upsert_edge", "source": "m1", "relation": "actor", "target": "p2", "weight": 10**400}, "field 'weight' must be a finite"),
    ({"op": "delete_edge", "source": "m1", "relation": "unknown", "target": "p1"}, "no edge m1 -unknown-> p1"),
])
def test_bad_fields_are_refused_and_commit_nothing(store, bad, message):
    with pytest.raises(GraphFormatError, match=message):
        apply_update(store, ops({"op": "upsert_node", "id": "m1", "features": {"year": 2000}}, bad))
    assert not (store / CURRENT).exists() and Graph.open(store).feature("m1", "year") == 1995


def test_lone_surrogate_escapes_in_a_file_name_the_line(store, tmp_path):
    path = tmp_path / "changes.jsonl"
    path.write_bytes(b'{"op": "upsert_node", "id": "m1", "features": {"title": "\\ud800"}}\n')
    with pytest.raises(GraphFormatError, match=r"line 1: feature 'title' holds a lone surrogate"):
        apply_update(store, read_operations(path))
    path.write_bytes(b'{"op": "delete_node", "id": "m\xff1"}\n')
    with pytest.raises(GraphFormatError, match=r"line 1: not UTF-8"):
        apply_update(store, read_operations(path))
    assert not (store / CURRENT).exists()


def test_a_value_keeps_its_columns_kind(store):
    for bad, message in (
        ({"year": ["1995"]}, "feature 'year' of 'movie' nodes holds int values; \\['1995'\\] is a list value"),
        ({"tags": "crime"}, "holds list values"),
        ({"title": 3}, "holds str values"),
        ({"year": 2000.5}, "holds int values"),
        ({"year": 2**70}, "holds int values; 1180591620717411303424 is a json value"),
    ):
        with pytest.raises(GraphFormatError, match=message):
            apply_update(store, ops({"op": "upsert_node", "id": "m1", "features": bad}))
    with pytest.raises(GraphFormatError, match="feature 'score' of 'movie' nodes holds int values"):
        apply_update(store, ops({"op": "upsert_node", "id": "m1", "features": {"score": 3}},
                                {"op": "upsert_node", "id": "m2", "features": {"score": "high"}}))
    assert not (store / CURRENT).exists()
    apply_update(store, ops({"op": "upsert_node", "id": "m1", "features": {"rating": 9, "extra": "any JSON", "score": 1}},
                            {"op": "upsert_node", "id": "m2", "features": {"extra": [[1]], "score": 2}}))
    graph = Graph.open(store)
    assert graph.feature("m1", "rating") == 9.0 and isinstance(graph.feature("m1", "rating"), float)
    compact(store)
    graph = Graph.open(store)
    assert graph.feature_kind("movie", "year") == "int" and graph.feature_kind("movie", "rating") == "float"
    assert graph.feature("m1", "extra") == "any JSON" and graph.feature("m2", "extra") == [[1]]
    assert graph.feature_kind("movie", "score") == "int"


def test_values_nest_at_most_as_deep_as_the_importer_reads(store):
    value = "x"
    for _ in range(64):
        value = [value, 1]
    apply_update(store, ops({"op": "upsert_node", "id": "m1", "features": {"extra": value}}))
    with pytest.raises(GraphFormatError, match="nests deeper than 64 levels"):
        apply_update(store, ops({"op": "upsert_node", "id": "m1", "features": {"extra": [value, 1]}}))
    assert Graph.open(store).version == 1
    compact(store)  # the deepest accepted value compacts
    assert Graph.open(store).feature("m1", "extra") == value


# Derived structures ----------------------------------------------------------------------------------

def test_reverse_edges_follow_json_lines_updates(tmp_path):
    from glmcot.graph.importers.tables import import_tables

    tables = tmp_path / "tables"
    tables.mkdir()
    (tables / "movies.csv").write_text(":ID,title,:LABEL\nm1,Heat,movie\nm2,Alien,movie\n")
    (tables / "people.csv").write_text(":ID,name,:LABEL\np1,Al,person\np2,Sigourney,person\n")
    (tables / "cast.csv").write_text(":START_ID,:END_ID,:TYPE\nm1,p1,actor\n")
    store = tmp_path / "store"
    import_tables(tables, store, reverse_suffix="_of")
    apply_update(store, ops({"op": "upsert_edge", "source": "m2", "relation": "actor", "target": "p2"},
                            {"op": "upsert_edge", "source": "m2", "relation": "actor", "target": "p1"},
                            {"op": "delete_edge", "source": "m1", "relation": "actor", "target": "p1"}))
    graph = Graph.open(store)
    assert graph.neighbors("p2", "actor_of") == ["m2"] and graph.neighbors("p1", "actor_of") == ["m2"]
    assert graph.neighbors("m1", "actor") == [] and graph.degree("p1", "actor_of") == 1
    assert "Alien <m2>" in render_chunk(graph, "p1") and "Heat" not in render_chunk(graph, "p1")
    compact(store)
    apply_update(store, ops({"op": "upsert_edge", "source": "m1", "relation": "actor", "target": "p2"}))
    assert Graph.open(store).neighbors("p2", "actor_of") == ["m2", "m1"]  # compaction kept the suffix


def test_degrees_follow_edge_only_updates(store):
    base = Graph.open(store)
    assert base.total_degree(np.array([base.index("p1")])).tolist() == [1]
    apply_update(store, ops({"op": "upsert_edge", "source": "p1", "relation": "actor_of", "target": "m2"}))
    graph = Graph.open(store)
    assert graph.total_degree(np.array([graph.index("p1")])).tolist() == [2]


# High 3: one version per reader ------------------------------------------------------------------------

def test_a_pinned_version_stays_on_disk_until_unpinned(store):
    apply_update(store, ops({"op": "upsert_node", "id": "m1", "features": {"year": 2001}}))
    first = open_version(store)
    pin = pin_version(store, first.pinned_version)
    apply_update(store, ops({"op": "upsert_node", "id": "m1", "features": {"year": 2002}}))
    compact(store)
    apply_update(store, ops({"op": "upsert_node", "id": "m1", "features": {"year": 2003}}))
    pinned = json.loads(pin.read_text())
    pinned.pop("pid")
    again = open_version(store, VersionInfo(**pinned))
    assert again.feature("m1", "year") == 2001 and Graph.open(store).feature("m1", "year") == 2003
    unpin(pin)
    apply_update(store, ops({"op": "upsert_node", "id": "m1", "features": {"year": 2004}}))
    assert not (store / first.pinned_version.delta).exists()  # collected once nobody holds it
    assert not list((store / READERS).iterdir())


def test_pins_of_dead_processes_are_dropped(store):
    apply_update(store, ops({"op": "upsert_node", "id": "m1", "features": {"year": 2001}}))
    (store / READERS).mkdir(exist_ok=True)
    (store / READERS / "1-dead.json").write_text(json.dumps({"pid": 2**22 + 12345, "base": ".", "delta": "deltas/v000001.json"}))
    apply_update(store, ops({"op": "upsert_node", "id": "m1", "features": {"year": 2002}}))
    assert not (store / "deltas" / "v000001.json").exists() and not (store / READERS / "1-dead.json").exists()


# Update cost: bounded by auto-compaction ---------------------------------------------------------------

def test_an_update_past_the_delta_size_compacts(store):
    small = apply_update(store, ops({"op": "upsert_node", "id": "m1", "features": {"year": 2001}}))
    assert not small.compacted and small.delta_bytes > 0 and VersionInfo.read(store).delta is not None
    big = apply_update(store, ops({"op": "upsert_node", "id": "m2", "features": {"title": "Alien " * 50}}),
                       auto_compact_bytes=small.delta_bytes)
    assert big.compacted and big.version == 3
    info = VersionInfo.read(store)
    assert info.version == 3 and info.delta is None and info.base == "bases/v000003"
    graph = Graph.open(store)
    assert graph.feature("m1", "year") == 2001 and graph.feature("m2", "title") == "Alien " * 50
    never = apply_update(store, ops({"op": "upsert_node", "id": "m2", "features": {"year": 1}}), auto_compact_bytes=0)
    assert not never.compacted and never.version == 4
