"""The demo shows glmcot-mini deciding (real decoding), labelled as trained on synthetic data."""

import json

from typer.testing import CliRunner

from glmcot.cli import app


def _env(tmp_path):
    return {"GLMCOT_CACHE": str(tmp_path / "cache"), "GLMCOT_CONCURRENCY": "2", "COLUMNS": "160", "HF_HUB_OFFLINE": "1"}


def test_demo_shows_glmcot_mini_answering_with_real_decoding(built, tmp_path):
    root, _ = built
    out = tmp_path / "demo"
    result = CliRunner().invoke(app, ["demo", "--quick", "--domains", "dblp", "--no-ablation", "--out", str(out),
                                      "--mini", str(root / "ckpt"), "--json"], env=_env(tmp_path))
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout[result.stdout.index("{"):])
    mini = data["mini"]
    assert mini["label"] == "glmcot-mini, trained on synthetic data" and "not scripted" in mini["policy"]
    assert mini["model"] == str(root / "ckpt") and len(mini["answers"]) == 1
    answer = mini["answers"][0]
    assert answer["domain"] == "dblp" and answer["llm_calls"] >= 1 and answer["gold"]
    # the same question the scripted tables ran, now decided by the model
    assert answer["qid"] in {row["qid"] for row in map(json.loads, (out / "runs" / "glm" / "dblp.jsonl").read_text().splitlines())}
    report = (out / "report.md").read_text()
    assert "A model deciding: glmcot-mini, trained on synthetic data" in report and "not from the scripted policy" in report


def test_demo_with_a_missing_mini_checkpoint_says_how_to_build_it_before_running(tmp_path):
    result = CliRunner().invoke(app, ["demo", "--quick", "--domains", "dblp", "--out", str(tmp_path / "demo"),
                                      "--mini", str(tmp_path / "nowhere")], env=_env(tmp_path))
    assert result.exit_code == 2
    assert "glmcot train-mini" in result.output and not (tmp_path / "demo" / "results.json").exists()


def test_table1_puts_glmcot_mini_after_each_domains_scripted_rows():
    from glmcot.eval.mini_demo import MINI_METHOD, MiniAnswer, table1_with_mini

    rows = [{"method": m, "domain": d, "questions": 2} for d in ("dblp", "amazon") for m in ("graphcot", "glm")]
    answers = [MiniAnswer("dblp", "q1", "Q?", "A", "A", True, True, None, 3, None, 0.5),
               MiniAnswer("dblp", "q2", "Q2?", "", "B", False, False, None, 5, "retrieval_error", 1.5)]
    merged = table1_with_mini(rows, answers)
    assert [(r["domain"], r["method"]) for r in merged] == [("dblp", "graphcot"), ("dblp", "glm"), ("dblp", MINI_METHOD),
                                                            ("amazon", "graphcot"), ("amazon", "glm")]
    mini = merged[2]
    assert mini["em_count"] == 1 and mini["questions"] == 2 and mini["llm_calls_per_question"] == 4.0
    assert table1_with_mini(rows, []) == rows
