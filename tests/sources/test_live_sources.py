"""Live graph databases behind the GraphSource seam, against real FalkorDB and Oxigraph servers:
the same answers as the store, hostile names, and a database that goes away."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from glmcot.cli import app
from glmcot.graph.tools.chunks import render_source_chunk
from glmcot.graph.errors import FeatureNotFound, NodeNotFound, RelationNotFound
from glmcot.graph.graph_source import SourceUnavailable
from glmcot.graph.opener import open_source
from glmcot.graph.tools.primitives import GraphTools


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
                assert store.neighbours(a, relation) == db.neighbours(b, relation)  # no bound: the whole list
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
    return {method: sorted((json.loads(line) for line in (out / f"{method}.jsonl").read_text().splitlines()),
                           key=lambda row: row["qid"])  # rows land in the order questions finish
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
    from glmcot.graph.live.servers import free_port

    url = f"falkordb://127.0.0.1:{free_port()}/g"
    with pytest.raises(SourceUnavailable, match=url.replace(".", r"\.")):
        open_source(url)
    sparql = f"sparql+http://127.0.0.1:{free_port()}/query"
    with pytest.raises(SourceUnavailable, match="127.0.0.1"):
        open_source(sparql)
    result = CliRunner().invoke(app, ["graph", "info", url])
    assert result.exit_code == 1 and url in " ".join(result.output.split()) and "Traceback" not in result.output


def test_a_database_that_dies_fails_the_snippet_and_the_source_recovers(store, dataset):
    """The sandbox over a live source: primitives go to the parent; when the database goes away
    the snippet's run raises SourceUnavailable (the agents turn it into graph_source_error), and
    once a database answers on that URL again the same source and sandbox answer again."""
    from glmcot.agents.sandbox import SandboxExecutor, SandboxLimits
    from glmcot.graph.live.db_export import export_graph
    from glmcot.graph.live.servers import start_falkordb

    server = start_falkordb()
    url = server.graph_url("dying")
    export_graph(store.graph, url)
    source = open_source(url)
    executor = SandboxExecutor(workers=1, limits=SandboxLimits(wall_s=20.0, cpu_s=5.0), source=source)
    try:
        paper = next(node_id for node_id, node_type, _ in _nodes(store) if node_type == "paper")
        expected = store.degree(store.resolve(paper), "author")
        code = f'print(NodeDegree("{paper}", "author"))'
        first = executor.run(code)
        assert first.ok and first.output.strip() == str(expected) and first.touched == [paper]
        port = server.port
        server.stop()
        with pytest.raises(SourceUnavailable, match=url.rsplit("/", 1)[0].replace(".", r"\.")):
            executor.run(code)
        server = start_falkordb(port=port)
        export_graph(store.graph, url)
        again = executor.run(code)
        assert again.ok and again.output.strip() == str(expected)
    finally:
        executor.close()
        source.close()
        server.stop()


def test_glm_agent_fails_a_question_with_graph_source_error_when_the_database_is_gone(store, dataset):
    from glmcot.agents import AgentContext
    from glmcot.agents.sandbox import SandboxLimits
    from glmcot.graph.live.db_export import export_graph
    from glmcot.graph.live.servers import start_falkordb

    server = start_falkordb()
    url = server.graph_url("gone")
    export_graph(store.graph, url)
    context = AgentContext(url, retriever="lexical", workers=1, limits=SandboxLimits(wall_s=20.0, cpu_s=5.0))
    try:
        assert context.is_live and context.domain == "dblp"
        paper = next(node_id for node_id, node_type, _ in _nodes(store) if node_type == "paper")
        assert context.run_code(f'print(NodeDegree("{paper}", "author"))').strip() == \
            str(store.degree(store.resolve(paper), "author"))
        server.stop()
        with pytest.raises(SourceUnavailable):
            context.executor.run(f'print(NodeDegree("{paper}", "author"))')
        # the GLM agent: the question fails with its own category, and the agent answers on
        from glmcot.agents.runner import make_agent
        from glmcot.agents.scripted import ScriptedBackend
        from glmcot.data.questions import read_questions

        records = read_questions(dataset / "questions.jsonl", limit=3)
        backend = ScriptedBackend([record.to_json() if hasattr(record, "to_json") else record.__dict__ for record in records],
                                  code_runner=context.run_code)
        agent = make_agent("glm", backend, context)
        failed = [agent.answer(record.question, qid=record.qid) for record in records]
        needs_graph = [result for result in failed if not result.answer]
        assert needs_graph and all(result.failure == "graph_source_error" and "FalkorDB" in result.failure_detail
                                   for result in needs_graph)
    finally:
        context.close()
        server.stop()


def test_a_live_chunk_key_follows_the_chunk_text(store, database_url):
    from glmcot.graph.tools.chunks import chunk_key

    db = open_source(database_url)
    try:
        node_id = _nodes(store)[0][0]
        text = render_source_chunk(db, db.resolve(node_id))
        key = chunk_key(db, node_id)
        assert key == chunk_key(db, node_id, text=text) and key.startswith(f"vertex:{db.location}:{node_id}:")
        assert chunk_key(db, node_id, text=text + "changed\n") != key
    finally:
        db.close()
