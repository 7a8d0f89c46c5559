"""Live graph databases behind the GraphSource seam, against real FalkorDB and Oxigraph servers:
the same answers as the store, hostile names, and a database that goes away."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from glmcot.cli import app
from glmcot.graph.chunks import render_source_chunk
from glmcot.graph.errors import FeatureNotFound, NodeNotFound, RelationNotFound
from glmcot.graph.graph_source import SourceUnavailable
from glmcot.graph.opener import open_source
from glmcot.graph.primitives import GraphTools


def _nodes(source):
    return [node for batch in source.iter_nodes(300) for node in batch]


def test_every_node_reads_the_same_on_the_database(store, database_url):
    db = open_source(database_url)
    try:
        assert db.schema() == store.schema() and db.schema().domain == "dblp"
        nodes = _nodes(store)
        assert _nodes(db) == nodes
        for node_id, node_type, _text in nodes[::7]:
            a, b = store.resolve(node_id), db.resolve(node_id)
            assert store.features(a) == db.features(b)
            assert render_source_chunk(store, a) == render_source_chunk(db, b)
            for relation in store.schema().type(node_type).relations:
                assert store.neighbours(a, relation, 3) == db.neighbours(b, relation, 3)
                assert store.degree(a, relation) == db.degree(b, relation)
        assert db.texts([nodes[0][0], "no-such-id"]) == [nodes[0][2], "no-such-id"]
    finally:
        db.close()


HOSTILE = ['x"}) DETACH DELETE n //', "}) DETACH DELETE n //", "'; MATCH (n) DETACH DELETE n; //", "} ; DROP ALL",
           "> } ; DROP ALL ; <", "{braces} and \"quotes\" and 'single' \\ back", "a" * 200_000, "\ud800lone", "\x00nul",
           "urn:glmcot:schema", "<urn:glmcot:schema>"]


@pytest.mark.parametrize("hostile", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_ids_and_names_are_no_such_node_and_change_nothing(store, database_url, hostile):
    db = open_source(database_url)
    try:
        before = (db.version(), len(_nodes(db)))
        tools = GraphTools(db)
        for call in (lambda: tools.NodeInfo(hostile), lambda: tools.NodeFeature(hostile, "title"),
                     lambda: tools.NeighbourCheck(hostile, "author"), lambda: tools.NodeDegree(hostile, "author")):
            with pytest.raises(NodeNotFound, match="no such node"):
                call()
        paper = next(node_id for node_id, node_type, _ in _nodes(store) if node_type == "paper")
        with pytest.raises(RelationNotFound, match="has no relation"):
            tools.NeighbourCheck(paper, hostile)
        with pytest.raises(RelationNotFound, match="has no relation"):
            tools.NodeDegree(paper, hostile)
        with pytest.raises(FeatureNotFound, match="has no feature"):
            tools.NodeFeature(paper, hostile)
        assert (db.version(), len(_nodes(db))) == before
    finally:
        db.close()


def _eval(args: list[str], out: Path) -> dict[str, list[dict]]:
    result = CliRunner().invoke(app, [*args, "--out", str(out), "--json"],
                                env={"GLMCOT_CONCURRENCY": "2", "HF_HUB_OFFLINE": "1"})
    assert result.exit_code == 0, result.output
    return {method: [json.loads(line) for line in (out / f"{method}.jsonl").read_text().splitlines()]
            for method in ("graphcot", "glm")}


def test_scripted_eval_on_the_database_gives_the_stores_answers_and_tokens(dataset, database_url, tmp_path):
    common = ["eval", "--questions", str(dataset / "questions.jsonl"), "--method", "graphcot,glm", "--scripted",
              "--limit", "6"]
    on_store = _eval([*common, "--graph", str(dataset)], tmp_path / "store")
    on_db = _eval([*common, "--graph", database_url], tmp_path / "db")
    for method in ("graphcot", "glm"):
        keys = ("qid", "model_answer", "gt_answer", "failure", "llm_calls", "prompt_tokens", "output_tokens")
        assert [{k: row.get(k) for k in keys} for row in on_db[method]] == \
            [{k: row.get(k) for k in keys} for row in on_store[method]]
        assert sum(1 for row in on_store[method] if not row.get("failure")) >= 3  # the runs answered something


def test_graph_info_and_call_take_a_url(database_url, store):
    info = CliRunner().invoke(app, ["graph", "info", database_url, "--json"])
    assert info.exit_code == 0, info.output
    data = json.loads(info.output)
    assert [entry["name"] for entry in data["types"]] == store.schema().node_types and data["version"].endswith("@v0")
    paper = next(node_id for node_id, node_type, _ in _nodes(store) if node_type == "paper")
    call = CliRunner().invoke(app, ["graph", "call", database_url, f'NodeDegree("{paper}", "author")', "--json"])
    assert call.exit_code == 0, call.output
    assert json.loads(call.output)["result"] == store.degree(store.resolve(paper), "author")


def test_an_unreachable_database_is_a_clear_error_naming_the_url():
    from glmcot.graph.servers import free_port

    url = f"falkordb://127.0.0.1:{free_port()}/g"
    with pytest.raises(SourceUnavailable, match=url.replace(".", r"\.")):
        open_source(url)
    sparql = f"sparql+http://127.0.0.1:{free_port()}/query"
    with pytest.raises(SourceUnavailable, match="127.0.0.1"):
        open_source(sparql)
    result = CliRunner().invoke(app, ["graph", "info", url])
    assert result.exit_code == 1 and url in " ".join(result.output.split()) and "Traceback" not in result.output
