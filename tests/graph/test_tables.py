import gzip

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from glmcot.graph.errors import GraphFormatError
from glmcot.graph.storage.store import Graph
from glmcot.graph.importers.tables import import_tables, parse_header

MOVIES = (
    "movieId:ID,title,year:int,genres:string[],rating:float,:LABEL\n"
    "m1,The Matrix,1999,Action;Sci-Fi,8.7,Movie\n"
    'm2,"Heat, a film\nin two lines",1995,Crime,,Movie\n'
)
PEOPLE = "personId:ID,name,born:int,:LABEL\np1,Keanu Reeves,1964,Person;Actor\np2,Al Pacino,,Person\n"
ROLES = ":START_ID,:END_ID,:TYPE,weight,role\np1,m1,ACTED_IN,2.5,Neo\np2,m2,ACTED_IN,,McCauley\np3,m2,ACTED_IN,1,Ghost\n"


def tables(folder, **files):
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        path = folder / name.replace("__", ".")
        if path.name.endswith(".gz"):
            path.write_bytes(gzip.compress(text.encode("utf-8")))
        else:
            path.write_text(text, encoding="utf-8")
    return folder


def test_parse_header_neo4j_conventions():
    assert parse_header("year:int").kind == "int" and parse_header("year:int").name == "year"
    assert parse_header("movieId:ID(Movie)").role == "id"
    assert parse_header(":START_ID(Person)").role == "start"
    tags = parse_header("tags:string[]")
    assert tags.array and tags.kind == "str"
    assert parse_header("http://x:y").kind is None  # an unknown suffix is part of the name
    assert parse_header(":IGNORE").role == "ignore"


def test_import_neo4j_csv_folder(tmp_path):
    source = tables(tmp_path / "in", movies__csv=MOVIES, people__csv__gz=PEOPLE, roles__csv=ROLES)
    report = import_tables(source, tmp_path / "store", reverse_suffix="_of", batch_rows=1)
    assert report.node_types == {"Movie": 2, "Person": 2}
    assert report.dangling_neighbors == 1 and report.dangling_examples == ["p3 -ACTED_IN-> m2 (roles.csv row 4)"]
    graph = Graph.open(tmp_path / "store")
    assert graph.features_at(graph.index("m1")) == {"movieId": "m1", "title": "The Matrix", "year": 1999,
                                                     "genres": ["Action", "Sci-Fi"], "rating": 8.7}
    assert graph.feature("m2", "title") == "Heat, a film\nin two lines"
    assert not graph.has_feature_at(graph.index("m2"), "rating")  # an empty field is absent
    assert graph.feature_kind("Movie", "year") == "int"
    assert graph.feature("p1", "labels") == ["Person", "Actor"]
    assert graph.neighbors("p1", "ACTED_IN") == ["m1"] and graph.neighbors("m2", "ACTED_IN_of") == ["p2"]
    assert graph.neighbor_weights(graph.index("p1"), "ACTED_IN").tolist() == [2.5]
    assert graph.neighbor_weights(graph.index("p2"), "ACTED_IN").tolist() == [1.0]  # a missing weight is 1
    # A relationship property is an edge feature, in both directions (no longer ignored).
    assert "ignored_columns" not in graph.warnings
    assert graph.edge_features_at(graph.index("p1"), "ACTED_IN") == [{"role": "Neo"}]
    assert graph.edge_features_at(graph.index("m2"), "ACTED_IN_of") == [{"role": "McCauley"}]
    assert graph.text_key("Movie") == "title" and graph.text_key("Person") == "name"


def test_types_from_file_and_folder_names(tmp_path):
    source = tmp_path / "in"
    tables(source / "company", part_1__csv="id,name\nc1,Acme\n", part_2__csv="id,name,employees:long\nc2,Initech,300\n")
    tables(source, city__csv="id,name\nx1,Berlin\n", located_in__csv="source,target\nc1,x1\nc2,x1\n")
    report = import_tables(source, tmp_path / "store")
    assert report.node_types == {"city": 1, "company": 2}
    graph = Graph.open(tmp_path / "store")
    assert graph.neighbors("c2", "located_in") == ["x1"]
    assert graph.feature("c2", "employees") == 300 and not graph.has_feature_at(graph.index("c1"), "employees")


