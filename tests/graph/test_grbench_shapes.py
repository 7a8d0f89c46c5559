"""The real GRBench files' shapes (grbench.md §9), one fixture per quirk under tests/fixtures/grbench.

Each test imports a fixture with glmcot and runs the same tool calls through glmcot's primitives
and through a straight re-implementation of the original Graph-CoT semantics (Python's
``json.load``, one flat ``id -> node`` index, ``str()`` of the stored value, ``len()`` of the
list, a KeyError for anything missing), and compares the outputs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from glmcot.graph.errors import GraphFormatError, GraphToolError, NodeNotFound
from glmcot.graph.tools.graphcot import GraphFunctions
from glmcot.graph.importers.importer import import_graph_json
from glmcot.graph.tools.primitives import GraphTools
from glmcot.graph.storage.store import Graph

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "grbench"
MISSING = "<KeyError>"


# the original semantics, re-implemented plainly --------------------------------------------------
def original_index(path: Path, flatten_depth_keys: bool = False) -> dict:
    with open(path, encoding="utf-8") as handle:
        graph = json.load(handle)  # takes NaN / Infinity, gives None for null
    index = {}
    for nodes in graph.values():
        for node_id, node in nodes.items():
            if flatten_depth_keys:  # GRBench's legal/id2idx.py: one list, concatenated in key order
                for relation, value in node["neighbors"].items():
                    if isinstance(value, dict):
                        node["neighbors"][relation] = sum([value[depth] for depth in value], [])
            index[node_id] = node
    return index


def original_call(index: dict, tool: str, node_id: str, name: str) -> str:
    try:
        if tool == "NodeFeature":
            return str(index[node_id]["features"][name])
        if tool == "NeighbourCheck":
            return str(index[node_id]["neighbors"][name])
        return str(len(index[node_id]["neighbors"][name]))
    except KeyError:
        return MISSING


def glmcot_call(tools: GraphTools, tool: str, node_id: str, name: str) -> str:
    try:
        return str(getattr(tools, tool)(node_id, name))
    except GraphToolError:
        return MISSING


def calls(index: dict, extra_ids=()):
    """Every (tool, node, name) the fixture supports, plus lookups of ids that name no node."""
    features = {name for node in index.values() for name in node["features"]}
    relations = {name for node in index.values() for name in node["neighbors"]}
    node_ids = list(index) + list(extra_ids)
    for node_id in node_ids:
        for name in sorted(features):
            yield "NodeFeature", node_id, name
        for name in sorted(relations):
            yield "NeighbourCheck", node_id, name
            yield "NodeDegree", node_id, name


def faithful_call(functions: GraphFunctions, tool: str, node_id: str, name: str) -> str:
    method = {"NodeFeature": functions.check_nodes, "NeighbourCheck": functions.check_neighbours,
              "NodeDegree": functions.check_degree}[tool]
    try:
        return method(node_id, name)
    except KeyError:
        return MISSING


def compare(path: Path, tmp_path: Path, flatten: bool = False):
    """Mismatches of glmcot's primitives (GraphTools, which answer [] / 0 for a relation key a node
    lacks) and of the faithful baseline's functions (GraphFunctions, exact) with the original."""
    report = import_graph_json(path, tmp_path / "store")
    graph = Graph.open(tmp_path / "store")
    tools = GraphTools(graph, neighbour_limit=None)
    functions = GraphFunctions(graph)
    index = original_index(path, flatten)
    dangling = {target for node in index.values() for targets in node["neighbors"].values() for target in targets
                if target not in index}
    mismatches = []
    for tool, node_id, name in calls(index, sorted(dangling)):
        expected = original_call(index, tool, node_id, name)
        if faithful_call(functions, tool, node_id, name) != expected:
            mismatches.append(("faithful", tool, node_id, name, expected, faithful_call(functions, tool, node_id, name)))
        absent_key = node_id in index and tool != "NodeFeature" and name not in index[node_id]["neighbors"] \
            and name in graph.relation_names(graph.node_type(node_id))
        if not absent_key and glmcot_call(tools, tool, node_id, name) != expected:
            mismatches.append(("primitives", tool, node_id, name, expected, glmcot_call(tools, tool, node_id, name)))
    return report, graph, tools, mismatches


# one test per quirk --------------------------------------------------------------------------------
def test_legal_depth_keyed_neighbour_objects_flatten_in_key_order(tmp_path):
    report, graph, _, mismatches = compare(FIXTURES / "legal_depth_keyed.json", tmp_path, flatten=True)
    assert mismatches == []
    # key order of the file ("1", "2", "0"), not sorted order
    assert graph.neighbors("op-101", "reference") == ["op-102", "op-103", "op-104", "op-999"]
    assert graph.degree("op-102", "reference") == 0
    assert report.flattened_neighbor_objects == {"opinion.reference": 3, "opinion.cited_by": 3}
    assert graph.warnings["flattened_neighbor_objects"] == report.flattened_neighbor_objects


