"""A user's graph end to end: the movies example imported from CSV and from N-Triples, then
questions answered by GLM and Graph-CoT under the scripted policy (system check, not accuracy),
with prompts derived from the store alone (no hand-written domain)."""

import json

import pytest
from typer.testing import CliRunner

from glmcot.cli import app
from glmcot.data.movies import BASE_IRI, REVERSE_SUFFIX, TEXT_PREDICATE, write_example

runner = CliRunner()


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    out = tmp_path_factory.mktemp("movies")
    write_example(out, movies=20, people=12, count=6)
    stores = {}
    for kind, source, extra in [
        ("tables", out / "tables", []),
        ("triples", out / "movies.nt", ["--id-prefix", BASE_IRI, "--text-predicate", TEXT_PREDICATE]),
    ]:
        result = runner.invoke(app, ["graph", "import", str(source), "--out", str(out / f"store-{kind}"),
                                     "--reverse-suffix", REVERSE_SUFFIX, "--json", *extra])
        assert result.exit_code == 0, result.output
        stores[kind] = out / f"store-{kind}"
    records = [json.loads(line) for line in (out / "questions.jsonl").read_text().splitlines()]
    return stores, records


def test_both_imports_give_the_same_graph(example):
    from glmcot.graph.tools.chunks import render_chunk
    from glmcot.graph.storage.store import Graph

    stores, _ = example
    tables, triples = Graph.open(stores["tables"]), Graph.open(stores["triples"])
    assert tables.node_types == triples.node_types == ["Movie", "Person"]
    for node_type in tables.node_types:
        assert tables.feature_names(node_type) == triples.feature_names(node_type)
        assert sorted(tables.relation_names(node_type)) == sorted(triples.relation_names(node_type))
    assert tables.num_edges == triples.num_edges
    # Same features and neighbours (chunks rank by weight in the tables store, by degree in triples).
    assert tables.features_at(tables.index("movie/1")) == triples.features_at(triples.index("movie/1"))
    assert sorted(tables.neighbors("person/1", "actor_of")) == sorted(triples.neighbors("person/1", "actor_of"))
    assert render_chunk(triples, "movie/1").startswith("[node movie/1 | Movie]\ntitle: ")


def test_prompts_come_from_the_store(example):
    from glmcot.agents.prompts import load_prompts
    from glmcot.graph.storage.store import Graph

    stores, _ = example
    prompts = load_prompts("movies", Graph.open(stores["triples"]))
    assert "Movie nodes have the features title, year, genres and link through director (to Person nodes)" in prompts.definition
    examples = prompts.act.split("Examples:")[1]
    assert 'NeighbourCheck(node, "director")' in examples and 'NodeFeature(n, "name")' in examples
    assert "NodeFeature(node, \"year\")" in examples and "link" not in examples  # not the generic example


@pytest.mark.parametrize("kind", ["tables", "triples"])
def test_scripted_policy_answers_on_an_imported_graph(example, kind):
    from glmcot.agents import AgentConfig, AgentContext, GLMAgent, GraphCoTAgent, ScriptedBackend
    from glmcot.agents.sandbox import SandboxLimits

    stores, records = example
    with AgentContext(stores[kind], retriever="lexical", workers=1,
                      limits=SandboxLimits(wall_s=5.0, cpu_s=3.0, memory_mb=256)) as context:
        assert context.domain is None  # nothing hand-written about this graph
        backend = ScriptedBackend(records, code_runner=context.run_code)
        for record in records:
            glm = GLMAgent(backend, context, AgentConfig()).answer(record["question"], qid=record["qid"])
            assert glm.failure is None, glm.failure_detail
            assert glm.answer == record["answer"], record["question"]
            graphcot = GraphCoTAgent(backend, context, AgentConfig()).answer(record["question"], qid=record["qid"])
            assert graphcot.failure is None, graphcot.failure_detail
            assert graphcot.answer == record["answer"], record["question"]


def test_changed_node_reaches_the_prompt_with_a_new_chunk_key(tmp_path):
    """After an update the agents see the node's new text, in a segment whose reuse key is new, so
    the engine cannot reuse KV computed for the old text (its chunk index also compares tokens)."""
    from glmcot.agents import AgentConfig, AgentContext, GLMAgent, ScriptedBackend
    from glmcot.agents.sandbox import SandboxLimits
    from glmcot.graph.updates.delta import parse_operation
    from glmcot.graph.importers.tables import import_tables
    from glmcot.graph.updates.versions import apply_update
    from glmcot.llm import LLMBackend

    out = tmp_path / "movies"
    write_example(out, movies=12, people=8, count=3)
    import_tables(out / "tables", out / "store", reverse_suffix=REVERSE_SUFFIX)
    # Not deterministic: the R-Agent then reads the notebook, which holds the touched nodes' chunks.
    records = [dict(json.loads(line), deterministic=False) for line in (out / "questions.jsonl").read_text().splitlines()]
    record = next(r for r in records if r["template"] == "movies/director")

    class Recording(LLMBackend):
        def __init__(self, inner):
            self.inner, self.label, self.segments = inner, inner.label, []

        def complete(self, request):
            self.segments += [(segment.key, segment.text) for segment in request.segments if segment.key]
            return self.inner.complete(request)

    def chunk_segments():
        limits = SandboxLimits(wall_s=5.0, cpu_s=3.0, memory_mb=256)
        with AgentContext(out / "store", retriever="lexical", workers=1, limits=limits) as context:
            backend = Recording(ScriptedBackend(records, code_runner=context.run_code))
            result = GLMAgent(backend, context, AgentConfig()).answer(record["question"], qid=record["qid"])
            director = context.graph.neighbors(record["entities"]["movie"], "director")[0]
            return result.answer, director, {key: text for key, text in backend.segments if f":{director}:" in key}

    answer, director, before = chunk_segments()
    assert answer == record["answer"] and before
    apply_update(out / "store", [parse_operation({"op": "upsert_node", "id": director,
                                                  "features": {"name": "Renamed Person"}}, "op 1")])
    answer, _, after = chunk_segments()
    assert answer == "Renamed Person"
    assert after and all("Renamed Person" in text for text in after.values())
    assert not set(before) & set(after)  # no old key, so no old KV
