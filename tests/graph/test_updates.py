import json
from pathlib import Path

import numpy as np
import pytest

from glmcot.graph.tools.chunks import chunk_key, render_chunk
from glmcot.graph.updates.delta import parse_operation, read_operations
from glmcot.graph.errors import FeatureNotFound, GraphFormatError, NodeNotFound
from glmcot.graph.storage.store import Graph
from glmcot.graph.updates.versions import CURRENT, VersionInfo, apply_update, compact
from glmcot.graph.storage.writer import StoreWriter


def build(path):
    with StoreWriter(path) as writer:
        writer.add_nodes("movie", ["m1", "m2"], {"title": ["Heat", "Alien"], "year": [1995, 1979]})
        writer.add_nodes("person", ["p1", "p2"], {"name": ["Al Pacino", "Sigourney Weaver"]})
        writer.add_edges("movie", "actor", np.array([0, 1]), np.array([2, 3]))
        writer.add_edges("person", "actor_of", np.array([2, 3]), np.array([0, 1]))
    return path


def ops(*rows):
    return [parse_operation(row, f"op {number}") for number, row in enumerate(rows, 1)]


@pytest.fixture
def store(tmp_path):
    return build(tmp_path / "store")


def test_upsert_and_delete_merge_over_the_base(store):
    result = apply_update(store, ops(
        {"op": "upsert_node", "id": "m3", "type": "movie", "features": {"title": "Ronin", "year": 1998, "studio": "MGM"}},
        {"op": "upsert_edge", "source": "m3", "relation": "actor", "target": "p1", "weight": 2.0},
        {"op": "upsert_edge", "source": "p1", "relation": "actor_of", "target": "m3"},
        {"op": "upsert_node", "id": "m1", "features": {"year": 1996, "title": None}},
        {"op": "upsert_node", "id": "g1", "type": "genre", "features": {"name": "Crime"}},
        {"op": "upsert_edge", "source": "m1", "relation": "genre", "target": "g1"},
    ))
    assert result.version == 1 and result.report.upserted_nodes == 3 and result.report.upserted_edges == 3
    graph = Graph.open(store)
    assert graph.version == 1
    assert graph.feature("m3", "studio") == "MGM" and graph.node_type("m3") == "movie"
    assert graph.neighbors("m3", "actor") == ["p1"] and graph.neighbors("p1", "actor_of") == ["m1", "m3"]
    assert graph.feature("m1", "year") == 1996
    with pytest.raises(FeatureNotFound, match="no value for feature 'title'"):
        graph.feature("m1", "title")
    assert graph.text_at(graph.index("m1")) == "m1"  # no title any more: the id is its text
    assert graph.neighbors("m1", "genre") == ["g1"] and graph.node_types == ["movie", "person", "genre"]
    assert graph.neighbors("m2", "genre") == []  # a relation added for one movie exists for all
    assert "studio" in graph.feature_names("movie") and "genre" in graph.relation_names("movie")
    assert graph.count("movie") == 3 and graph.live_nodes == 6
    assert Graph.open(store, follow_updates=False).feature("m1", "year") == 1995  # the base never changes


def test_delete_a_node_others_point_to(store):
    apply_update(store, ops({"op": "delete_node", "id": "p1"}))
    graph = Graph.open(store)
    assert not graph.has_node("p1")
    with pytest.raises(NodeNotFound):
        graph.index("p1")
    assert graph.neighbors("m1", "actor") == [] and graph.degree("m1", "actor") == 0
    assert "p1" not in render_chunk(graph, "m1")
    apply_update(store, ops({"op": "upsert_node", "id": "p1", "type": "person", "features": {"name": "Al"}}))
    again = Graph.open(store)
    assert again.feature("p1", "name") == "Al" and again.neighbors("p1", "actor_of") == []  # no base edges return
    assert again.version == 2


