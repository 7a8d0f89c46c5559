import json

import pytest

from glmcot.graph.errors import GraphFormatError
from glmcot.graph.importers.importer import import_graph_json
from glmcot.graph.storage.store import Graph

GRAPH = {
    "paper_nodes": {
        "53e99784b7602d9701f3ffdd": {
            "features": {"title": "Über Graphen — ein Test ✓", "year": 2012, "keywords": ["graphs", "κ-cores"],
                         "abstract": "line one\nline two"},
            "neighbors": {"author": ["a1", "a2"], "venue": ["pub_7"], "reference": ["p-missing", "p2"],
                          "cited_by": []},
        },
        "p2": {
            "features": {"title": "Second", "year": 2013, "keywords": []},
            "neighbors": {"author": ["a2"], "venue": ["pub_7"], "reference": [], "cited_by": ["53e99784b7602d9701f3ffdd"]},
        },
    },
    "author_nodes": {
        "a1": {"features": {"name": "Zoë Ångström", "organization": "ETH"}, "neighbors": {"paper": ["53e99784b7602d9701f3ffdd"]}},
        "a2": {"features": {"name": "Li Wei"}, "neighbors": {"paper": ["53e99784b7602d9701f3ffdd", "p2"]}},
    },
    "venue_nodes": {"pub_7": {"features": {"name": "VLDB"}, "neighbors": {"paper": ["53e99784b7602d9701f3ffdd", "p2"]}}},
}


def write(tmp_path, payload, name="graph.json"):
    path = tmp_path / name
    if isinstance(payload, (dict, list)):
        path.write_text(json.dumps(payload, indent=4, ensure_ascii=False), encoding="utf-8")
    else:
        path.write_bytes(payload if isinstance(payload, bytes) else payload.encode("utf-8"))
    return path


def test_import_round_trip(tmp_path):
    report = import_graph_json(write(tmp_path, GRAPH), tmp_path / "store", batch_size=1)
    assert report.nodes == 5 and report.node_types == {"paper": 2, "author": 2, "venue": 1}
    assert report.dangling_neighbors == 1
    assert report.dangling_examples == ["53e99784b7602d9701f3ffdd -reference-> p-missing"]
    graph = Graph.open(tmp_path / "store")
    paper = "53e99784b7602d9701f3ffdd"
    assert graph.node_types == ["paper", "author", "venue"]
    assert graph.feature(paper, "title") == "Über Graphen — ein Test ✓"
    assert graph.feature(paper, "keywords") == ["graphs", "κ-cores"]
    assert graph.feature(paper, "abstract") == "line one\nline two"
    assert graph.feature("p2", "keywords") == []
    assert graph.feature("a1", "name") == "Zoë Ångström"
    assert graph.neighbors(paper, "author") == ["a1", "a2"]
    # the dangling id stays where the file lists it, as Graph-CoT lists and counts it
    assert graph.neighbors(paper, "reference") == ["p-missing", "p2"]
    assert graph.degree(paper, "reference") == 2 and graph.dangling_count_at(graph.index(paper), "reference") == 1
    assert graph.num_dangling == 1 and not graph.has_node("p-missing")
    assert graph.neighbors("pub_7", "paper") == [paper, "p2"]
    assert graph.relation_names("paper") == ["author", "venue", "reference", "cited_by"]
    assert graph.num_edges == report.edges == 3 + 2 + 1 + 1 + 3 + 2
    assert graph.warnings["dangling_neighbors"] == 1
    assert graph.text_key("paper") == "title" and graph.text_key("venue") == "name"


def test_type_without_nodes_and_empty_graph(tmp_path):
    import_graph_json(write(tmp_path, {"brand_nodes": {}, "item_nodes": {"i1": {"features": {}, "neighbors": {}}}}),
                      tmp_path / "store")
    graph = Graph.open(tmp_path / "store")
    assert graph.node_types == ["brand", "item"] and graph.num_nodes == 1
    import_graph_json(write(tmp_path, {}, "empty.json"), tmp_path / "empty")
    assert Graph.open(tmp_path / "empty").num_nodes == 0


