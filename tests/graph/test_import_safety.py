"""Imports that lose nothing and delete nothing of the user's (issue 30): an unclosed CSV quote or
an over-long row stops the import naming file, row and column; --force replaces only a glmcot
store, never the source or another folder; user text never reaches rich as markup."""

import json

import pytest
from typer.testing import CliRunner

from glmcot.cli import app
from glmcot.graph.errors import GraphFormatError
from glmcot.graph.storage.store import Graph
from glmcot.graph.importers.tables import CSV_BLOCK_BYTES, import_tables

runner = CliRunner()


def nodes_csv(folder, body):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "people.csv").write_text(":ID,name,:LABEL\n" + body)
    return folder


@pytest.mark.parametrize("body, where", [
    ('n1,Ada,Person\nn2,"Bob,Person\nn3,Cy,Person\n', None),  # pyarrow's own column count check
    ('n1,Ada,"Person\nn2,Bob,Person\nn3,Cy,Person\n', "row 2, column 3 (':LABEL'): a quoted value opens on line 2"),
    ('n1,Ada,Person\nn2,Bob,"Person', "row 3, column 3 (':LABEL'): a quoted value opens on line 3"),
])
def test_an_unclosed_quote_stops_the_import(tmp_path, body, where):
    tables = nodes_csv(tmp_path / "tables", body)
    with pytest.raises(GraphFormatError) as caught:
        import_tables(tables, tmp_path / "store")
    assert "people.csv: row " in str(caught.value)
    if where:
        assert where in str(caught.value) and "never closed" in str(caught.value)
    assert not (tmp_path / "store").exists()


def test_quotes_that_close_import_every_row(tmp_path):
    tables = nodes_csv(tmp_path / "tables", 'n1,"Ada ""the first"", Countess",Person\nn2,"Bob\nSmith",Person\nn3,5\'10",Person')
    import_tables(tables, tmp_path / "store")
    graph = Graph.open(tmp_path / "store")
    assert graph.num_nodes == 3 and graph.feature("n1", "name") == 'Ada "the first", Countess'
    assert graph.feature("n3", "name") == "5'10\""


def test_a_row_over_the_limit_stops_the_import(tmp_path):
    tables = nodes_csv(tmp_path / "tables", 'n1,Ada,Person\nn2,"' + "x" * (CSV_BLOCK_BYTES + 10) + '",Person\nn3,Cy,Person\n')
    with pytest.raises(GraphFormatError, match=r"people.csv: row 3 \(from line 3\) is longer than 16 MiB"):
        import_tables(tables, tmp_path / "store")


def test_an_unclosed_quote_in_an_update_commits_nothing(tmp_path):
    from glmcot.graph.updates.changes import read_changes
    from glmcot.graph.updates.versions import CURRENT, apply_update

    store = tmp_path / "store"
    import_tables(nodes_csv(tmp_path / "tables", "n1,Ada,Person\n"), store)
    changes = nodes_csv(tmp_path / "changes", 'n2,"Bob,Person\nn3,Cy,Person\n')
    (changes / "people.csv").write_text(':ID,name,:LABEL\nn2,Bob,"Person\nn3,Cy,Person\n')
    with pytest.raises(GraphFormatError, match="never closed"):
        apply_update(store, read_changes(changes))
    assert not (store / CURRENT).exists()


def test_force_replaces_only_a_store_and_says_so(tmp_path):
    tables = nodes_csv(tmp_path / "tables", "n1,Ada,Person\n")
    mine = tmp_path / "my-files"
    mine.mkdir()
    (mine / "thesis.txt").write_text("precious")
    refused = runner.invoke(app, ["graph", "import", str(tables), "--out", str(mine), "--force"])
    assert refused.exit_code == 1 and "is not a glmcot store" in refused.output
    assert (mine / "thesis.txt").read_text() == "precious"
    with pytest.raises(FileExistsError, match="not a glmcot store"):
        import_tables(tables, mine, overwrite=True)  # the writer refuses too, for every importer
    assert (mine / "thesis.txt").read_text() == "precious"

    source = runner.invoke(app, ["graph", "import", str(tables), "--out", str(tables), "--force"])
    assert source.exit_code == 1 and "is or holds the import's source" in source.output
    parent = runner.invoke(app, ["graph", "import", str(tables / "people.csv"), "--out", str(tables), "--force"])
    assert parent.exit_code == 1 and "is or holds the import's source" in parent.output
    assert (tables / "people.csv").is_file()

    store = tmp_path / "store"
    assert runner.invoke(app, ["graph", "import", str(tables), "--out", str(store)]).exit_code == 0
    first_id = Graph.open(store).store_id
    again = runner.invoke(app, ["graph", "import", str(tables), "--out", str(store), "--force"])
    assert again.exit_code == 0 and f"replaced the store that was at {store} (1 nodes" in again.output
    as_json = runner.invoke(app, ["graph", "import", str(tables), "--out", str(store), "--force", "--json"])
    assert json.loads(as_json.output)["replaced"]["store_id"] != first_id
    assert Graph.open(store).num_nodes == 1


