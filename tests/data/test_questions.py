"""questions.jsonl records: fields, levels, wordings and plan shapes follow docs/contracts.md."""

from __future__ import annotations

import ast
import json
import re
from collections import defaultdict

import pytest

from glmcot.data.grbench import block_table
from glmcot.data.questions import LEVELS, QuestionFormatError, read_questions
from glmcot.data.schemas import DOMAINS
from glmcot.data.templates import template_set
from glmcot.data.templates.base import wordings

CALLS = {"RetrieveNode", "NodeFeature", "NeighbourCheck", "NodeDegree", "print", "len", "set", "max",
         "min", "sum", "sorted", "any"}
REF = re.compile(r"\$(\d+)")


@pytest.mark.parametrize("domain", DOMAINS)
def test_records_follow_the_contract(domain, tiny_datasets):
    raw_lines = (tiny_datasets[domain] / "questions.jsonl").read_text().splitlines()
    records = read_questions(tiny_datasets[domain] / "questions.jsonl")
    assert len(records) == len(raw_lines) and len({r.qid for r in records}) == len(records)
    first = json.loads(raw_lines[0])
    assert list(first)[:9] == ["qid", "domain", "template", "params", "level", "question", "answer",
                               "deterministic", "plan"]
    blocks = block_table()[domain]
    phrasings = defaultdict(set)
    for r in records:
        assert r.domain == domain and r.template.startswith(domain + "/")
        assert r.level in LEVELS and r.level == blocks[int(r.template.split("/")[1])].level
        assert r.answer.strip() and "{" not in r.question
        for value in r.params.values():
            assert str(value) in r.question
        phrasings[r.template].add(r.question.replace(next(iter(r.params.values()), ""), "<slot>"))
        glm, cot = r.plan.glm, r.plan.graphcot
        assert (len(glm) == 1) == r.deterministic, r.qid
        for step in glm:
            assert step.missing.strip()
            called = {n.func.id for n in ast.walk(ast.parse(step.code))
                      if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
            assert called <= CALLS, (r.qid, called - CALLS)
        assert "print(" in glm[-1].code
        assert cot[0].action.startswith("RetrieveNode[") and cot[-1].action == "Finish[$answer]"
        for k, action in enumerate(cot):
            assert re.fullmatch(r"\w+\[.*\]", action.action, re.S) and action.thought
            assert all(int(m) < k for m in REF.findall(action.action)), (r.qid, action)
            if action.action.startswith("RetrieveNode["):
                assert "]" not in action.action[len("RetrieveNode["):-1]
    for template, seen in phrasings.items():
        if len([r for r in records if r.template == template]) >= 6:
            assert len(seen) >= 2, f"{template}: the question text is one fixed pattern"


@pytest.mark.parametrize("domain", DOMAINS)
def test_templates_and_wordings(domain):
    templates = template_set(domain).templates
    numbers = [int(t.template.split("/")[1]) for t in templates]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
    for t in templates:
        assert len(wordings(domain)[t.template]) >= 3
    expected = {"dblp": 15, "amazon": 16, "goodreads": 21, "biomedical": 27, "legal": 14}[domain]
    assert len(templates) == expected


def test_reader_rejects_bad_lines(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text('{"qid": "1", "question": "q?", "answer": "a"}\n{"qid": 2, "question": "x"}\n')
    with pytest.raises(QuestionFormatError, match=r"q.jsonl:2: missing field\(s\) answer"):
        read_questions(path)
    path.write_text('{"qid": "1", "question": "q?", "answer": "a"}\nnot json\n')
    with pytest.raises(QuestionFormatError, match="q.jsonl:2: not valid JSON"):
        read_questions(path)
    path.write_text('{"qid": "1", "question": "q?", "answer": "a", "level": "expert"}\n')
    with pytest.raises(QuestionFormatError, match="level 'expert'"):
        read_questions(path)
