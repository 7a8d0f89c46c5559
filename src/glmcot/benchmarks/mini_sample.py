"""A small held-out sample scored with a checkpoint (GLM agents, greedy decoding), recorded beside
the shipped checkpoint so a test can check that the file still scores what it scored when shipped
(counts of exact matches and the answers themselves, never time).

    python -m glmcot.benchmarks.mini_sample CHECKPOINT   # writes CHECKPOINT/heldout_sample.json
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

SAMPLE_FILE = "heldout_sample.json"


@dataclass
class SampleScore:
    domain: str
    seed: int
    questions_per_template: int
    constrained: bool
    qids: list[str]
    answers: list[str]
    failures: list[str | None]
    exact: int  # answers equal to the gold answer (EM)


def score_sample(checkpoint: str | Path, work_dir: str | Path, *, domain: str = "dblp", seed: int = 1001,
                 per_template: int = 1, constrained: bool = False) -> SampleScore:
    """One question per template of the held-out graph (domain, seed), answered by the GLM agents
    (`constrained`: under their grammars, RetrieveNode held to spans of the question)."""
    from glmcot.agents import AgentContext
    from glmcot.agents.config import AgentConfig
    from glmcot.agents.grammar import GrammarBackend, GrammarSettings, GraphVocabulary
    from glmcot.agents.runner import run_questions
    from glmcot.eval.metrics import exact_match
    from glmcot.mini.backend import mini_backend
    from glmcot.mini.data import ensure_synth_graph

    # the same graph the training run held out (4 questions per template, every wording)
    graph = ensure_synth_graph(Path(work_dir) / f"{domain}-{seed}", domain, seed, 4, "all")
    records = [json.loads(line) for line in (graph / "questions.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    seen: dict[str, int] = {}
    chosen = []
    for record in records:
        if seen.get(record["template"], 0) < per_template:
            seen[record["template"]] = seen.get(record["template"], 0) + 1
            chosen.append(record)
    backend = mini_backend(str(checkpoint), num_threads=1)
    context = AgentContext(graph, retriever="lexical", workers=1, domain=domain)
    try:
        answering = (GrammarBackend(backend, GraphVocabulary.of(context.graph), GrammarSettings(question_spans=True))
                     if constrained else backend)
        config = AgentConfig(domain=domain, max_rounds=3, act_max_tokens=160, reason_max_tokens=160, classify_max_tokens=64)
        results = run_questions(chosen, method="glm", backend=answering, context=context, config=config, concurrency=1, traces=None)
    finally:
        context.close()
        backend.close()
    gold = {str(r["qid"]): str(r["answer"]) for r in chosen}
    return SampleScore(domain, seed, per_template, constrained, [r.qid for r in results], [r.answer for r in results],
                       [r.failure for r in results], sum(bool(exact_match(r.answer, gold[r.qid])) for r in results))


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise SystemExit("usage: python -m glmcot.benchmarks.mini_sample CHECKPOINT")
    folder = Path(args[0])
    with tempfile.TemporaryDirectory() as work:
        scores = [asdict(score_sample(folder, work, constrained=flag)) for flag in (False, True)]
    (folder / SAMPLE_FILE).write_text(json.dumps({"format": "glmcot-mini-sample/1", "scores": scores}, indent=1) + "\n",
                                      encoding="utf-8")
    print(json.dumps([{k: s[k] for k in ("domain", "constrained", "exact")} | {"n": len(s["qids"])} for s in scores]))


if __name__ == "__main__":
    main()
