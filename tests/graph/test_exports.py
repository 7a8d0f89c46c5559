"""Graphs as people export them, imported with default flags: neo4j-admin CSVs (ID spaces,
repeated :IGNORE, relationship properties), APOC's one-file CSV export, Turtle and JSON-LD.
Fixtures: tests/fixtures/exports/ (README.md there names the real files' sources)."""

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from glmcot.cli import app
from glmcot.graph.tools.chunks import render_chunk
from glmcot.graph.tools.primitives import GraphTools
from glmcot.graph.storage.store import Graph

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "exports"
runner = CliRunner()


def imported(tmp_path_factory, source: Path, *flags: str) -> tuple[Graph, dict]:
    out = tmp_path_factory.mktemp("exports") / "store"
    result = runner.invoke(app, ["graph", "import", str(source), "--out", str(out), "--json", *flags])
    assert result.exit_code == 0, result.output
    return Graph.open(out), json.loads(result.output.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def shop(tmp_path_factory):
    return imported(tmp_path_factory, FIXTURES / "shop")


@pytest.fixture(scope="module")
def manual(tmp_path_factory):
    return imported(tmp_path_factory, FIXTURES / "id_spaces")


@pytest.fixture(scope="module")
def apoc(tmp_path_factory):
    return imported(tmp_path_factory, FIXTURES / "apoc_movies.csv")


@pytest.fixture(scope="module")
def turtle(tmp_path_factory):
    return imported(tmp_path_factory, FIXTURES / "rdf" / "people.ttl")


@pytest.fixture(scope="module")
def jsonld(tmp_path_factory):
    return imported(tmp_path_factory, FIXTURES / "rdf" / "people.jsonld")


# neo4j-admin CSVs ------------------------------------------------------------------------------

def test_id_spaces_keep_equal_ids_apart_as_space_colon_id(shop):
    graph, report = shop
    assert report["node_types"] == {"Product": 3, "Customer": 3, "Employee": 2}
    # Product 1, Customer 1 and Employee 1 are three nodes; the named id column stays a feature.
    assert graph.node_type("Product:1") == "Product" and graph.node_type("Customer:1") == "Customer"
    assert graph.feature("Product:1", "productID") == "1" and graph.feature("Employee:1", "employeeID") == "1"
    assert report["dangling_neighbors"] == 0


def test_repeated_ignore_columns_are_read_past(shop):
    graph, report = shop
    assert graph.feature_names("Product") == ["productID", "productName", "unitPrice"]
    assert graph.feature("Product:3", "unitPrice") == 10.0
    assert report["warnings"]["ignored_columns"][str(FIXTURES / "shop" / "products.csv")] == [":IGNORE", ":IGNORE#2"]


def test_text_keys_come_from_the_data_and_are_reported(shop):
    graph, report = shop
    assert report["text_keys"] == {"Product": "productName", "Customer": "companyName",
                                   "Employee": "name (firstName + lastName)"}
    assert graph.text_key("Product") == "productName"
    assert graph.feature("Employee:2", "name") == "Andrew Fuller"  # the composite key's text
    info = runner.invoke(app, ["graph", "info", str(graph.directory), "--json"])
    types = {entry["type"]: entry for entry in json.loads(info.output)["types"]}
    assert types["Employee"]["text_key"] == "name" and types["Employee"]["text_key_parts"] == ["firstName", "lastName"]
    assert types["Customer"]["text_key_parts"] == []


def test_both_directions_are_reachable_and_each_fact_is_one_neighbour(shop):
    graph, _ = shop
    tools = GraphTools(graph)
    assert tools.NeighbourCheck("Customer:1", "ORDERS") == ["Product:1", "Product:2"]
    assert tools.NeighbourCheck("Product:1", "ORDERS_reverse") == ["Customer:1", "Customer:3"]
    assert tools.NeighbourCheck("Customer:2", "SELLS_TO_reverse") == ["Employee:2"]
    assert graph.manifest["source"]["reverse_suffix"] == "_reverse"


def test_relationship_properties_are_edge_features(shop):
    graph, _ = shop
    tools = GraphTools(graph)
    assert tools.NeighbourCheck("Customer:1", "ORDERS", "quantity") == {"Product:1": 12, "Product:2": 10}
    assert tools.NeighbourCheck("Product:1", "ORDERS_reverse", "discount") == {"Customer:1": 0.0, "Customer:3": 0.05}
    chunk = tools.NodeInfo("Customer:1")
    assert "ORDERS (2): Chai <Product:1> {quantity: 12, discount: 0.0} | Chang <Product:2> {quantity: 10, discount: 0.15}" in chunk
    from glmcot.graph.errors import FeatureNotFound

    with pytest.raises(FeatureNotFound, match="its edge features: quantity, discount"):
        tools.NeighbourCheck("Customer:1", "ORDERS", "qty")
    with pytest.raises(FeatureNotFound, match="has no edge features"):
        tools.NeighbourCheck("Customer:1", "SELLS_TO_reverse", "quantity")


def test_an_edge_property_is_readable_by_a_snippet(shop, tmp_path):
    graph, _ = shop
    snippet = tmp_path / "snippet.py"
    snippet.write_text('units = NeighbourCheck("Customer:1", "ORDERS", "quantity")\n'
                       'print(sum(units.values()), units["Product:2"])\n')
    result = runner.invoke(app, ["exec", str(snippet), "--graph", str(graph.directory), "--retriever", "lexical", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output[result.output.index("{"):])["output"].strip() == "22 10"


def test_prompts_explain_reverse_relations_and_edge_features_only_where_present(shop, manual):
    from glmcot.agents.prompts import describe_graph

    text = describe_graph(shop[0])
    assert "R_reverse is R read backwards" in text
    assert "Customer ORDERS edges carry quantity, discount" in text and "Product ORDERS_reverse edges carry" in text
    assert "NeighbourCheck(node, relation, edge_feature)" in text
    plain = describe_graph(manual[0])  # roles only: one edge feature, on ACTED_IN
    assert "Actor ACTED_IN edges carry role" in plain


def test_neo4j_id_spaces_that_share_numbers(manual):
    graph, report = manual
    assert report["node_types"] == {"Movie": 3, "Actor": 3}
    assert graph.feature("Movie-ID:2", "title") == "Aliens"
    assert graph.feature("Actor-ID:2", "name") == "Michael Biehn"
    assert graph.feature("Movie-ID:2", "labels") == ["Movie", "Sequel"]
    tools = GraphTools(graph)
    assert tools.NeighbourCheck("Actor-ID:1", "ACTED_IN", "role") == {f"Movie-ID:{n}": "Ripley" for n in (1, 2, 3)}
    assert tools.NeighbourCheck("Actor-ID:3", "ACTED_IN", "role") == {"Movie-ID:2": "Bishop", "Movie-ID:3": "Bishop"}
    assert tools.NeighbourCheck("Movie-ID:2", "ACTED_IN_reverse") == ["Actor-ID:1", "Actor-ID:2", "Actor-ID:3"]
    assert report["text_keys"] == {"Movie": "title", "Actor": "name"}


# APOC ------------------------------------------------------------------------------------------

def test_apoc_one_file_export(apoc):
    graph, report = apoc
    assert report["node_types"] == {"Movie": 1, "Person": 7}
    assert graph.feature("188", "released") == 1999 and graph.feature("189", "born") == 1964
    assert not graph.has_feature_at(graph.index("188"), "name")  # "" is no value
    tools = GraphTools(graph)
    assert tools.NeighbourCheck("189", "ACTED_IN", "roles") == {"188": ["Neo"]}
    assert tools.NeighbourCheck("188", "DIRECTED_reverse") == ["193", "194"]
    chunk = tools.NodeInfo("188")
    assert "ACTED_IN_reverse (4): Keanu Reeves <189> {roles: Neo} |" in chunk
    assert "PRODUCED_reverse (1): Joel Silver <195>\n" in chunk
    assert report["text_keys"] == {"Movie": "title", "Person": "name"}


# RDF -------------------------------------------------------------------------------------------

def test_turtle_types_labels_languages_and_merged_namespaces(turtle):
    graph, report = turtle
    bill = "http://dbpedia.org/resource/Bill_Gates"
    melinda = "http://dbpedia.org/resource/Melinda_French_Gates"
    assert graph.node_type(bill) == "Person" and graph.feature(bill, "types") == ["Person", "Philanthropist"]
    assert graph.feature(bill, "label") == "Bill Gates"  # English only: de and ja left out, not a list
    assert report["warnings"]["other_language_literals"] == 3
    assert not graph.has_feature_at(graph.index(bill), "nickname")  # an empty literal is absent
    # dbo:spouse and dbp:spouse are one relation; the fact (stated three times) is one neighbour.
    assert graph.neighbors(bill, "spouse") == [melinda] and graph.neighbors(melinda, "spouse_reverse") == [bill]
    assert set(report["warnings"]["merged_predicates"]["spouse"]) == {"http://dbpedia.org/ontology/spouse",
                                                                        "http://dbpedia.org/property/spouse"}
    assert report["text_keys"]["Person"] == "label" and report["format"] == "turtle"


def test_chunks_leave_out_relations_without_neighbours(turtle):
    graph, _ = turtle
    chunk = render_chunk(graph, "http://dbpedia.org/resource/Melinda_French_Gates")
    assert "spouse_reverse (1): Bill Gates <http://dbpedia.org/resource/Bill_Gates>" in chunk
    assert "(0)" not in chunk and "foundedBy" not in chunk


def test_jsonld_with_a_context(jsonld):
    graph, report = jsonld
    assert report["node_types"] == {"Organization": 1, "Person": 3}
    tools = GraphTools(graph)
    assert tools.NeighbourCheck("http://example.org/Microsoft", "founder") == [
        "http://example.org/Bill_Gates", "http://example.org/Paul_Allen"]
    assert tools.NeighbourCheck("http://example.org/Paul_Allen", "founder_reverse") == ["http://example.org/Microsoft"]
    assert report["text_keys"] == {"Organization": "name", "Person": "name"}


def test_rdf_syntax_by_format_flag_and_clear_errors(tmp_path):
    renamed = tmp_path / "people.txt"
    renamed.write_bytes((FIXTURES / "rdf" / "people.ttl").read_bytes())
    result = runner.invoke(app, ["graph", "import", str(renamed), "--out", str(tmp_path / "a")])
    assert result.exit_code != 0 and "--format" in result.output
    result = runner.invoke(app, ["graph", "import", str(renamed), "--out", str(tmp_path / "b"), "--format", "turtle",
                                 "--no-reverse", "--lang", "de", "--json"])
    assert result.exit_code == 0, result.output
    graph = Graph.open(tmp_path / "b")
    bill = "http://dbpedia.org/resource/Bill_Gates"
    assert graph.feature(bill, "label") == "Bill Gates" and "spouse_reverse" not in graph.relation_names("Person")
    # Melinda's labels are English and French only: in German she has none (no fallback, no merge).
    assert not graph.has_feature_at(graph.index("http://dbpedia.org/resource/Melinda_French_Gates"), "label")


# RetrieveNode ----------------------------------------------------------------------------------

def test_retrieve_node_finds_nodes_by_name(shop, apoc, turtle, embedder):
    from glmcot.graph.index.retrieval import NodeRetriever, build_node_index

    for (graph, _), query, expected in [(shop, "Chai", "Product:1"), (shop, "Nancy Davolio", "Employee:1"),
                                        (shop, "Around the Horn", "Customer:3"), (apoc, "Keanu Reeves", "189"),
                                        (turtle, "Paul Allen", "http://dbpedia.org/resource/Paul_Allen")]:
        if not (graph.directory / "retrieval" / "meta.json").is_file():
            build_node_index(graph, embedder)
        assert NodeRetriever.open(graph.directory, embedder=embedder).retrieve(query) == expected, query


def test_opening_a_retriever_loads_no_model(shop, embedder):
    from glmcot.graph.index.retrieval import LazyEmbedder, NodeRetriever, build_node_index

    graph, _ = shop
    if not (graph.directory / "retrieval" / "meta.json").is_file():
        build_node_index(graph, embedder)
    retriever = NodeRetriever.open(graph.directory)
    assert isinstance(retriever.embedder, LazyEmbedder) and retriever.embedder.dim == embedder.dim


# GRBench unchanged -----------------------------------------------------------------------------

# sha256 over every prompt (no domain and dblp) and every vertex chunk of the GRBench-shaped
# fixtures, computed on main at 1223381 (before this work): GRBench stores must not change.
GRBENCH_DIGESTS = {
    "dblp_dangling.json": "bc8f0cea689a7005e388e27ee69d436d5c82ada2b29bfab5c4a18d407608542c",
    "biomedical_absent_relation_keys.json": "dcdb4b2e04bbc810ae65fba0cdec2c2c8e5a70dc35069c4e36bc14b63db86ad7",
}


@pytest.mark.parametrize("name", sorted(GRBENCH_DIGESTS))
def test_grbench_prompts_and_chunks_are_byte_identical(name, tmp_path):
    from glmcot.agents.prompts import load_prompts
    from glmcot.graph.tools.chunks import render_chunk_at
    from glmcot.graph.importers.importer import import_graph_json

    import_graph_json(Path(__file__).resolve().parents[1] / "fixtures" / "grbench" / name, tmp_path / "store")
    graph = Graph.open(tmp_path / "store")
    assert not graph.has_edge_features
    digest = hashlib.sha256()
    for domain in (None, "dblp"):
        prompts = load_prompts(domain, graph)
        for agent in ("definition", "classify", "classify_plan", "reason", "act", "graphcot", "graphcot_question", "act_retry"):
            digest.update(getattr(prompts, agent).encode())
    for index in range(graph.num_nodes):
        digest.update(render_chunk_at(graph, index).encode())
    assert digest.hexdigest() == GRBENCH_DIGESTS[name]


def test_edge_features_survive_an_update_and_compaction(tmp_path_factory):
    graph, _ = imported(tmp_path_factory, FIXTURES / "shop")
    store = graph.directory
    changes = store.parent / "changes.jsonl"
    changes.write_text(json.dumps({"op": "upsert_edge", "source": "Customer:2", "relation": "ORDERS",
                                   "target": "Product:1"}) + "\n")
    for command in (["graph", "update", str(store), str(changes)], ["graph", "compact", str(store)]):
        result = runner.invoke(app, command)
        assert result.exit_code == 0, result.output
        tools = GraphTools(Graph.open(store))
        assert tools.NeighbourCheck("Customer:1", "ORDERS", "quantity") == {"Product:1": 12, "Product:2": 10}
        # The updated list holds the new edge, without features (updates write none).
        assert tools.NeighbourCheck("Customer:2", "ORDERS", "quantity") == {"Product:3": 5, "Product:1": None}
        assert tools.NeighbourCheck("Product:1", "ORDERS_reverse") == ["Customer:1", "Customer:3", "Customer:2"]


def test_several_edges_to_one_neighbour_give_every_value(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "nodes.csv").write_text("id:ID,name\nc,Carol\np,Pen\n")
    (tmp_path / "in" / "orders.csv").write_text(":START_ID,:END_ID,:TYPE,quantity:int\nc,p,ORDERS,1\nc,p,ORDERS,2\nc,p,ORDERS,3\n")
    from glmcot.graph.importers.tables import import_tables

    import_tables(tmp_path / "in", tmp_path / "store")
    tools = GraphTools(Graph.open(tmp_path / "store"), neighbour_limit=2)
    values = tools.NeighbourCheck("c", "ORDERS", "quantity")
    assert values == {"p": [1, 2]} and "1 more of 3 left out" in repr(values)
    assert GraphTools(Graph.open(tmp_path / "store")).NeighbourCheck("p", "ORDERS_reverse", "quantity") == {"c": [1, 2, 3]}


def test_text_key_flag_overrides_and_unknown_names_are_clear_errors(tmp_path):
    shop = FIXTURES / "shop"
    result = runner.invoke(app, ["graph", "import", str(shop), "--out", str(tmp_path / "a"), "--json",
                                 "--text-key", "Customer=contactName", "--text-key", "Product=productName"])
    assert result.exit_code == 0, result.output
    assert Graph.open(tmp_path / "a").text_key("Customer") == "contactName"
    result = runner.invoke(app, ["graph", "import", str(shop), "--out", str(tmp_path / "b"), "--text-key", "Customer=nom"])
    assert result.exit_code != 0 and "Customer has no feature 'nom'" in result.output and not (tmp_path / "b").exists()
    result = runner.invoke(app, ["graph", "import", str(shop), "--out", str(tmp_path / "c"), "--text-key", "Client=name"])
    assert result.exit_code != 0 and "['Client']" in result.output
