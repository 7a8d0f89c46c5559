import json

import numpy as np
import pytest

from glmcot.graph.errors import GraphFormatError
from glmcot.graph.storage.layout import STORE_FORMAT_VERSION
from glmcot.graph.storage.store import Graph
from glmcot.graph.storage.writer import StoreWriter
from glmcot.graph.errors import FeatureNotFound, NodeNotFound, RelationNotFound


def test_schema_and_counts(tiny):
    assert tiny.node_types == ["paper", "author", "venue"]
    assert tiny.num_nodes == 8
    assert tiny.num_edges == 6 + 6 + 2 + 3 + 2
    assert tiny.feature_names("paper") == ["title", "year", "keywords"]
    assert tiny.relation_names("paper") == ["author", "venue", "cited_by"]
    assert tiny.text_key("paper") == "title"
    assert tiny.text_key("author") == "name"


def test_ids_and_types(tiny):
    for index in range(tiny.num_nodes):
        node_id = tiny.node_id(index)
        assert tiny.index(node_id) == index
    assert tiny.node_type("a2") == "author"
    assert tiny.node_type("pub_1") == "venue"
    assert tiny.has_node("p1") and not tiny.has_node("p9") and not tiny.has_node("")
    with pytest.raises(NodeNotFound, match="no such node"):
        tiny.index("p9")


def test_features_round_trip(tiny):
    assert tiny.feature("p4", "title") == "Zürich Graphs ✓"
    assert tiny.feature("p1", "year") == 2024 and isinstance(tiny.feature("p1", "year"), int)
    assert tiny.feature("p1", "keywords") == ["graphs", "llm"]
    assert tiny.feature("p3", "keywords") == []
    with pytest.raises(FeatureNotFound, match="features present on this node: title$"):
        tiny.feature("p4", "year")
    with pytest.raises(FeatureNotFound, match="paper features: title, year, keywords"):
        tiny.feature("p1", "abstract")


def test_neighbours_keep_order_and_degree(tiny):
    assert tiny.neighbors("p3", "author") == ["a1", "a2", "a3"]
    assert tiny.neighbors("p1", "cited_by") == ["p2"]
    assert tiny.neighbors("p3", "cited_by") == ["p1", "p2"]
    assert tiny.neighbors("p4", "author") == []
    assert tiny.degree("a1", "paper") == 3
    assert tiny.neighbor_indices(tiny.index("p1"), "author").tolist() == [4, 5]
    with pytest.raises(RelationNotFound, match="paper relations: author, venue, cited_by"):
        tiny.neighbors("p1", "writer")
    with pytest.raises(RelationNotFound, match="that is a feature"):
        tiny.neighbors("p1", "title")


def test_edges_added_in_pieces_are_grouped_in_call_order(tmp_path):
    with StoreWriter(tmp_path / "g") as writer:
        writer.add_nodes("n", ["x", "y", "z"], {})
        writer.add_edges("n", "r", np.array([1, 0]), np.array([2, 1]))
        writer.add_edges("n", "r", np.array([0, 1]), np.array([0, 0]))
    graph = Graph.open(tmp_path / "g")
    assert graph.neighbors("x", "r") == ["y", "x"]
    assert graph.neighbors("y", "r") == ["z", "x"]
    assert graph.neighbors("z", "r") == []


def test_mixed_and_numeric_columns(tmp_path):
    with StoreWriter(tmp_path / "g") as writer:
        writer.add_nodes(
            "item",
            ["i1", "i2", "i3"],
            {
                "price": [1.5, 2, None],
                "mixed": ["12.99", 3, ["a"]],
                "flag": [True, False, None],
                "count": np.array([7, 8, 9]),
                "meta": [{"k": 1}, None, None],
            },
        )
    graph = Graph.open(tmp_path / "g")
    # ints stay ints next to floats, as json.load would give them
    assert graph.feature("i1", "price") == 1.5 and type(graph.feature("i2", "price")) is int
    assert [graph.feature(i, "mixed") for i in ("i1", "i2", "i3")] == ["12.99", 3, ["a"]]
    assert graph.feature("i2", "flag") is False
    assert graph.feature("i3", "count") == 9
    assert graph.feature("i1", "meta") == {"k": 1}
    kinds = {t["type"]: t["features"] for t in graph.info()["types"]}["item"]
    assert kinds == {"price": "json", "mixed": "json", "flag": "bool", "count": "int", "meta": "json"}


def test_feature_first_seen_in_a_later_batch(tmp_path):
    with StoreWriter(tmp_path / "g") as writer:
        writer.add_nodes("n", ["a", "b"], {"x": ["1", "2"]})
        writer.add_nodes("n", ["c"], {"y": ["3"]})
    graph = Graph.open(tmp_path / "g")
    assert graph.feature("c", "y") == "3"
    assert not graph.has_feature_at(graph.index("a"), "y")
    assert not graph.has_feature_at(graph.index("c"), "x")


def test_duplicate_ids_across_types_fail_and_leave_nothing(tmp_path):
    with pytest.raises(GraphFormatError, match="duplicate node id 'x' in types 'a' and 'b'"):
        with StoreWriter(tmp_path / "g") as writer:
            writer.add_nodes("a", ["x", "y"], {})
            writer.add_nodes("b", ["x"], {})
    assert list(tmp_path.iterdir()) == []


