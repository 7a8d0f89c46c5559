"""`glmcot bench`: each benchmark is a module of glmcot.benchmarks run as its own process; its
JSON comes back into bench.json, arguments after `--` reach it, failures are reported."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from glmcot.cli import app
from glmcot.eval import bench
from tests.eval.test_codesign_repeats import result, write


def test_command_adds_quick_only_where_it_exists_and_out_unless_given(tmp_path: Path):
    out = tmp_path / "graph.json"
    assert bench.benchmark_command("graph", [], True, out)[1:] == ["-m", "glmcot.benchmarks.graph", "--quick",
                                                                    "--out", str(out)]
    assert "--quick" not in bench.benchmark_command("agents", [], True, out)
    mine = bench.benchmark_command("codesign", ["--out", "x.json", "--kv-tokens", "4096"], False, out)
    assert mine[-4:] == ["--out", "x.json", "--kv-tokens", "4096"] and mine.count("--out") == 1
    with pytest.raises(ValueError, match="unknown benchmark 'nope'"):
        bench.benchmark_command("nope", [], False, out)


def test_bench_runs_a_benchmark_module_with_passed_arguments_and_collects_its_json(tmp_path: Path):
    first = write(tmp_path / "a.json", result(20480, [16.0, 12.0]))
    out = tmp_path / "out"
    run = CliRunner().invoke(app, ["bench", "codesign_repeats", "--out", str(out), "--json", "--", str(first)])
    assert run.exit_code == 0, run.output
    data = json.loads(run.stdout[run.stdout.index("{"):])
    row = data["codesign_repeats"]
    assert row["status"] == "ok" and "-m glmcot.benchmarks.codesign_repeats" in row["command"]
    assert row["results"]["settings"][0]["repeats"] == [16.0, 12.0]
    assert json.loads((out / "bench.json").read_text())["codesign_repeats"]["status"] == "ok"


def test_a_failing_benchmark_is_reported_with_its_error(tmp_path: Path):
    broken = write(tmp_path / "broken.json", '{"benchmark": "codesign", ')
    row = bench.run_benchmark("codesign_repeats", False, tmp_path / "out", quiet=True, args=[str(broken)])
    assert row["status"] == "failed" and row["returncode"] != 0
    assert "not a readable JSON file" in row["stderr_tail"]


def test_unknown_benchmark_and_stray_arguments_are_refused():
    unknown = CliRunner().invoke(app, ["bench", "nope"])
    assert unknown.exit_code != 0 and "unknown benchmark 'nope'" in unknown.output
    stray = CliRunner().invoke(app, ["bench", "all", "--", "--kv-tokens", "4096"])
    assert stray.exit_code != 0 and "extra arguments go to one benchmark" in stray.output