def test_parquet_tables_keep_their_types(tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    pq.write_table(pa.table({"id": ["a", "b", "c"], "score": [1.5, None, float("nan")], "n": pa.array([1, 2, 3], pa.int32()),
                             "ok": [True, False, None], "tags": [["x", "y"], [], None]}), source / "item.parquet")
    pq.write_table(pa.table({"source": ["a", "b"], "target": ["b", "zz"], "relation": ["likes", "likes"],
                             "weight": [0.5, 2.0]}), source / "edges.parquet")
    report = import_tables(source, tmp_path / "store")
    assert report.dangling_neighbors == 1
    graph = Graph.open(tmp_path / "store")
    assert graph.feature("a", "score") == 1.5
    assert not graph.has_feature_at(graph.index("c"), "score")  # NaN is a missing value
    assert graph.feature("b", "n") == 2 and graph.feature_kind("item", "n") == "int"
    assert graph.feature("b", "ok") is False and graph.feature("a", "tags") == ["x", "y"]
    assert graph.neighbors("a", "likes") == ["b"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("id,year:int\na,1999\nb,19x9\n", "row 3, column 'year:int': '19x9' is not a whole number"),
        ("id,year:int\na,99999999999999999999999\n", "row 2, column 'year:int': '99999999999999999999999' is not a whole number in the 64-bit range"),
        ("id,ok:boolean\na,maybe\n", "row 2, column 'ok:boolean': 'maybe' is not true or false"),
        ("id,xs:int[]\na,1;2;x\n", "row 2, column 'xs:int[]': 'x' is not a whole number"),
        ("id,name\na,x\nb,y,z\n", "row 3 has 3 columns, the header 2"),
        ("id,name\na,x\n,y\n", "row 3, column 'id': empty id"),
        ("name,age\nx,1\n", "cannot tell nodes from edges"),
        ("id,name,name\na,x,y\n", "column 'name' appears twice"),
    ],
)
def test_malformed_tables_name_row_and_column(tmp_path, text, message):
    source = tables(tmp_path / "in", thing__csv=text)
    with pytest.raises(GraphFormatError, match=message.replace("(", r"\(").replace("[", r"\[")):
        import_tables(source, tmp_path / "store")
    assert not (tmp_path / "store").exists() and not list(tmp_path.glob(".store*"))  # nothing half-written


def test_bad_weight_and_bad_value_in_a_mixed_label_table(tmp_path):
    source = tables(tmp_path / "in", n__csv="id,:LABEL,size:int\na,A,1\nb,B,x\n", e__csv=":START_ID,:END_ID,weight\na,b,heavy\n")
    with pytest.raises(GraphFormatError, match=r"n.csv: row 3, column 'size:int': 'x'"):
        import_tables(source, tmp_path / "store")
    (source / "n.csv").write_text("id,:LABEL,size:int\na,A,1\nb,B,2\n")
    with pytest.raises(GraphFormatError, match=r"e.csv: row 2, column 'weight': 'heavy' is not a number"):
        import_tables(source, tmp_path / "store")


def test_duplicate_ids_are_refused_with_both_places(tmp_path):
    source = tables(tmp_path / "in", a__csv="id\nx\ny\n", b__csv="id\nq\ny\n")
    with pytest.raises(GraphFormatError, match=r"duplicate node id 'y': .*a.csv row 3 and .*b.csv row 3"):
        import_tables(source, tmp_path / "store")


def test_huge_values_and_truncated_parquet(tmp_path):
    big = "w" * 3_000_000
    source = tables(tmp_path / "in", doc__csv=f"id,body\nd1,{big}\nd2,small\n")
    import_tables(source, tmp_path / "store")
    graph = Graph.open(tmp_path / "store")
    assert graph.feature("d1", "body") == big and graph.feature("d2", "body") == "small"

    broken = tmp_path / "broken"
    broken.mkdir()
    pq.write_table(pa.table({"id": [f"n{i}" for i in range(1000)], "v": np.arange(1000)}), broken / "node.parquet")
    data = (broken / "node.parquet").read_bytes()
    (broken / "node.parquet").write_bytes(data[: len(data) // 2])
    with pytest.raises(GraphFormatError, match=r"node.parquet: .*(magic|footer|size|Parquet)"):
        import_tables(broken, tmp_path / "store2")
    assert not (tmp_path / "store2").exists()


def test_existing_store_is_kept_unless_forced(tmp_path):
    source = tables(tmp_path / "in", t__csv="id\na\n")
    import_tables(source, tmp_path / "store")
    with pytest.raises(FileExistsError):
        import_tables(source, tmp_path / "store")
    (source / "t.csv").write_text("id\na\nb\n")
    import_tables(source, tmp_path / "store", overwrite=True)
    assert Graph.open(tmp_path / "store").num_nodes == 2


def test_import_format_is_chosen_from_the_names(tmp_path):
    from glmcot.graph.importers.sources import SourceFormat, detect_format

    (tmp_path / "a.csv").write_text("id\nx\n")
    (tmp_path / "g.nt").write_text("")
    assert detect_format([tmp_path / "a.csv", tmp_path]) is SourceFormat.TABLES
    assert detect_format([tmp_path / "g.nt"]) is SourceFormat.TRIPLES
    assert detect_format([tmp_path / "graph.json"]) is SourceFormat.JSON
    with pytest.raises(ValueError, match="mix formats"):
        detect_format([tmp_path / "a.csv", tmp_path / "g.nt"])
    with pytest.raises(ValueError, match="cannot tell the format"):
        detect_format([tmp_path / "data.xml"])
