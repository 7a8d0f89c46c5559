"""Question records (`questions.jsonl`, format `glmcot.questions/1`) and their reading/writing."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from glmcot.files import write_rows_atomic

QUESTIONS_FORMAT = "glmcot.questions/1"
LEVELS = ("easy", "medium", "hard")


class QuestionFormatError(ValueError):
    pass


@dataclass
class GLMStep:
    missing: str          # the R-Agent's missing-information sentence
    code: str             # the A-Agent's snippet: self-contained, prints what it found


@dataclass
class GraphCoTAction:
    thought: str
    action: str           # RetrieveNode[..] | NodeFeature[..] | NeighbourCheck[..] | NodeDegree[..] | Finish[..]


@dataclass
class Plan:
    glm: list[GLMStep] = field(default_factory=list)
    graphcot: list[GraphCoTAction] = field(default_factory=list)


@dataclass
class QuestionRecord:
    """One question: ours (synthetic, with template, gold plan and entities) or a GRBench row,
    which carries only qid, question and answer."""

    qid: str
    question: str
    answer: str
    domain: str = ""
    template: str = ""
    params: dict = field(default_factory=dict)
    level: str = ""
    deterministic: bool = False
    plan: Plan | None = None
    entities: dict = field(default_factory=dict)   # slot -> node id the question is about

    def to_json(self) -> dict:
        data = asdict(self)
        # the file's field order since glmcot.questions/1, so generated files keep their bytes
        out = {key: data[key] for key in ("qid", "domain", "template", "params", "level", "question", "answer",
                                          "deterministic", "plan", "entities")}
        if self.plan is None:
            out.pop("plan")
        if not self.entities:
            out.pop("entities")
        return out

    @classmethod
    def from_json(cls, raw: dict, where: str = "", domain: str = "") -> QuestionRecord:
        """`domain`: the domain of a row that names none (a GRBench file's)."""
        missing = [k for k in ("qid", "question", "answer") if k not in raw]
        if missing:
            raise QuestionFormatError(f"{where}: missing field(s) {', '.join(missing)}")
        plan = None
        if raw.get("plan") is not None:
            try:
                plan = Plan([GLMStep(s["missing"], s["code"]) for s in raw["plan"].get("glm", [])],
                            [GraphCoTAction(a["thought"], a["action"])
                             for a in raw["plan"].get("graphcot", [])])
            except (KeyError, TypeError, AttributeError) as exc:
                raise QuestionFormatError(f"{where}: malformed plan ({exc})") from None
        level = raw.get("level") or ""
        if level and level not in LEVELS:
            raise QuestionFormatError(f"{where}: level {level!r} is not one of {', '.join(LEVELS)}")
        answer = raw["answer"]
        if isinstance(answer, list):  # some GRBench rows list their answers
            answer = ", ".join(str(item) for item in answer)
        return cls(qid=str(raw["qid"]), domain=str(raw.get("domain") or domain),
                   template=str(raw.get("template", "")), params=dict(raw.get("params") or {}),
                   level=level, question=str(raw["question"]), answer=str(answer),
                   deterministic=bool(raw.get("deterministic", False)), plan=plan,
                   entities=dict(raw.get("entities") or {}))


def write_questions(path: str | os.PathLike, records: Iterable[QuestionRecord]) -> int:
    """Write records as JSON Lines atomically (temp file, then rename). Returns the count."""
    rows = [record.to_json() for record in records]
    write_rows_atomic(path, rows)
    return len(rows)


def read_questions(path: str | os.PathLike, limit: int | None = None, domain: str | None = None) -> list[QuestionRecord]:
    """Read a questions file: ours (`glmcot.questions/1`) or GRBench's {qid, question, answer}
    rows, whose domain is then `domain` or the file's name (dblp.jsonl -> dblp). A missing or empty
    file, a bad line or a repeated qid is a QuestionFormatError naming the file and line."""
    path = Path(path)
    if not path.is_file():
        raise QuestionFormatError(f"question file not found: {path}")
    default_domain = domain or (path.stem if path.stem not in ("questions", "data") else "")
    records: list[QuestionRecord] = []
    seen: set[str] = set()
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                raise QuestionFormatError(f"{where}: not valid JSON ({exc.msg})") from None
            if not isinstance(raw, dict):
                raise QuestionFormatError(f"{where}: expected a JSON object per line")
            record = QuestionRecord.from_json(raw, where, default_domain)
            if record.qid in seen:
                raise QuestionFormatError(f"{where}: duplicate qid {record.qid!r}")
            seen.add(record.qid)
            records.append(record)
            if limit is not None and len(records) >= limit:
                break
    if not records:
        raise QuestionFormatError(f"{path}: no questions in the file")
    return records