@pytest.mark.parametrize("bad, message", [
    ({"op": "upsert_node", "id": "zz", "features": {}}, "new node 'zz' needs a 'type'"),
    ({"op": "upsert_node", "id": "m1", "type": "person"}, "is a 'movie', not a 'person'"),
    ({"op": "upsert_edge", "source": "m1", "relation": "actor", "target": "nobody"}, "no node 'nobody'"),
    ({"op": "delete_node", "id": "nobody"}, "no such node"),
    ({"op": "delete_edge", "source": "m1", "relation": "actor", "target": "p2"}, "no edge m1 -actor-> p2"),
    ({"op": "rename", "id": "m1"}, "'op' must be one of"),
    ({"op": "upsert_node", "id": "m1", "features": {"year": float("nan")}}, "use null to remove"),
    ({"op": "upsert_edge", "source": "m1", "relation": "actor", "target": "p1", "weight": "x"}, "finite number"),
])
def test_bad_operations_commit_nothing(store, bad, message):
    good = {"op": "upsert_node", "id": "m1", "features": {"year": 2000}}
    with pytest.raises(GraphFormatError, match=message):
        apply_update(store, [parse_operation(good, "op 1"), parse_operation(bad, "op 2")])
    assert not (store / CURRENT).exists()
    assert Graph.open(store).feature("m1", "year") == 1995


def test_operations_file_errors_name_the_line(tmp_path, store):
    path = tmp_path / "changes.jsonl"
    path.write_text('{"op": "delete_node", "id": "m2"}\n\n{"op": "upsert_node", "id": \n')
    with pytest.raises(GraphFormatError, match=r"changes.jsonl: line 3: not JSON"):
        apply_update(store, read_operations(path))
    assert not (store / CURRENT).exists()


@pytest.mark.parametrize("step", ["delta-written", "before-commit"])
def test_a_crash_during_an_update_keeps_the_last_version(store, step):
    apply_update(store, ops({"op": "upsert_node", "id": "m1", "features": {"year": 2001}}))

    def crash(at):
        if at == step:
            raise KeyboardInterrupt("power cut")

    with pytest.raises(KeyboardInterrupt):
        apply_update(store, ops({"op": "upsert_node", "id": "m1", "features": {"year": 2002}}), crash=crash)
    graph = Graph.open(store)
    assert graph.version == 1 and graph.feature("m1", "year") == 2001
    result = apply_update(store, ops({"op": "upsert_node", "id": "m2", "features": {"year": 1980}}))
    assert result.version == 2
    assert sorted(path.name for path in (store / "deltas").iterdir()) == ["v000002.json"]  # the orphan is gone


def test_update_then_compact_and_a_crash_during_compaction(store):
    apply_update(store, ops(
        {"op": "upsert_node", "id": "m3", "type": "movie", "features": {"title": "Ronin"}},
        {"op": "upsert_edge", "source": "m3", "relation": "actor", "target": "p2", "weight": 3.0},
        {"op": "delete_node", "id": "m2"},
    ))
    before = Graph.open(store)
    expected = {node_id: (before.features_at(before.index(node_id)), render_chunk(before, node_id))
                for node_id in ("m1", "m3", "p1", "p2")}

    def crash(at):
        if at == "base-written":
            raise KeyboardInterrupt("power cut")

    with pytest.raises(KeyboardInterrupt):
        compact(store, crash=crash)
    assert VersionInfo.read(store).version == 1 and Graph.open(store).feature("m3", "title") == "Ronin"
    version = compact(store)
    assert version == 2
    after = Graph.open(store)
    assert after.version == 2 and not after.delta.nodes and after.directory.name == "v000002"
    assert not after.has_node("m2") and after.num_nodes == 4
    for node_id, (features, chunk) in expected.items():
        assert after.features_at(after.index(node_id)) == features
        assert render_chunk(after, node_id) == chunk
    assert after.neighbor_weights(after.index("m3"), "actor").tolist() == [3.0]
    apply_update(store, ops({"op": "upsert_node", "id": "m1", "features": {"year": 1997}}))
    assert Graph.open(store).feature("m1", "year") == 1997 and Graph.open(store).version == 3


def test_chunk_key_follows_content(store):
    base = Graph.open(store)
    old_key, old_chunk = chunk_key(base, "m1"), render_chunk(base, "m1")
    apply_update(store, ops({"op": "upsert_node", "id": "p2", "features": {"year": 1}}))
    unchanged = Graph.open(store)
    first = chunk_key(unchanged, "m1")
    apply_update(store, ops({"op": "upsert_node", "id": "p1", "features": {"name": "Alfredo Pacino"}}))
    changed = Graph.open(store)
    assert "Alfredo Pacino" in render_chunk(changed, "m1") and render_chunk(changed, "m1") != old_chunk
    assert chunk_key(changed, "m1") != first != old_key  # a neighbour's new name changes m1's chunk key
    apply_update(store, ops({"op": "upsert_node", "id": "m2", "features": {"year": 1980}}))
    assert chunk_key(Graph.open(store), "m1") == chunk_key(changed, "m1")  # same text, same key


