import gzip

import pytest

from glmcot.graph.errors import GraphFormatError
from glmcot.graph.storage.store import Graph
from glmcot.graph.importers.triples import import_triples, local_name

EX = "http://example.org/"
RDF_TYPE = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
LABEL = "<http://www.w3.org/2000/01/rdf-schema#label>"
XSD = "http://www.w3.org/2001/XMLSchema#"
TRIPLES = f"""<{EX}m1> {RDF_TYPE} <{EX}Movie> .
<{EX}m1> {LABEL} "The Matrix"@en .
<{EX}m1> <{EX}year> "1999"^^<{XSD}integer> .
<{EX}m1> <{EX}rating> "8.7"^^<{XSD}double> .
<{EX}m1> <{EX}tag> "action" .
<{EX}m1> <{EX}tag> "sci-fi" .
<{EX}m1> <{EX}director> <{EX}p1> .
<{EX}p1> {RDF_TYPE} <{EX}Person> .
<{EX}p1> {RDF_TYPE} <{EX}Director> .
<{EX}p1> <http://xmlns.com/foaf/0.1/name> "Lana Wachowski" .
<{EX}p1> {LABEL} "Lana Wachowski" .
<{EX}m1> <{EX}country> <{EX}usa> .
_:b1 <{EX}reviewOf> <{EX}m1> .
_:b1 <{EX}stars> "99999999999999999999999"^^<{XSD}integer> .
<{EX}m1> <{EX}award> "true"^^<{XSD}boolean> .
"""


def test_local_name():
    assert local_name("http://schema.org/name") == "name"
    assert local_name("http://www.w3.org/2000/01/rdf-schema#label") == "label"
    assert local_name("urn:isbn:123") == "123"


@pytest.mark.parametrize("compressed", [False, True])
def test_import_ntriples_rule(tmp_path, compressed):
    path = tmp_path / ("g.nt.gz" if compressed else "g.nt")
    data = TRIPLES.encode("utf-8")
    path.write_bytes(gzip.compress(data) if compressed else data)
    report = import_triples(path, tmp_path / "store", id_prefix=EX, reverse_suffix="_of")
    assert report.rows == 15 and report.node_types == {"Movie": 1, "Person": 1, "Resource": 2}
    graph = Graph.open(tmp_path / "store")
    assert graph.features_at(graph.index("m1")) == {"label": "The Matrix", "year": 1999, "rating": 8.7,
                                                     "tag": ["action", "sci-fi"], "award": True}
    assert graph.text_key("Movie") == "label" and graph.text_at(graph.index("p1")) == "Lana Wachowski"
    assert graph.feature("p1", "types") == ["Person", "Director"] and graph.feature("p1", "name") == "Lana Wachowski"
    assert graph.neighbors("m1", "director") == ["p1"] and graph.neighbors("p1", "director_of") == ["m1"]
    assert graph.neighbors("m1", "country") == ["usa"] and graph.node_type("usa") == "Resource"
    assert graph.neighbors("_:b1", "reviewOf") == ["m1"]
    assert graph.feature("_:b1", "stars") == "99999999999999999999999"  # beyond 64 bits: kept as text
    assert graph.num_edges == report.edges == 2 * 3


def test_bad_triple_line_is_named_and_nothing_is_written(tmp_path):
    lines = TRIPLES.splitlines()
    lines.insert(3, f"<{EX}m1> <{EX}year> 1999 .")
    path = tmp_path / "g.nt"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(GraphFormatError, match=r"g.nt: line 4, column \d+: bad triple"):
        import_triples(path, tmp_path / "store")
    assert not (tmp_path / "store").exists() and not list(tmp_path.glob(".store*"))


def test_truncated_gzip_and_empty_file(tmp_path):
    path = tmp_path / "g.nt.gz"
    data = gzip.compress(TRIPLES.encode() * 50)
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(GraphFormatError, match=r"g.nt.gz: "):
        import_triples(path, tmp_path / "store")
    empty = tmp_path / "empty.nt"
    empty.write_text("# only a comment\n")
    with pytest.raises(GraphFormatError, match="no triples"):
        import_triples(empty, tmp_path / "store")
