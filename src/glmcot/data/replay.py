"""Replay gold plans through the graph primitives and compare with the gold answers.

With the real NodeRetriever this measures how often an ideal plan survives vector retrieval
(near-duplicate names make some RetrieveNode calls land on the wrong node); with `EntityOracle`
retrieval is exact, so a mismatch means the plan or the gold answer is wrong.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from glmcot.data.plans import PlanError, run_glm_plan, run_graphcot_plan
from glmcot.data.questions import QuestionRecord


class EntityOracle:
    """A retriever that maps each surface text of the current question to its gold node."""

    def __init__(self):
        self.mapping: dict[str, str] = {}

    def use(self, record: QuestionRecord) -> None:
        self.mapping = {str(record.params[slot]).strip(): node
                        for slot, node in record.entities.items() if slot in record.params}

    def retrieve(self, text: str) -> str:
        try:
            return self.mapping[text.strip()]
        except KeyError:
            raise LookupError(f"oracle has no node for {text!r}") from None


_RETRIEVE_ACTION = re.compile(r"^RetrieveNode\[(.*)\]$", re.S)


def retrieval_texts(records: Iterable[QuestionRecord]) -> list[str]:
    """Every text the plans pass to RetrieveNode, first-seen order."""
    texts: dict[str, None] = {}
    for record in records:
        if record.plan is None:
            continue
        for step in record.plan.glm:
            for node in ast.walk(ast.parse(step.code)):
                if (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "RetrieveNode"
                        and node.args and isinstance(node.args[0], ast.Constant)):
                    texts.setdefault(str(node.args[0].value).strip(), None)
        for action in record.plan.graphcot:
            match = _RETRIEVE_ACTION.match(action.action.strip())
            if match:
                texts.setdefault(match.group(1).strip(), None)
    return list(texts)


def prefetch(retriever, records: Iterable[QuestionRecord], batch: int = 256) -> int:
    """Fill the retriever's RetrieveNode cache with one batched search over the plans' texts
    (same top-1 answers as one search per call, much faster on CPU)."""
    texts = retrieval_texts(records)
    for begin in range(0, len(texts), batch):
        chunk = texts[begin:begin + batch]
        for text, hits in zip(chunk, retriever.search_batch(chunk, k=1)):
            if hits:
                retriever.cache.put(text, hits[0][0])
    return len(texts)


@dataclass
class TemplateReplay:
    total: int = 0
    glm_correct: int = 0
    graphcot_ran: int = 0

    @property
    def share(self) -> float:
        return self.glm_correct / self.total if self.total else 0.0


@dataclass
class ReplayReport:
    templates: dict[str, TemplateReplay] = field(default_factory=dict)
    failures: list[dict] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(t.total for t in self.templates.values())

    @property
    def correct(self) -> int:
        return sum(t.glm_correct for t in self.templates.values())

    def to_json(self) -> dict:
        return {"total": self.total, "glm_correct": self.correct,
                "templates": {k: {"total": v.total, "glm_correct": v.glm_correct,
                                  "graphcot_ran": v.graphcot_ran, "share": round(v.share, 4)}
                              for k, v in self.templates.items()},
                "failures": self.failures}


def replay(records: Iterable[QuestionRecord], tools, oracle: EntityOracle | None = None
           ) -> ReplayReport:
    """Run every record's GLM plan (last printed line vs gold answer) and Graph-CoT plan."""
    report = ReplayReport()
    for record in records:
        if record.plan is None:
            continue
        if oracle is not None:
            oracle.use(record)
        stats = report.templates.setdefault(record.template, TemplateReplay())
        stats.total += 1
        printed = ""
        try:
            outputs = run_glm_plan(tools, record.plan)
            printed = outputs[-1] if outputs else ""
        except PlanError as exc:
            report.failures.append({"qid": record.qid, "template": record.template,
                                    "stage": "glm", "error": str(exc)})
        else:
            if printed == record.answer:
                stats.glm_correct += 1
            else:
                report.failures.append({"qid": record.qid, "template": record.template,
                                        "stage": "glm", "expected": record.answer[:200],
                                        "printed": printed[:200]})
        try:
            run_graphcot_plan(tools, record.plan.graphcot, printed)
            stats.graphcot_ran += 1
        except Exception as exc:  # a wrong retrieval can send later actions to bad ids
            report.failures.append({"qid": record.qid, "template": record.template,
                                    "stage": "graphcot", "error": f"{type(exc).__name__}: {exc}"})
    return report
