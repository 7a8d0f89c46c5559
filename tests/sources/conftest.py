"""Real FalkorDB and Oxigraph servers (started here, stopped with SIGTERM at the end) and a
synthetic dblp dataset exported into each."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def dataset(tmp_path_factory):
    from glmcot.eval.workload import ensure_dataset

    return ensure_dataset("dblp", "tiny", 0, tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="session")
def store(dataset):
    from glmcot.graph.opener import open_source

    source = open_source(dataset)
    yield source
    source.close()


@pytest.fixture(scope="session")
def falkordb_server():
    from glmcot.graph.live.servers import start_falkordb

    with start_falkordb() as server:
        yield server


@pytest.fixture(scope="session")
def oxigraph_server():
    from glmcot.graph.live.servers import start_oxigraph

    with start_oxigraph() as server:
        yield server


@pytest.fixture(scope="session", params=["falkordb", "sparql"])
def database_url(request, store, dataset):
    """The dataset exported into one database (by the export command), as a location URL."""
    from typer.testing import CliRunner

    from glmcot.cli import app

    server = request.getfixturevalue("falkordb_server" if request.param == "falkordb" else "oxigraph_server")
    url = server.graph_url("dblp")
    result = CliRunner().invoke(app, ["graph", "export", str(dataset), "--to", url, "--overwrite"])
    assert result.exit_code == 0, result.output
    return url


def questions_file(dataset: Path) -> Path:
    return dataset / "questions.jsonl"
