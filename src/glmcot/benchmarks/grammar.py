"""Constrained decoding's cost in the native engine: the same prompts decoded greedily with and
without each agent's grammar, in alternating rounds of one run, on one engine. Reports time per
generated token both ways, the mask's own time per masked token, and grammar compile times
(first compile per grammar text; later requests hit the engine's cache).

    python -m glmcot.benchmarks.grammar --model glmcot-mini --graph runs/mini/glmcot-mini.work/graphs/dblp-1001
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from glmcot.files import write_json_atomic
from glmcot.offline import stay_offline


def prompts_for(graph_dir: Path, count: int) -> list[tuple[str, str, str]]:
    """(agent, compact prompt, question) triples from the graph's questions."""
    records = [json.loads(line) for line in (graph_dir / "questions.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    out = []
    for record in records[:count]:
        question = record["question"]
        out.append(("classify", f"<<glmcot-mini classify>>\nQuestion: {question}\n", question))
        out.append(("act", f"<<glmcot-mini act>>\nNeeded: {question}\n", question))
    return out


def main(argv: list[str] | None = None) -> None:
    stay_offline()
    parser = argparse.ArgumentParser(prog="python -m glmcot.benchmarks.grammar", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="glmcot-mini", help="glmcot-mini or a checkpoint folder (Hugging Face tokenizer).")
    parser.add_argument("--graph", type=Path, required=True, help="A synthetic dataset folder (graph/ and questions.jsonl).")
    parser.add_argument("--questions", type=int, default=8, help="Questions (each gives a classify and an act prompt).")
    parser.add_argument("--rounds", type=int, default=3, help="Alternating rounds (free, then constrained, per round).")
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("runs/bench/grammar.json"))
    args = parser.parse_args(argv)

    from glmcot.agents.grammar import CLASSIFY_EBNF, GraphVocabulary, act_grammar, question_spans
    from glmcot.engine import LLM, SamplingParams
    from glmcot.graph.storage.store import Graph
    from glmcot.llm.types import Grammar
    from glmcot.mini.checkpoint import resolve

    folder = resolve(args.model)
    vocabulary = GraphVocabulary.of(Graph.open(args.graph / "graph"))
    llm = LLM(model=str(folder), num_threads=args.threads)
    items = prompts_for(args.graph, args.questions)

    def grammar_of(agent: str, question: str, spans: bool) -> Grammar:
        if agent == "classify":
            return Grammar(CLASSIFY_EBNF, "classify")
        return act_grammar(vocabulary, spans=question_spans(question) if spans else None)

    variants = {"free": None, "grammar": False, "grammar+spans": True}
    totals = {name: {"tokens": 0, "seconds": 0.0} for name in variants}
    compile_first = {}
    for _ in range(args.rounds):
        for name, spans in variants.items():
            before = dict(llm.engine.stats())
            started = time.perf_counter()
            for agent, prompt, question in items:
                grammar = None if spans is None else grammar_of(agent, question, spans)
                out = llm.generate([prompt], SamplingParams(max_tokens=args.max_tokens, grammar=grammar))[0]
                totals[name]["tokens"] += len(out.token_ids)
            totals[name]["seconds"] += time.perf_counter() - started
            after = dict(llm.engine.stats())
            compiled = (after.get("grammars_compiled") or 0) - (before.get("grammars_compiled") or 0)
            if compiled:
                compile_first[name] = {"grammars": compiled,
                                       "seconds": (after.get("grammar_compile_s") or 0) - (before.get("grammar_compile_s") or 0)}
            totals[name]["mask_s"] = totals[name].get("mask_s", 0.0) + ((after.get("grammar_mask_s") or 0) - (before.get("grammar_mask_s") or 0))
            totals[name]["masked"] = totals[name].get("masked", 0) + ((after.get("grammar_masked_steps") or 0) - (before.get("grammar_masked_steps") or 0))
    # the first round's compile time is not decoding: take it out of the per-token figure
    rows = {}
    for name, total in totals.items():
        compile_s = compile_first.get(name, {}).get("seconds", 0.0)
        tokens = max(1, total["tokens"])
        rows[name] = {"tokens": total["tokens"], "ms_per_token": 1000 * (total["seconds"] - compile_s) / tokens,
                      "mask_ms_per_token": 1000 * total.get("mask_s", 0.0) / max(1, total.get("masked", 0)) if total.get("masked") else 0.0,
                      "grammars_compiled": compile_first.get(name, {}).get("grammars", 0), "compile_s": compile_s}
    free = rows["free"]["ms_per_token"]
    table = Table(title=f"Constrained decoding cost, native engine, {folder.name} ({args.rounds} alternating rounds, same run)")
    for column in ("decoding", "tokens", "ms/token (compile excluded)", "vs free", "mask ms/token", "grammars compiled", "compile s"):
        table.add_column(column, justify="right")
    for name, row in rows.items():
        table.add_row(name, str(row["tokens"]), f"{row['ms_per_token']:.2f}", f"{row['ms_per_token'] / free:.2f}x" if free else "-",
                      f"{row['mask_ms_per_token']:.3f}", str(row["grammars_compiled"]), f"{row['compile_s']:.2f}")
    Console(width=150).print(table)
    report = {"model": str(folder), "graph": str(args.graph), "rounds": args.rounds, "questions": args.questions, "rows": rows}
    write_json_atomic(args.out, report, indent=1)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