def test_update_and_compact_commands(tmp_path, store):
    from typer.testing import CliRunner

    from glmcot.cli import app

    runner = CliRunner()
    changes = tmp_path / "changes"
    changes.mkdir()
    (changes / "movies.csv").write_text(":ID,title,year:int,:LABEL\nm1,Heat (1995),,movie\nm9,Ronin,1998,movie\n")
    (changes / "cast.csv").write_text(":START_ID,:END_ID,:TYPE\nm9,p1,actor\n")
    result = runner.invoke(app, ["graph", "update", str(store), str(changes), "--reverse-suffix", "_of", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["delta_bytes"] > 0
    assert payload | {"seconds": 0, "delta_bytes": 0} == {
        "store": str(store), "version": 1, "seconds": 0, "embedded": 0, "upserted_nodes": 2, "deleted_nodes": 0,
        "upserted_edges": 2, "deleted_edges": 0, "text_changed": 2, "compacted": False, "delta_bytes": 0}
    graph = Graph.open(store)
    assert graph.feature("m1", "title") == "Heat (1995)" and graph.feature("m1", "year") == 1995  # kept
    assert graph.neighbors("p1", "actor_of") == ["m1", "m9"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"op": "delete_node", "id": "zz"}\n')
    failed = runner.invoke(app, ["graph", "update", str(store), str(bad)])
    assert failed.exit_code == 1 and "bad.jsonl: line 1: cannot delete 'zz': no such node" in failed.output
    assert Graph.open(store).version == 1
    compacted = runner.invoke(app, ["graph", "compact", str(store), "--json"])
    assert compacted.exit_code == 0 and json.loads(compacted.output)["version"] == 2
    assert runner.invoke(app, ["graph", "call", str(store), 'NeighbourCheck("m9", "actor")']).output == "['p1']\n"


def test_dangling_neighbour_ids_survive_updates_and_compaction(tmp_path):
    from glmcot.graph.importers.importer import import_graph_json

    source = tmp_path / "graph.json"
    source.write_text(json.dumps({
        "paper_nodes": {"p1": {"features": {"title": "A"}, "neighbors": {"author": ["a1", "ghost", "a2"]}},
                        "p2": {"features": {"title": "B"}, "neighbors": {"author": ["a2"]}}},
        "author_nodes": {"a1": {"features": {"name": "X"}, "neighbors": {}}, "a2": {"features": {"name": "Y"}, "neighbors": {}}},
    }))
    import_graph_json(source, tmp_path / "store")
    store = tmp_path / "store"
    assert Graph.open(store).neighbors("p1", "author") == ["a1", "ghost", "a2"]
    apply_update(store, ops({"op": "upsert_edge", "source": "p1", "relation": "author", "target": "a2", "weight": 2.0},
                            {"op": "delete_node", "id": "a1"}))
    graph = Graph.open(store)
    assert graph.neighbors("p1", "author") == ["ghost", "a2"] and graph.degree("p1", "author") == 2
    compact(store)
    compacted = Graph.open(store)
    assert compacted.neighbors("p1", "author") == ["ghost", "a2"] and compacted.degree("p1", "author") == 2
    assert compacted.neighbors("p2", "author") == ["a2"]


def test_null_features_and_absent_relation_keys_survive_updates_and_compaction(tmp_path):
    from glmcot.graph.importers.importer import import_graph_json

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "grbench"
    for name, check in (
        ("goodreads_null_features.json",
         lambda g: g.features_at(g.index("pub_12")) == {"name": None} and g.feature("21366268", "description") is None),
        ("biomedical_absent_relation_keys.json",
         lambda g: not g.has_relation_key_at(g.index("DB01412"), "Compound-treats-Disease")
         and g.has_relation_key_at(g.index("DB00201"), "Compound-treats-Disease")),
    ):
        store = tmp_path / name
        import_graph_json(fixtures / name, store)
        any_id = Graph.open(store).node_id(0)
        apply_update(store, ops({"op": "upsert_node", "id": any_id, "features": {"note": "changed"}}))
        compact(store)
        assert check(Graph.open(store)), name