def test_graph_info_shows_names_that_look_like_markup(tmp_path):
    tables = tmp_path / "tables"
    tables.mkdir()
    (tables / "nodes.csv").write_text(':ID,[/bold]name,:LABEL\nn1,Ada,"[/] [red]Type"\n')
    (tables / "edges.csv").write_text(":START_ID,:END_ID,:TYPE\nn1,n1,[/x]knows\n")
    store = tmp_path / "store"
    imported = runner.invoke(app, ["graph", "import", str(tables), "--out", str(store)])
    assert imported.exit_code == 0, imported.output
    result = runner.invoke(app, ["graph", "info", str(store)])
    assert result.exit_code == 0, result.output
    assert "[/] [red]Type" in result.output and "[/bold]name" in result.output and "[/x]knows" in result.output


def test_identical_triples_count_once(tmp_path):
    import gzip

    from glmcot.graph.importers.triples import import_triples

    edge = "<http://x/m1> <http://x/director> <http://x/p1> .\n"
    lines = (["<http://x/m1> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://x/Movie> .\n"] * 3
             + ["<http://x/m1> <http://x/genre> \"Drama\" .\n", "<http://x/m1> <http://x/genre> \"Crime\" .\n"] * 3
             + [edge] * 5000 + ["<http://x/m1> <http://x/actor> <http://x/p1> .\n", edge])
    path = tmp_path / "movies.nt.gz"
    path.write_bytes(gzip.compress("".join(lines).encode()))
    summary = import_triples(path, tmp_path / "store", id_prefix="http://x/")
    graph = Graph.open(tmp_path / "store")
    assert graph.neighbors("m1", "director") == ["p1"] and graph.neighbors("m1", "actor") == ["p1"]
    assert graph.feature("m1", "genre") == ["Drama", "Crime"] and graph.node_type("m1") == "Movie"
    # Two facts, each stored both ways (director and director_reverse).
    assert summary.edges == 4 and summary.warnings["duplicate_triples"] == len(lines) - 5
    assert graph.neighbors("p1", "director_reverse") == ["m1"]


def test_a_gzip_bomb_stops_the_import(tmp_path, monkeypatch):
    import gzip

    from glmcot.graph.importers import triples

    monkeypatch.setattr(triples, "_EXPANSION_FLOOR", 64 << 10)
    path = tmp_path / "bomb.nt.gz"
    path.write_bytes(gzip.compress(b"<http://x/a> <http://x/r> <http://x/b> .\n" * 200_000))
    assert path.stat().st_size * 200 < 8 << 20  # it expands over 200 times
    with pytest.raises(GraphFormatError, match=r"bomb.nt.gz: expands to more than .* a gzip bomb\? Raise --max-expansion"):
        triples.import_triples(path, tmp_path / "store")
    assert not (tmp_path / "store").exists()
    triples.import_triples(path, tmp_path / "store", max_expansion=0)  # the setting lifts the bound
    assert Graph.open(tmp_path / "store").neighbors("http://x/a", "r") == ["http://x/b"]


@pytest.mark.parametrize("buffer", [7, 1 << 16])
def test_grbench_json_reads_what_json_load_reads(tmp_path, monkeypatch, buffer):
    """1e999, integers past 64 bits and lone surrogate escapes: the store holds json.load's values
    (small buffers cut every token somewhere)."""
    from glmcot.graph.importers import importer

    monkeypatch.setattr(importer, "_BUFFER", buffer)
    text = ('{"paper_nodes": {'
            '"p1": {"features": {"title": "A\\ud800B \\"q\\" \\\\ \\ud83d\\ude00", "n": 1e999, "m": -1.5E+999, '
            '"tiny": 1e-999, "big": 123456789012345678901234567890, "ok": 2.5e3, "list": [1e999, "\\udfff", 7]}, '
            '"neighbors": {"cites": ["p\\udc00", "ghost\\ud801"]}}, '
            '"p\\udc00": {"features": {"t\\ud800": "x", "v": Infinity}, "neighbors": {"cites": ["p1"]}}}}')
    path = tmp_path / "graph.json"
    path.write_text(text)
    expected = json.loads(text)
    report = importer.import_graph_json(path, tmp_path / "store")
    assert report.non_finite_numbers == 4 and report.lone_surrogates == 6
    graph = Graph.open(tmp_path / "store")
    for node_id, node in expected["paper_nodes"].items():
        assert graph.features_at(graph.index(node_id)) == node["features"]
        assert graph.neighbors(node_id, "cites") == node["neighbors"]["cites"]
    assert graph.feature("p1", "big") == 123456789012345678901234567890 and graph.feature("p1", "tiny") == 0.0