@pytest.mark.parametrize(
    "payload, message",
    [
        (b"", "empty file"),
        (b'{"paper_nodes": {"p1": {"features": {"title": "x"}, ', "truncated file"),
        (b'{"paper_nodes": {"p1": {"features": {"title": "x"}}}', "truncated file"),
        (b'{"paper_nodes": {"p1": {"features": {"title": x}}}}', "malformed JSON"),
        (b'[1, 2]', "the top level must be a JSON object"),
        (b'{"papers": {}}', "top-level key 'papers' is not of the form '<type>_nodes'"),
        (b'{"paper_nodes": []}', "the value of a node type must be a JSON object"),
        (b'{"paper_nodes": {"p1": "oops"}}', "in 'paper_nodes', at node 'p1'"),
        (b'{"paper_nodes": {"p1": {"features": [], "neighbors": {}}}}', "'features' must be an object"),
        (b'{"paper_nodes": {"p1": {"features": {}, "neighbors": {"author": "a1"}}}}', "neighbour list 'author' must be a JSON array"),
        (b'{"paper_nodes": {"p1": {"features": {}, "neighbors": {"author": [{"id": 1}]}}}}', "is not a node id string"),
        (b'{"paper_nodes": {}} {"x": 1}', "malformed JSON"),
        (b'{"paper_nodes": {}, "paper_nodes": {}}', "appears twice"),
    ],
)
def test_malformed_input_names_the_place_and_leaves_nothing(tmp_path, payload, message):
    path = write(tmp_path, payload)
    with pytest.raises(GraphFormatError, match=message) as raised:
        import_graph_json(path, tmp_path / "store")
    assert str(path) in str(raised.value) and "near byte" in str(raised.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graph.json"]


def test_duplicate_ids_across_types(tmp_path):
    payload = {"paper_nodes": {"x1": {"features": {}, "neighbors": {}}},
               "author_nodes": {"x1": {"features": {}, "neighbors": {}}}}
    with pytest.raises(GraphFormatError, match="duplicate node id 'x1' in types 'paper' and 'author'"):
        import_graph_json(write(tmp_path, payload), tmp_path / "store")
    assert not (tmp_path / "store").exists()


def test_existing_output_is_kept_without_force(tmp_path):
    path = write(tmp_path, GRAPH)
    import_graph_json(path, tmp_path / "store")
    with pytest.raises(FileExistsError, match="--force"):
        import_graph_json(path, tmp_path / "store")
    import_graph_json(path, tmp_path / "store", overwrite=True)
    assert Graph.open(tmp_path / "store").num_nodes == 5


def test_numeric_ids_features_and_dotted_keys(tmp_path):
    payload = {
        "book_nodes": {"21366268": {"features": {"title": "T", "num_pages": 12, "price": 3.5, "is_ebook": False,
                                                 "meta": {"a": [1, 2]}},
                                    "neighbors": {"similar_books": [21366269]}},
                       "21366269": {"features": {"title": "U", "num_pages": None, "price": 4},
                                    "neighbors": {}}},
        "odd.type_nodes": {"o1": {"features": {"name": "dotted"}, "neighbors": {"book": ["21366268"]}}},
    }
    import_graph_json(write(tmp_path, payload), tmp_path / "store")
    graph = Graph.open(tmp_path / "store")
    assert graph.neighbors("21366268", "similar_books") == ["21366269"]
    assert graph.feature("21366268", "num_pages") == 12
    assert graph.feature("21366268", "is_ebook") is False
    assert graph.feature("21366268", "meta") == {"a": [1, 2]}
    assert graph.feature("21366269", "price") == 4 and graph.feature("21366268", "price") == 3.5
    # a null feature exists with the value None, as json.load gives it to Graph-CoT
    assert graph.has_feature_at(graph.index("21366269"), "num_pages")
    assert graph.feature("21366269", "num_pages") is None
    assert not graph.has_feature_at(graph.index("21366269"), "is_ebook")
    assert graph.node_type("o1") == "odd.type" and graph.neighbors("o1", "book") == ["21366268"]


def test_cli_import_and_info(tmp_path):
    from typer.testing import CliRunner

    from glmcot.cli import app

    path = write(tmp_path, GRAPH)
    runner = CliRunner()
    result = runner.invoke(app, ["graph", "import", str(path), "--out", str(tmp_path / "store"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output.strip().splitlines()[-1])["dangling_neighbors"] == 1
    info = runner.invoke(app, ["graph", "info", str(tmp_path / "store"), "--json"])
    data = json.loads(info.output)
    assert data["nodes"] == 5
    assert {t["type"]: t["relations"] for t in data["types"]}["paper"] == {"author": 3, "venue": 2, "reference": 1, "cited_by": 1}
    assert data["bytes_on_disk"] > 0 and data["retrieval"] is None
    table = runner.invoke(app, ["graph", "info", str(tmp_path / "store")])
    assert table.exit_code == 0 and "cited_by" in table.output
    bad = write(tmp_path, b"{", "bad.json")
    failed = runner.invoke(app, ["graph", "import", str(bad), "--out", str(tmp_path / "bad")])
    assert failed.exit_code == 1 and "truncated file" in failed.output


def test_duplicate_id_within_one_type(tmp_path):
    path = write(tmp_path, b'{"paper_nodes": {"p1": {"features": {}, "neighbors": {}}, "p1": {"features": {}, "neighbors": {}}}}')
    with pytest.raises(GraphFormatError, match="duplicate node id 'p1' twice in type 'paper'"):
        import_graph_json(path, tmp_path / "store")
    assert not (tmp_path / "store").exists()


def test_progress_reports_bytes_of_both_passes(tmp_path):
    path = write(tmp_path, GRAPH)
    seen = {}
    import_graph_json(path, tmp_path / "store", progress=lambda phase, done, total: seen.__setitem__(phase, (done, total)))
    size = path.stat().st_size
    assert seen["ids"] == (size, size)
    assert [phase for phase in seen if phase.startswith("nodes")] == ["nodes 1/3: paper", "nodes 2/3: author", "nodes 3/3: venue"]
    assert all(0 < done <= total == size for done, total in seen.values())


def test_neighbour_resolution_survives_hash_collisions(tmp_path, monkeypatch):
    import numpy as np

    import glmcot.graph.importers.importer as importer

    monkeypatch.setattr(importer, "hash_ids", lambda blob, offsets: np.zeros(len(offsets) - 1, np.uint64))
    payload = {"n_nodes": {"x": {"features": {}, "neighbors": {"r": ["y", "zz", "nope", "x"]}},
                           "y": {"features": {}, "neighbors": {}},
                           "zz": {"features": {}, "neighbors": {}}}}
    report = import_graph_json(write(tmp_path, payload), tmp_path / "store")
    assert report.dangling_neighbors == 1
    assert Graph.open(tmp_path / "store").neighbors("x", "r") == ["y", "zz", "nope", "x"]
    payload["m_nodes"] = {"x": {"features": {}, "neighbors": {}}}
    with pytest.raises(GraphFormatError, match="duplicate node id 'x' in types 'n' and 'm'"):
        import_graph_json(write(tmp_path, payload, "dup.json"), tmp_path / "dup")


def test_export_then_import_gives_the_same_graph(tmp_path, tiny):
    from typer.testing import CliRunner

    from glmcot.cli import app
    from glmcot.graph.tools.chunks import render_chunk

    path = tmp_path / "graph.json"
    runner = CliRunner()
    result = runner.invoke(app, ["graph", "export", str(tiny.directory), "--out", str(path)])
    assert result.exit_code == 0, result.output
    data = json.loads(path.read_text(encoding="utf-8"))
    assert list(data) == ["paper_nodes", "author_nodes", "venue_nodes"]
    assert data["paper_nodes"]["p3"]["neighbors"]["author"] == ["a1", "a2", "a3"]
    assert "year" not in data["paper_nodes"]["p4"]["features"]  # absent stays absent
    assert runner.invoke(app, ["graph", "export", str(tiny.directory), "--out", str(path)]).exit_code == 1
    import_graph_json(path, tmp_path / "again")
    again = Graph.open(tmp_path / "again")
    assert again.num_edges == tiny.num_edges
    for index in range(tiny.num_nodes):
        node_id = tiny.node_id(index)
        assert again.features_at(index) == tiny.features_at(index)
        assert render_chunk(again, node_id) == render_chunk(tiny, node_id)
