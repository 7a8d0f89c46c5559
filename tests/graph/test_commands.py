import json

import pytest
from typer.testing import CliRunner

from glmcot.cli import app
from glmcot.graph.commands import parse_call

runner = CliRunner()


def call(store, text, *options):
    return runner.invoke(app, ["graph", "call", str(store), text, *options])


def test_parse_call_accepts_literals_only():
    assert parse_call('NodeFeature("p1", "title")') == ("NodeFeature", ["p1", "title"])
    assert parse_call("NodeDegree('a1','paper')") == ("NodeDegree", ["a1", "paper"])
    for bad, message in [
        ('NodeFeature(open("x"), "t")', "not a literal"),
        ('__import__("os")', "unknown primitive"),
        ("NodeFeature(", "cannot parse"),
        ("1 + 2", "expected a call"),
        ('NodeFeature(id="p1")', "keyword arguments"),
        ('os.system("ls")', "expected a call"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_call(bad)


def test_call_prints_results(tiny_dir):
    result = call(tiny_dir, 'NeighbourCheck("p3", "author")')
    assert result.exit_code == 0 and result.output == "['a1', 'a2', 'a3']\n"
    limited = call(tiny_dir, 'NeighbourCheck("p3", "author")', "--limit", "1", "--json")
    assert json.loads(limited.output) == {"call": 'NeighbourCheck("p3", "author")', "result": ["a1"], "total": 3}
    assert call(tiny_dir, 'NodeFeature("p1", "year")', "--json").output.strip().endswith('"result": 2024}')
    assert call(tiny_dir, 'NodeInfo("pub_1")').output.startswith("[node pub_1 | venue]\nname: VLDB\n")
    sentence = call(tiny_dir, 'NodeDegree("a1", "paper")', "--graphcot").output
    assert sentence == "The paper neighbor node degree of a1 are: 3. \n"


def test_call_errors(tiny_dir):
    failed = call(tiny_dir, 'NodeFeature("a1", "title")', "--json")
    assert failed.exit_code == 1
    error = json.loads(failed.output)["error"]
    assert error["type"] == "FeatureNotFound" and "author features: name, organization" in error["message"]
    missing = call(tiny_dir, 'NodeDegree("zz", "paper")')
    assert missing.exit_code == 1 and "no such node: 'zz'" in missing.output
    arity = call(tiny_dir, 'NodeDegree("a1")')
    assert arity.exit_code == 1 and "NodeDegree" in arity.output
    no_index = call(tiny_dir, 'RetrieveNode("Ada")')
    assert no_index.exit_code == 1 and "glmcot graph embed" in no_index.output
    assert call(tiny_dir, 'exec("x")').exit_code == 2


def test_embed_then_retrieve_from_the_command_line(tmp_path, monkeypatch, embedder, tiny_builder):
    import glmcot.graph.index.retrieval as retrieval

    store = tmp_path / "store"
    tiny_builder(store)
    # reuse the session's loaded model instead of loading it again in the command
    monkeypatch.setattr(retrieval, "MiniLMEmbedder", lambda device="cpu": embedder)
    built = runner.invoke(app, ["graph", "embed", str(store), "--json"])
    assert built.exit_code == 0, built.output
    assert json.loads(built.output)["num_nodes"] == 8
    result = call(store, 'RetrieveNode("Grace Hopper")')
    assert result.exit_code == 0 and result.output == "a3\n"
    info = json.loads(runner.invoke(app, ["graph", "info", str(store), "--json"]).output)
    assert info["retrieval"]["index"]["kind"] == "flat"