def test_nan_and_infinity_tokens_import_as_json_load_reads_them(tmp_path):
    report, graph, tools, mismatches = compare(FIXTURES / "amazon_nan_infinity.json", tmp_path)
    assert mismatches == []
    assert report.non_finite_numbers == 4  # NaN, Infinity, -Infinity, NaN in a list
    assert str(tools.NodeFeature("0000037214", "price")) == "nan"
    assert tools.NodeFeature("B00000JQ3E", "price") == float("-inf")
    assert str(tools.NodeFeature("B00000JQ3E", "rank")) == "[1.5, nan]"
    assert tools.NodeFeature("brand_1", "name") == "Nan"  # a string is left alone


def test_dangling_neighbour_ids_stay_in_lists_and_degrees(tmp_path):
    report, graph, tools, mismatches = compare(FIXTURES / "dblp_dangling.json", tmp_path)
    assert mismatches == []
    paper = "53e99784b7602d9701f3ffdd"
    assert tools.NodeDegree(paper, "reference") == 3  # the gold answers count len() of the raw list
    assert tools.NeighbourCheck(paper, "reference") == [
        "53e9a0e5b7602d97029e0a52", "53e99784b7602d9701f3ffde", "53e9b1c2b7602d9703c3d9a1"]
    with pytest.raises(NodeNotFound, match="no such node"):
        tools.NodeFeature("53e9a0e5b7602d97029e0a52", "title")
    assert report.dangling_neighbors == 3 and graph.num_dangling == 3
    assert graph.manifest["num_dangling"] == 3 and graph.info()["dangling_neighbors"] == 3
    # a bounded NeighbourCheck still counts and keeps the dangling ids where they stand
    bounded = GraphTools(graph, neighbour_limit=2).NeighbourCheck(paper, "reference")
    assert list(bounded) == ["53e9a0e5b7602d97029e0a52", "53e99784b7602d9701f3ffde"] and bounded.total == 3


def test_null_features_read_as_none(tmp_path):
    report, graph, tools, mismatches = compare(FIXTURES / "goodreads_null_features.json", tmp_path)
    assert mismatches == []
    assert report.null_features == 6
    assert tools.NodeFeature("21366268", "description") is None
    assert graph.features_at(graph.index("pub_12")) == {"name": None}
    assert graph.text_at(graph.index("pub_12")) == "pub_12"  # retrieval text falls back to the id
    assert tools.NodeFeature("21366269", "description") == "A tale."
    # goodreads' similar_books keeps its dangling id too
    assert tools.NeighbourCheck("21366268", "similar_books") == ["99999999", "21366269"]


def test_a_relation_key_a_node_lacks_is_a_key_error_for_the_faithful_baseline(tmp_path):
    report, graph, tools, mismatches = compare(FIXTURES / "biomedical_absent_relation_keys.json", tmp_path)
    assert mismatches == []
    functions = GraphFunctions(graph)
    with pytest.raises(KeyError):
        functions.check_neighbours("DB01412", "Compound-treats-Disease")
    assert functions.check_degree("DB00201", "Compound-treats-Disease") == "1"
    # glmcot's own primitives answer an empty list there (the relation exists for the type)
    assert tools.NeighbourCheck("DB01412", "Compound-treats-Disease") == []
    assert not graph.has_relation_key_at(graph.index("DB01412"), "Compound-treats-Disease")
    assert report.absent_relation_keys == 1


@pytest.mark.parametrize("name", sorted(path.name for path in FIXTURES.glob("*.json")))
def test_fixture_survives_export_and_reimport(tmp_path, name):
    from glmcot.graph.importers.export import export_graph_json

    import_graph_json(FIXTURES / name, tmp_path / "a")
    export_graph_json(Graph.open(tmp_path / "a"), tmp_path / "out.json")
    import_graph_json(tmp_path / "out.json", tmp_path / "b")
    first, second = GraphTools(Graph.open(tmp_path / "a"), neighbour_limit=None), GraphTools(
        Graph.open(tmp_path / "b"), neighbour_limit=None)
    index = original_index(tmp_path / "out.json")
    for tool, node_id, feature in calls(index):
        assert glmcot_call(first, tool, node_id, feature) == glmcot_call(second, tool, node_id, feature)


def test_cli_imports_each_fixture_and_reports_the_quirks(tmp_path):
    from typer.testing import CliRunner

    from glmcot.cli import app

    runner = CliRunner()
    outputs = {}
    for path in sorted(FIXTURES.glob("*.json")):
        result = runner.invoke(app, ["graph", "import", str(path), "--out", str(tmp_path / path.stem)])
        assert result.exit_code == 0, result.output
        outputs[path.stem] = result.output
    assert "concatenated in key order" in outputs["legal_depth_keyed"]
    assert "NaN/Infinity" in outputs["amazon_nan_infinity"]
    assert "kept in their lists and degrees" in outputs["dblp_dangling"]
    assert "null" in outputs["goodreads_null_features"]


