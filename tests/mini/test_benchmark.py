"""The glmcot-mini benchmark: plan shapes, repaired-error counting and a smoke run on a tiny checkpoint."""

import json
from types import SimpleNamespace

from glmcot.benchmarks import NAMES
from glmcot.benchmarks.mini import code_errors, main, plan_shape, retrieve_arguments


def test_plan_shape_reads_primitives_and_relations():
    gold = 'node = RetrieveNode("Deep Nets")\nfound = NeighbourCheck(node, "author")\nprint(", ".join(NodeFeature(n, "name") for n in found))'
    assert plan_shape(gold) == (("RetrieveNode", "NeighbourCheck", "NodeFeature"), frozenset({"author", "name"}))
    assert plan_shape(gold.replace('"author"', '"venue"')) != plan_shape(gold)
    assert plan_shape(None) == ((), frozenset())
    assert retrieve_arguments(gold) == ["Deep Nets"]


def test_code_errors_count_repairs_at_the_same_step():
    def exec_(step, ok, output="x"):
        return {"type": "exec", "step": step, "result": {"ok": ok, "output": output if ok else ""}}

    result = SimpleNamespace(trace=[exec_(0, False), exec_(0, True), exec_(1, False), exec_(1, True, output="  ")])
    assert code_errors(result) == (3, 1)
    assert "mini" in NAMES


def test_benchmark_runs_on_a_tiny_checkpoint(built, tmp_path):
    root, _ = built
    out = tmp_path / "bench.json"
    main(["--model", str(root / "ckpt"), "--domains", "dblp", "--limit", "2", "--max-tokens", "24", "--max-rounds", "1",
          "--data-dir", str(root / "work" / "graphs"), "--out", str(out)])
    report = json.loads(out.read_text())
    row = report["held_out"]["dblp"]
    assert row["questions"] == 2 and row["ceiling_em"] == 1.0  # the scripted ceiling answers held-out questions
    assert 0.0 <= row["em"] <= 1.0 and set(row["c_agent"]) == {"accuracy", "false_positive", "false_negative"}
    assert sum(cell["n"] for cell in report["grbench"]["dblp"].values()) == 2
    assert sum(cell["n"] for cell in row["by_phrasing"].values()) == 2 and set(row["by_phrasing"]) <= {"seen", "held-out"}
    single = report["graphcot"]["dblp"]  # the same model in Graph-CoT's single-agent loop
    assert single["questions"] == 2 and single["ceiling_em"] == 1.0 and "c_agent" not in single
    assert "not general reasoning" in report["meaning"]
