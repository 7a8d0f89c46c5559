"""The demo's part where a model decides: glmcot-mini (trained on synthetic data) answers a few of
the demo's questions through the GLM agents with real greedy decoding on the native engine. The
demo graphs' seed is not a training seed, so these graphs were never trained on."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from glmcot.data.questions import QuestionRecord

LABEL = "glmcot-mini, trained on synthetic data"
AUTO = "auto"
OFF = "off"


@dataclass
class MiniAnswer:
    domain: str
    qid: str
    question: str
    answer: str
    gold: str
    exact: bool
    deterministic_said: bool | None
    first_snippet: str | None
    llm_calls: int
    failure: str | None
    latency_s: float


def choose_checkpoint(choice: str) -> tuple[Path | None, str]:
    """(folder or None, why none). `auto`: the built default folder, else the shipped checkpoint;
    `off`: none; else a checkpoint folder or `glmcot-mini`, which must exist (FileNotFoundError
    naming the build command)."""
    from glmcot.mini import MODEL_NAME
    from glmcot.mini.checkpoint import BUILD_COMMAND, resolve

    if choice == OFF:
        return None, "turned off (--mini off)"
    if choice == AUTO:
        try:
            return resolve(MODEL_NAME), ""
        except FileNotFoundError:
            return None, f"not built; `{BUILD_COMMAND}` builds it (then the demo shows it deciding)"
    return resolve(choice), ""


def run_mini(checkpoint: Path, datasets: dict[str, Path], selected: dict[str, list[QuestionRecord]],
             per_domain: int, threads: int = 2) -> list[MiniAnswer]:
    from glmcot.agents.trace import SnippetRun
    from glmcot.eval.metrics import exact_match
    from glmcot.llm import BackendSpec
    from glmcot.system import SystemConfig, build_system

    answers: list[MiniAnswer] = []
    config = SystemConfig(backend=BackendSpec.parse(f"native:{checkpoint}"), graphs=dict(datasets), retriever="lexical",
                          engine={"num_threads": threads})
    with build_system(config) as system:
        for domain, records in selected.items():
            agent = system.agent("glm", domain)
            for record in records[:per_domain]:
                result = agent.answer(record.question, qid=record.qid)
                snippet = next((event.code for event in result.trace if isinstance(event, SnippetRun)), None)
                answers.append(MiniAnswer(domain, str(record.qid), record.question, result.answer, str(record.answer),
                                          bool(exact_match(result.answer, str(record.answer))), result.deterministic,
                                          snippet, result.llm_calls, result.failure, round(result.latency_s, 2)))
    return answers


def mini_rich(answers: list[MiniAnswer], title: str) -> Any:
    from rich.table import Table

    table = Table(title=title)
    for column, justify in (("domain", "left"), ("question", "left"), ("glmcot-mini's answer", "left"), ("gold", "left"),
                            ("= gold", "center"), ("C label", "left"), ("calls", "right"), ("failure", "left")):
        table.add_column(column, justify=justify, overflow="fold")
    for a in answers:
        label = "-" if a.deterministic_said is None else ("deterministic" if a.deterministic_said else "non-deterministic")
        table.add_row(a.domain, a.question, a.answer or "(none)", a.gold, "yes" if a.exact else "no", label, str(a.llm_calls),
                      a.failure or "")
    return table


def mini_markdown(answers: list[MiniAnswer]) -> str:
    def cell(text: str | None) -> str:
        return (text or "").replace("|", "\\|").replace("\n", " ")[:160]

    lines = ["| domain | question | glmcot-mini's answer | gold | = gold | calls | failure |", "|---|---|---|---|---|---|---|"]
    for a in answers:
        lines.append(f"| {a.domain} | {cell(a.question)} | {cell(a.answer) or '(none)'} | {cell(a.gold)} | "
                     f"{'yes' if a.exact else 'no'} | {a.llm_calls} | {a.failure or ''} |")
    exact = sum(a.exact for a in answers)
    lines += ["", f"{exact} of {len(answers)} answers equal the gold answer."]
    return "\n".join(lines)


def as_json(answers: list[MiniAnswer]) -> list[dict[str, Any]]:
    return [asdict(a) for a in answers]


MINI_METHOD = "GLM, glmcot-mini (real decoding)"


def table1_with_mini(rows: list[dict[str, Any]], answers: list[MiniAnswer]) -> list[dict[str, Any]]:
    """Table 1's rows with, after each domain's scripted rows, one row of glmcot-mini deciding on
    the same questions (calls, latency and exact matches; the scripted columns it has no figure
    for stay empty)."""
    by_domain: dict[str, list[MiniAnswer]] = {}
    for answer in answers:
        by_domain.setdefault(answer.domain, []).append(answer)
    out: list[dict[str, Any]] = []
    for position, row in enumerate(rows):
        out.append(row)
        domain = row.get("domain")
        last = position + 1 == len(rows) or rows[position + 1].get("domain") != domain
        if last and domain in by_domain:
            mine = by_domain.pop(domain)
            latencies = sorted(a.latency_s for a in mine)
            out.append({"method": MINI_METHOD, "domain": domain, "questions": len(mine),
                        "em_count": sum(a.exact for a in mine),
                        "llm_calls_per_question": sum(a.llm_calls for a in mine) / len(mine),
                        "latency_p50_s": latencies[len(latencies) // 2]})
    return out
