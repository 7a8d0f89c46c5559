import pytest

from .fixtures import build_graph, questions


@pytest.fixture(scope="session")
def graph_dir(tmp_path_factory):
    return build_graph(tmp_path_factory.mktemp("graph") / "store")


@pytest.fixture(scope="session")
def graph(graph_dir):
    from glmcot.graph.storage.store import Graph

    return Graph.open(graph_dir)


@pytest.fixture(scope="session")
def records():
    return questions()


@pytest.fixture(scope="session")
def sandbox(graph_dir):
    from glmcot.agents.sandbox import SandboxExecutor, SandboxLimits

    executor = SandboxExecutor(graph_dir, workers=2, limits=SandboxLimits(wall_s=3.0, cpu_s=2.0, memory_mb=256))
    yield executor
    executor.close()


@pytest.fixture(scope="session")
def context(graph_dir):
    from glmcot.agents import AgentContext
    from glmcot.agents.sandbox import SandboxLimits

    ctx = AgentContext(graph_dir, retriever="lexical", workers=2, domain="dblp",
                       limits=SandboxLimits(wall_s=3.0, cpu_s=2.0, memory_mb=256))
    yield ctx
    ctx.close()


@pytest.fixture
def scripted(context, records):
    from glmcot.agents import ScriptedBackend

    return ScriptedBackend(records, code_runner=context.run_code)