def test_exception_inside_writer_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        with StoreWriter(tmp_path / "g") as writer:
            writer.add_nodes("a", ["x"], {})
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_bad_edges_are_rejected(tmp_path):
    with pytest.raises(GraphFormatError, match="source index 1 is not a 'a' node"):
        with StoreWriter(tmp_path / "g") as writer:
            writer.add_nodes("a", ["x"], {})
            writer.add_nodes("b", ["y"], {})
            writer.add_edges("a", "r", np.array([1]), np.array([0]))
    with pytest.raises(GraphFormatError, match="destination index 5 out of range"):
        with StoreWriter(tmp_path / "h") as writer:
            writer.add_nodes("a", ["x"], {})
            writer.add_edges("a", "r", np.array([0]), np.array([5]))


def test_existing_output_needs_overwrite(tiny_dir, tmp_path):
    target = tmp_path / "g"
    with StoreWriter(target) as writer:
        writer.add_nodes("a", ["x"], {})
    with pytest.raises(FileExistsError):
        StoreWriter(target).__enter__()
    with StoreWriter(target, overwrite=True) as writer:
        writer.add_nodes("a", ["z"], {})
    assert Graph.open(target).node_id(0) == "z"


def test_refuses_other_major_version(tmp_path):
    with StoreWriter(tmp_path / "g") as writer:
        writer.add_nodes("a", ["x"], {})
    manifest_path = tmp_path / "g" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["version"] = "2.0"
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(GraphFormatError, match="version 2.0 is not supported"):
        Graph.open(tmp_path / "g")
    with pytest.raises(GraphFormatError, match="not a graph store"):
        Graph.open(tmp_path)
    assert STORE_FORMAT_VERSION.startswith("1.")


def test_compact_dtypes(tiny_dir):
    indptr = np.load(tiny_dir / "edges" / "r0.indptr.npy")
    dst = np.load(tiny_dir / "edges" / "r0.dst.npy")
    assert indptr.dtype == np.int32 and dst.dtype == np.int32
    assert isinstance(Graph.open(tiny_dir).neighbor_indices(0, "author"), np.memmap)


def test_lookups_survive_hash_collisions(tmp_path, monkeypatch):
    import glmcot.graph.storage.writer as writer_module

    # every id gets the same hash: lookups must fall back to comparing the id strings
    monkeypatch.setattr(writer_module, "hash_ids", lambda blob, offsets: np.zeros(len(offsets) - 1, np.uint64))
    with StoreWriter(tmp_path / "g") as writer:
        writer.add_nodes("a", ["x", "y", "zz"], {})
        writer.add_edges("a", "r", np.array([0, 2]), np.array([2, 1]))
    graph = Graph.open(tmp_path / "g")
    graph._hash = lambda data: 0
    assert [graph.index(i) for i in ("x", "y", "zz")] == [0, 1, 2]
    assert not graph.has_node("w")
    assert graph.neighbors("zz", "r") == ["y"]
    with pytest.raises(GraphFormatError, match="duplicate node id 'x' in types 'a' and 'b'"):
        with StoreWriter(tmp_path / "h") as writer:
            writer.add_nodes("a", ["x", "y"], {})
            writer.add_nodes("b", ["x"], {})  # not next to its twin in hash order


def test_id_hash_forms_agree():
    from glmcot.graph.storage.idhash import hash_id, hash_ids

    ids = ["a", "p1", "53e99784b7602d9701f3ffdd", "Zürich ✓", "x" * 300, "DOID:8778", "\x00\x00"]
    encoded = [i.encode() for i in ids]
    offsets = np.concatenate([[0], np.cumsum([len(e) for e in encoded])])
    assert hash_ids(b"".join(encoded), offsets).tolist() == [hash_id(e) for e in encoded]
    assert len(set(hash_ids(b"".join(encoded), offsets).tolist())) == len(ids)


def test_lookup_without_the_bucket_directory(tmp_path):
    # stores of format 1.0 have no id directory: lookups fall back to a binary search
    ids = [f"n{i}" for i in range(1000)]
    with StoreWriter(tmp_path / "g") as writer:
        writer.add_nodes("n", ids, {})
    manifest_path = tmp_path / "g" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    assert manifest["id_directory_bits"] == 9
    fast = Graph.open(tmp_path / "g")
    del manifest["id_directory_bits"]
    manifest["version"] = "1.0"
    manifest_path.write_text(json.dumps(manifest))
    slow = Graph.open(tmp_path / "g")
    for graph in (fast, slow):
        assert [graph.index(i) for i in ids] == list(range(1000))
        assert not graph.has_node("n1000") and not graph.has_node("x")


def test_incomplete_store_names_the_missing_file(tmp_path, tiny_builder):
    tiny_builder(tmp_path / "g")
    (tmp_path / "g" / "edges" / "r0.dst.npy").unlink()
    graph = Graph.open(tmp_path / "g")  # arrays are mapped lazily
    with pytest.raises(GraphFormatError, match="r0.dst.npy is missing"):
        graph.neighbors("p1", "author")
    (tmp_path / "g" / "nodes" / "ids.blob").unlink()
    with pytest.raises(GraphFormatError, match="ids.blob is missing"):
        Graph.open(tmp_path / "g")
