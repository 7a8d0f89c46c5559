"""Reading question files: glmcot's questions.jsonl (glmcot.questions/1) or GRBench's data.json rows."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class QuestionFileError(ValueError):
    """The question file is missing or malformed; the message names the file and line."""


@dataclass
class Question:
    qid: str
    question: str
    answer: str
    domain: str | None = None
    level: str | None = None
    record: dict[str, Any] = field(default_factory=dict, repr=False)  # the full row (plans etc.)


def load_questions(path: Path, limit: int | None = None, domain: str | None = None) -> list[Question]:
    """Reads a JSON Lines question file. GRBench rows carry only qid/question/answer; the domain is
    then taken from ``domain`` or the file name (dblp.jsonl -> dblp)."""
    path = Path(path)
    if not path.is_file():
        raise QuestionFileError(f"question file not found: {path}")
    default_domain = domain or (path.stem if path.stem not in ("questions", "data") else None)
    questions: list[Question] = []
    seen: set[str] = set()
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise QuestionFileError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise QuestionFileError(f"{path}:{number}: expected a JSON object")
            missing = [k for k in ("qid", "question", "answer") if k not in row]
            if missing:
                raise QuestionFileError(f"{path}:{number}: missing field(s) {', '.join(missing)}")
            qid = str(row["qid"])
            if qid in seen:
                raise QuestionFileError(f"{path}:{number}: duplicate qid {qid!r}")
            seen.add(qid)
            answer = row["answer"]
            if isinstance(answer, list):
                answer = ", ".join(str(a) for a in answer)
            questions.append(Question(qid=qid, question=str(row["question"]), answer=str(answer),
                                      domain=row.get("domain") or default_domain,
                                      level=row.get("level"), record=row))
            if limit is not None and len(questions) >= limit:
                break
    if not questions:
        raise QuestionFileError(f"{path}: no questions in the file")
    return questions
