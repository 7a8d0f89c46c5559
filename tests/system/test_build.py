"""The one builder: a typed SystemConfig in, a working System out."""

from __future__ import annotations

import pytest

from glmcot.agents.records import QuestionResult
from glmcot.agents.scripted import ScriptedBackend
from glmcot.llm import BackendSpec
from glmcot.system import BackendCheck, SetupError, SystemConfig, build_system

from ..agents.fixtures import build_graph, questions


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return build_graph(tmp_path_factory.mktemp("graph") / "store")


@pytest.fixture(scope="module")
def records():
    return questions()


def scripted_config(store, records, **changes):
    settings = dict(backend=BackendSpec.parse("scripted"), graphs={"dblp": store}, domain="dblp",
                    retriever="lexical", workers=1, scripted_questions=records)
    settings.update(changes)
    return SystemConfig(**settings)


def test_the_scripted_system_on_a_tiny_graph_answers_with_the_gold_plans(store, records):
    with build_system(scripted_config(store, records)) as system:
        assert set(system.contexts) == {"dblp"} and system.model is None   # the scripted policy alone
        assert isinstance(system.backend, ScriptedBackend) and system.backends["dblp"] is system.backend
        for method in ("glm", "graphcot"):
            agent = system.agent(method)
            for record in records:
                result = agent.answer(record["question"], qid=record["qid"])
                assert isinstance(result, QuestionResult)
                assert result.failure is None, (method, record["qid"], result.failure_detail)
                # the policy's answer is what the GLM plan prints on this graph, run in this sandbox
                assert result.answer == system.context().run_code(record["plan"]["glm"][-1]["code"]).strip()
                assert result.llm_calls >= 2 and result.prompt_tokens > 0


def test_agent_options_configure_every_agent_and_bad_ones_fail_at_build(store, records):
    with build_system(scripted_config(store, records, agent_options={"max_rounds": 1})) as system:
        assert system.agent("glm").config.max_rounds == 1
        assert system.agent("glm", settings={"max_rounds": 3}).config.max_rounds == 3
    with pytest.raises(ValueError, match="unknown agent option"):
        build_system(scripted_config(store, records, agent_options={"max_roundz": 1}))


def test_one_scripted_backend_per_graph_each_running_plans_in_its_own_sandbox(store, records):
    config = scripted_config(store, records, graphs={"one": store, "two": store})
    with build_system(config) as system:
        one, two = system.backends["one"], system.backends["two"]
        assert one is not two and one.code_runner != two.code_runner
        assert one.code_runner == system.context("one").run_code
        with pytest.raises(ValueError, match="name one"):
            system.context()
        fresh = system.open_context(store, domain="dblp")
        try:
            assert system.graph_backend(fresh).code_runner == fresh.run_code
        finally:
            fresh.close()


def test_without_graphs_the_scripted_backend_has_no_sandbox(records):
    with build_system(SystemConfig(backend=BackendSpec.parse("scripted"), scripted_questions=records)) as system:
        assert system.contexts == {} and system.context() is None
        assert isinstance(system.backend, ScriptedBackend) and system.backend.code_runner is None


def test_setup_errors_say_what_to_give(tmp_path, store, records):
    with pytest.raises(SetupError, match="graph folder not found"):
        build_system(scripted_config(tmp_path / "missing", records))
    (tmp_path / "empty").mkdir()
    with pytest.raises(SetupError, match="not a glmcot graph store"):
        build_system(scripted_config(tmp_path / "empty", records))
    with build_system(SystemConfig(graphs={"dblp": store}, retriever="lexical")) as bare:   # glmcot exec's
        assert bare.model is None and bare.backends == {} and bare.context().graph.num_nodes > 0
        with pytest.raises(ValueError, match="no LLM"):
            bare.agent("glm")
    dead = BackendSpec.openai("http://127.0.0.1:9/v1", model="m", max_retries=0, timeout_s=2.0)
    with pytest.raises(SetupError, match="the LLM server http://127.0.0.1:9/v1 cannot answer"):
        build_system(SystemConfig(backend=dead))
    with build_system(SystemConfig(backend=dead, check=BackendCheck.WARN)) as system:   # serve: it may come up later
        assert system.backend is system.model and system.model.max_retries == 0