# bounded work on hostile files (issue 20) ------------------------------------------------------------
@pytest.mark.parametrize("depth", [2000, 100_000])
def test_deep_nesting_is_refused_naming_node_and_feature(tmp_path, depth):
    path = tmp_path / "deep.json"
    path.write_text('{"paper_nodes": {"p1": {"features": {"title": "ok", "abstract": '
                    + "[" * depth + "]" * depth + '}, "neighbors": {}}}}')
    with pytest.raises(GraphFormatError, match=r"at node 'p1'.*feature 'abstract' nests deeper than 64 levels"):
        import_graph_json(path, tmp_path / "store")
    assert not (tmp_path / "store").exists()


def test_nesting_limit_is_exact_and_covers_neighbour_values(tmp_path):
    path = tmp_path / "g.json"
    path.write_text('{"a_nodes": {"x": {"features": {"f": [[["v"]]]}, "neighbors": {}}}}')
    import_graph_json(path, tmp_path / "ok", max_depth=3)
    assert Graph.open(tmp_path / "ok").feature("x", "f") == [[["v"]]]
    with pytest.raises(GraphFormatError, match="feature 'f' nests deeper than 2 levels"):
        import_graph_json(path, tmp_path / "no", max_depth=2)
    path.write_text('{"a_nodes": {"x": {"features": {}, "neighbors": {"r": {"1": [[[["x"]]]]}}}}}')
    with pytest.raises(GraphFormatError, match="neighbour list 'r' nests deeper than 3 levels"):
        import_graph_json(path, tmp_path / "no2", max_depth=3)


def test_a_megabyte_id_is_hashed_in_linear_work(tmp_path, monkeypatch):
    import glmcot.graph.storage.idhash as idhash

    widest = []
    real = idhash._hash_short
    monkeypatch.setattr(idhash, "_hash_short",
                        lambda data, starts, lengths: widest.append(int(lengths.max(initial=0))) or real(data, starts, lengths))
    long_id = "x" * 1_000_000
    payload = {"a_nodes": {long_id: {"features": {"name": "long"}, "neighbors": {"r": ["short"]}},
                           "short": {"features": {}, "neighbors": {"r": [long_id]}}}}
    path = tmp_path / "g.json"
    path.write_text(json.dumps(payload))
    import_graph_json(path, tmp_path / "store")
    graph = Graph.open(tmp_path / "store")
    assert graph.feature(long_id, "name") == "long" and graph.neighbors("short", "r") == [long_id]
    # the per-byte vectorised loop never ran over the long id (that cost ~12 us per byte)
    assert widest and max(widest) <= idhash._VECTOR_BYTES
    assert idhash.hash_ids(long_id.encode(), [0, len(long_id)])[0] == idhash.hash_id(long_id.encode())


def test_thousands_of_node_types_keep_two_progress_bars(tmp_path):
    from glmcot.graph.commands import ImportProgress

    class Recorder:
        def __init__(self):
            self.added = []

        def add_task(self, description, total):
            self.added.append(description)
            return len(self.added) - 1

        def update(self, task, **fields):
            pass

    path = tmp_path / "g.json"
    path.write_text(json.dumps({f"t{i}_nodes": {f"n{i}": {"features": {}, "neighbors": {}}} for i in range(3000)}))
    recorder = Recorder()
    report = import_graph_json(path, tmp_path / "store", progress=ImportProgress(recorder))
    assert report.nodes == 3000 and len(report.node_types) == 3000
    assert recorder.added == ["ids", "nodes 1/3000: t0"]


def test_older_stores_without_dangling_or_null_files_still_open(tmp_path, tiny_builder):
    tiny_builder(tmp_path / "store")
    manifest_path = tmp_path / "store" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["version"] = "1.1"
    del manifest["num_dangling"]
    manifest_path.write_text(json.dumps(manifest))
    graph = Graph.open(tmp_path / "store")
    assert graph.num_dangling == 0
    assert graph.neighbors("p1", "author") == ["a1", "a2"] and graph.degree("p3", "author") == 3


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 64])
def test_non_finite_filter_handles_tokens_split_across_reads(size):
    import io

    from glmcot.graph.importers.importer import _NonFiniteReader, _restore_non_finite

    document = b'{"a\\"NaN": [NaN, -Infinity, Infinity, "NaN \\\\", "Infinity"], "b": -1.5e3}'

    class Raw:
        def __init__(self):
            self.handle, self.position = io.BytesIO(document), 0

        def read(self, count=-1):
            data = self.handle.read(size)
            self.position += len(data)
            return data

    reader = _NonFiniteReader(Raw())
    chunks = []
    while chunk := reader.read(size):
        chunks.append(chunk)
    parsed = _restore_non_finite(json.loads(b"".join(chunks)))
    expected = json.loads(document)
    assert str(parsed) == str(expected) and reader.replaced == 3
