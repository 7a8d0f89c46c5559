"""`glmcot data` commands end to end on tiny data."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from glmcot.cli import app


def test_synth_replay_and_schema(tmp_path):
    runner = CliRunner()
    out = tmp_path / "lit"
    result = runner.invoke(app, ["data", "synth", "--domain", "literature", "--scale", "tiny", "--seed", "5",
                                 "--out", str(out), "--questions-per-template", "2", "--json"])
    assert result.exit_code == 0, result.output
    meta = json.loads(result.output[result.output.index("{"):])
    assert meta["domain"] == "goodreads" and meta["seed"] == 5 and meta["outputs"] == ["store"]
    assert meta["counts"]["questions"] == sum(meta["counts"]["questions_per_template"].values()) == 42
    assert (out / "graph" / "manifest.json").is_file() and not (out / "graph.json").exists()

    again = runner.invoke(app, ["data", "synth", "-d", "goodreads", "-o", str(out)])
    assert again.exit_code == 2 and "--force" in again.output

    result = runner.invoke(app, ["data", "replay", str(out), "--oracle", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["total"] == report["glm_correct"] == 42 and report["failures"] == []

    result = runner.invoke(app, ["data", "schema", "healthcare"])
    assert result.exit_code == 0 and "Compound-causes-Side Effect" in result.output


def test_bad_arguments(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["data", "synth", "-d", "chemistry", "-o", str(tmp_path / "x")])
    assert result.exit_code == 2 and "unknown domain 'chemistry'" in result.output
    result = runner.invoke(app, ["data", "synth", "-d", "dblp", "-s", "huge", "-o", str(tmp_path / "x")])
    assert result.exit_code == 2 and "unknown scale" in result.output
    result = runner.invoke(app, ["data", "replay", str(tmp_path)])
    assert result.exit_code == 2 and "needs graph/ and questions.jsonl" in result.output
    result = runner.invoke(app, ["data", "synth", "-d", "dblp", "--wordings", "unseen", "-o", str(tmp_path / "x")])
    assert result.exit_code == 2 and "unknown wordings 'unseen'" in result.output and "held-out" in result.output


def test_synth_held_out_wordings(tmp_path):
    from glmcot.data.templates.base import is_held_out_wording

    result = CliRunner().invoke(app, ["data", "synth", "-d", "dblp", "-o", str(tmp_path / "d"), "-q", "1",
                                      "--wordings", "held-out", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output[result.output.index("{"):])["wordings"] == "held-out"
    records = [json.loads(line) for line in (tmp_path / "d" / "questions.jsonl").read_text().splitlines()]
    assert records and all(is_held_out_wording("dblp", r["template"], r["params"], r["question"]) for r in records)
