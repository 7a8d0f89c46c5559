"""The GRBench loader on the five real question files (1040 questions)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from glmcot.cli import app
from glmcot.data.grbench import block_of, load_grbench
from glmcot.data.questions import QuestionFormatError, read_questions

GRBENCH_DIR = Path(__file__).resolve().parents[2] / "data" / "grbench"
FILES = {"dblp": (150, {"easy": 70, "medium": 80}),
         "amazon": (200, {"easy": 80, "medium": 80, "hard": 40}),
         "goodreads": (240, {"easy": 130, "medium": 100, "hard": 10}),
         "biomedical": (270, {"easy": 100, "medium": 170}),
         "legal": (180, {"easy": 70, "medium": 90, "hard": 20})}

@pytest.mark.parametrize("domain", FILES)
def test_real_files_get_templates_and_levels(domain):
    records = load_grbench(GRBENCH_DIR / f"{domain}.jsonl")
    count, levels = FILES[domain]
    assert len(records) == count
    assert Counter(r.level for r in records) == levels
    per_template = Counter(r.template for r in records)
    assert set(per_template.values()) == {10} and len(per_template) == count // 10
    assert records[0].template == f"{domain}/0" and records[-1].template == f"{domain}/{count // 10 - 1}"


def test_cli_loads_all_1040(tmp_path):
    paths = [str(GRBENCH_DIR / f"{d}.jsonl") for d in FILES]
    result = CliRunner().invoke(app, ["data", "grbench", *paths, "--json", "--out", str(tmp_path / "all.jsonl")])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert sum(v["questions"] for v in summary.values()) == 1040
    assert sum(v["levels"].get("hard", 0) for v in summary.values()) == 70
    written = read_questions(tmp_path / "all.jsonl")
    assert len(written) == 1040 and written[0].template == "dblp/0" and written[0].level == "easy"


def test_examples_of_blocks():
    assert block_of("dblp", 0).name == "authors of a paper"
    assert block_of("academic", "139").level == "medium"
    assert block_of("amazon", 165).level == "hard"
    with pytest.raises(QuestionFormatError, match="block 15, but GRBench dblp has blocks 0-14"):
        block_of("dblp", 150)


def test_bad_files(tmp_path):
    path = tmp_path / "legal.jsonl"
    path.write_text('{"qid": "0", "question": "q", "answer": "a"}\n{"qid": "0", "question": "q", "answer": "b"}\n')
    with pytest.raises(QuestionFormatError, match="duplicate qid 0"):
        load_grbench(path)
    path.write_text('{"qid": "x", "question": "q", "answer": "a"}\n')
    with pytest.raises(QuestionFormatError, match="not a GRBench integer qid"):
        load_grbench(path)
    path.write_text('{"qid": "3", "question": "q", "answer": "a", "level": "hard"}\n')
    assert load_grbench(path)[0].level == "hard"     # a level in the file wins
    other = tmp_path / "questions.jsonl"
    other.write_text('{"qid": "0", "question": "q", "answer": "a"}\n')
    result = CliRunner().invoke(app, ["data", "grbench", str(other)])
    assert result.exit_code == 2 and "pass --domain" in result.output
    assert load_grbench(other, domain="healthcare")[0].template == "biomedical/0"
