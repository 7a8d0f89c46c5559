import json
from pathlib import Path

from glmcot.eval import bench


def test_run_script_passes_advertised_flags_and_reads_json(tmp_path: Path, monkeypatch):
    scripts = tmp_path / "benchmarks"
    scripts.mkdir()
    (scripts / "graph.py").write_text(
        "import argparse, json\n"
        "p = argparse.ArgumentParser()\n"
        "p.add_argument('--quick', action='store_true')\n"
        "p.add_argument('--out')\n"
        "a = p.parse_args()\n"
        "print('| table |')\n"
        "open(a.out, 'w').write(json.dumps({'quick': a.quick}))\n")
    (scripts / "engine.py").write_text("import sys\nsys.exit(3)\n")
    monkeypatch.setattr(bench, "benchmarks_dir", lambda: scripts)
    out = tmp_path / "out"
    ok = bench.run_script("graph", quick=True, out=out, quiet=True)
    assert ok["status"] == "ok" and ok["results"] == {"quick": True}
    assert "--quick" in ok["command"] and str(out / "graph.json") in ok["command"]
    failed = bench.run_script("engine", quick=True, out=out, quiet=True)
    assert failed["status"] == "failed" and failed["returncode"] == 3
    assert "--quick" not in failed["command"]  # engine.py does not advertise it
    missing = bench.run_script("codesign", quick=False, out=out, quiet=True)
    assert missing["status"] == "missing" and "does not exist" in missing["message"]


def test_bench_command_runs_scripts_and_writes_bench_json(tmp_path: Path, monkeypatch):
    from typer.testing import CliRunner

    from glmcot.cli import app

    scripts = tmp_path / "benchmarks"
    scripts.mkdir()
    (scripts / "graph.py").write_text(
        "import argparse, json\n"
        "p = argparse.ArgumentParser()\n"
        "p.add_argument('--quick', action='store_true')\n"
        "p.add_argument('--out')\n"
        "a = p.parse_args()\n"
        "open(a.out, 'w').write(json.dumps({'rows': 3}))\n")
    monkeypatch.setattr(bench, "benchmarks_dir", lambda: scripts)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["bench", "graph", "--quick", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout[result.stdout.index("{"):])
    assert data["graph"]["results"] == {"rows": 3}
    assert json.loads((out / "bench.json").read_text())["graph"]["status"] == "ok"
