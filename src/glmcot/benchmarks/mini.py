"""glmcot-mini benchmark: the trained checkpoint drives the GLM agents with REAL DECODING on the
native engine (no scripted policy in the answering loop).

1. Held-out synthetic graphs (seeds never trained on): EM and ROUGE-L per domain and template,
   against the scripted ceiling on the same questions (the gold plans: what a perfect model
   gets with this retriever); C-Agent false positives (said deterministic, template is not) and
   false negatives; code errors and how many fault tolerance repaired; failure categories
   (Table 5); tokens, calls and latency per question. Scores are split by phrasing: questions in
   a wording the model read in training, and in each template's held-out wording (never trained
   on). The same model then drives Graph-CoT's single-agent loop on the same questions (it is
   trained on that loop's calls too), beside that loop's own scripted ceiling.
2. The real GRBench question texts (data/grbench/*.jsonl, written by others): there is no graph
   for them, so only behaviour is checked: the C-Agent's label against the template's
   determinism, and whether the first snippet has the gold plan's shape (the same primitives and
   relations as the template's gold code on a synthetic graph) with RetrieveNode arguments copied
   from the question.

What these numbers mean: in-distribution skill on GRBench's templates, not general reasoning.

    python -m glmcot.benchmarks.mini --model glmcot-mini --questions 2 --grbench-per-template 1
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import Counter, defaultdict
from pathlib import Path

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from glmcot.offline import stay_offline
from glmcot.files import write_json_atomic  # noqa: E402

DOMAINS = ("dblp", "amazon", "goodreads", "biomedical", "legal")
PRIMITIVES = ("RetrieveNode", "NeighbourCheck", "NodeFeature", "NodeDegree")
LABEL = "glmcot-mini (trained on synthetic data), real decoding"


def plan_shape(code: str | None) -> tuple[tuple[str, ...], frozenset[str]]:
    """The primitives called, in order, and the relation/feature names passed to them."""
    if not code:
        return (), frozenset()
    calls = tuple(match.group(1) for match in re.finditer(r"\b(" + "|".join(PRIMITIVES) + r")\(", code))
    names = frozenset(re.findall(r'(?:NeighbourCheck|NodeFeature|NodeDegree)\([^,()]+,\s*"([^"]+)"', code))
    return calls, names


def retrieve_arguments(code: str | None) -> list[str]:
    return re.findall(r'RetrieveNode\("([^"]*)"\)', code or "")


def _events(result) -> list[dict]:
    """The trace as dicts (typed events or their JSON form)."""
    return [event if isinstance(event, dict) else event.to_dict() for event in result.trace]


def _first_exec(result) -> dict | None:
    return next((event for event in _events(result) if event.get("type") == "exec"), None)


def code_errors(result) -> tuple[int, int]:
    """(failed snippets, of those the ones a later attempt at the same step fixed)."""
    execs = [event for event in _events(result) if event.get("type") == "exec"]
    failed = repaired = 0
    for position, event in enumerate(execs):
        ok = (event.get("result") or {}).get("ok") and (event.get("result") or {}).get("output", "").strip()
        if not ok:
            failed += 1
            later = [e for e in execs[position + 1:] if e.get("step") == event.get("step")]
            if any((e.get("result") or {}).get("ok") and (e.get("result") or {}).get("output", "").strip() for e in later):
                repaired += 1
    return failed, repaired


def pick(records: list[dict], count: int) -> list[dict]:
    """`count` questions per template, in file order."""
    seen: Counter = Counter()
    chosen = []
    for record in records:
        if seen[record["template"]] < count:
            seen[record["template"]] += 1
            chosen.append(record)
    return chosen


def ensure_graph(domain: str, seed: int, root: Path, per_template: int) -> Path:
    from glmcot.mini.data import ensure_synth_graph

    return ensure_synth_graph(root / f"{domain}-{seed}", domain, seed, per_template)


def _scores(pairs: list[tuple[str, str]]) -> dict:
    from glmcot.eval.metrics import exact_match, rouge_l

    n = len(pairs)
    return {"n": n, "em": sum(exact_match(a, g) for a, g in pairs) / max(1, n),
            "rouge_l": sum(rouge_l(a, g) for a, g in pairs) / max(1, n)}


def phrasing(record: dict, domain: str) -> str:
    """'held-out' when the question uses its template's held-out wording (never in training)."""
    from glmcot.data.templates.base import is_held_out_wording

    return "held-out" if is_held_out_wording(domain, record["template"], record.get("params") or {}, record["question"]) else "seen"


def held_out(args, console: Console, backend_for, method: str = "glm") -> dict:
    """The model in one agent loop (glm: classify / reason / act; graphcot: Graph-CoT's single
    agent) on held-out graphs, beside the scripted ceiling of the same loop."""
    from glmcot.agents import AgentConfig, AgentContext, ScriptedBackend, run_questions
    from glmcot.data.questions import QuestionRecord
    from glmcot.eval.runner import result_rows, summarize

    report = {}
    for domain in args.domains:
        data = ensure_graph(domain, args.seed, args.data_dir, max(4, args.questions))
        records = pick([json.loads(l) for l in (data / "questions.jsonl").read_text(encoding="utf-8").splitlines() if l.strip()],
                       args.questions)
        records = records[: args.limit] if args.limit else records
        by_qid = {r["qid"]: r for r in records}
        config = AgentConfig(domain=domain, max_rounds=args.max_rounds, act_max_tokens=args.max_tokens,
                             reason_max_tokens=args.max_tokens, classify_max_tokens=64,
                             graphcot_max_steps=args.graphcot_max_steps, graphcot_max_tokens=args.max_tokens)
        with AgentContext(data, retriever="lexical", workers=1, domain=domain) as context:
            started = time.perf_counter()
            results = run_questions(records, method=method, backend=backend_for(context), context=context, config=config,
                                    concurrency=args.concurrency, traces=None)
            wall = time.perf_counter() - started
            ceiling = []
            if args.ceiling:
                scripted = ScriptedBackend(records, code_runner=context.run_code)
                ceiling = run_questions(records, method=method, backend=scripted, context=context, config=AgentConfig(domain=domain),
                                        concurrency=1, traces=None)
        row = summarize(result_rows(method, [QuestionRecord.from_json(by_qid[r.qid], domain=domain) for r in results], results))
        row["wall_s"] = wall
        golds = [by_qid[r.qid]["answer"] for r in results]
        row.update({k: v for k, v in _scores([(r.answer, g) for r, g in zip(results, golds)]).items() if k != "n"})
        if ceiling:
            scored = _scores([(r.answer, by_qid[r.qid]["answer"]) for r in ceiling])
            row["ceiling_em"], row["ceiling_rouge_l"] = scored["em"], scored["rouge_l"]
        if method == "glm":
            truth = [bool(by_qid[r.qid]["deterministic"]) and len(by_qid[r.qid]["plan"]["glm"]) == 1 for r in results]
            said = [bool(r.deterministic) for r in results]
            row["c_agent"] = {"accuracy": sum(s == t for s, t in zip(said, truth)) / len(results),
                              "false_positive": sum(s and not t for s, t in zip(said, truth)),
                              "false_negative": sum(t and not s for s, t in zip(said, truth))}
            errors = [code_errors(r) for r in results]
            row["code_errors"] = sum(e[0] for e in errors)
            row["code_errors_repaired"] = sum(e[1] for e in errors)
        groups: dict[str, dict[str, list]] = {"template": defaultdict(list), "phrasing": defaultdict(list)}
        for r, gold in zip(results, golds):
            groups["template"][by_qid[r.qid]["template"]].append((r.answer, gold))
            groups["phrasing"][phrasing(by_qid[r.qid], domain)].append((r.answer, gold))
        row["failure_categories"] = dict(Counter(r.failure for r in results if r.failure))
        row["by_template"] = {t: _scores(pairs) for t, pairs in sorted(groups["template"].items())}
        row["by_phrasing"] = {p: _scores(pairs) for p, pairs in sorted(groups["phrasing"].items())}
        # why the model's calls failed at the backend (e.g. a prompt past its context), a few distinct reasons
        row["backend_error_reasons"] = sorted({(r.failure_detail or "")[:240] for r in results if r.failure == "backend_error"})[:5]
        row["examples"] = [{"qid": r.qid, "question": r.question, "answer": r.answer[:200], "gold": by_qid[r.qid]["answer"][:200],
                            "failure": r.failure} for r in results[:3]]
        report[domain] = row
        console.print(f"[dim]{method} {domain}: {len(results)} held-out questions in {wall:.0f} s[/dim]")
    return report


def grbench(args, console: Console, backend_for) -> dict:
    """Real GRBench wordings through C and the first A call (max_rounds=1, no retries)."""
    from glmcot.agents import AgentConfig, AgentContext, run_questions
    from glmcot.data.grbench import load_grbench

    report = {}
    for domain in args.domains:
        path = args.grbench / f"{domain}.jsonl"
        if not path.is_file():
            console.print(f"[yellow]no {path}; skipping GRBench {domain}[/yellow]")
            continue
        data = ensure_graph(domain, args.seed, args.data_dir, max(4, args.questions))
        gold_shapes = {}
        for line in (data / "questions.jsonl").read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            gold_shapes.setdefault(record["template"], plan_shape(record["plan"]["glm"][0]["code"]))
        records = [r.to_json() for r in load_grbench(path)]
        records = pick([r for r in records if r["template"] in gold_shapes], args.grbench_per_template)
        records = records[: args.limit] if args.limit else records
        config = AgentConfig(domain=domain, max_rounds=1, max_code_retries=0, act_max_tokens=args.max_tokens,
                             reason_max_tokens=args.max_tokens, classify_max_tokens=64)
        with AgentContext(data, retriever="lexical", workers=1, domain=domain) as context:
            results = run_questions(records, method="glm", backend=backend_for(context), context=context, config=config,
                                    concurrency=args.concurrency, traces=None)
        by_qid = {r["qid"]: r for r in records}
        cells = defaultdict(lambda: Counter())
        for result in results:
            record = by_qid[result.qid]
            cell = cells[record["template"]]
            cell["n"] += 1
            cell["label_ok"] += bool(result.deterministic) == bool(record["deterministic"])
            first = _first_exec(result)
            code = first.get("code") if first else None
            calls, names = plan_shape(code)
            gold_calls, gold_names = gold_shapes[record["template"]]
            cell["shape_ok"] += bool(code) and calls == gold_calls and names == gold_names
            arguments = retrieve_arguments(code)
            question = record["question"].lower()
            cell["retrieve_from_question"] += bool(arguments) and all(a.strip().lower() in question for a in arguments if a.strip())
            cell["snippet"] += bool(code)
        report[domain] = {t: dict(c) for t, c in sorted(cells.items())}
        console.print(f"[dim]GRBench {domain}: {len(results)} real questions[/dim]")
    return report


def held_out_table(rows: dict, part: str, seed: int) -> Table:
    glm = part == "held_out"
    loop = "GLM agents" if glm else "Graph-CoT's single-agent loop"
    table = Table(title=f"glmcot-mini in {loop} on held-out seed {seed}: {LABEL}")
    columns = ["domain", "n", "EM", "ROUGE-L", "ceiling EM", "EM seen wording", "EM held-out wording"]
    columns += ["C acc", "C FP", "C FN", "code err", "repaired"] if glm else ["failures"]
    for column in columns + ["tok/q", "calls/q", "latency s"]:
        table.add_column(column, justify="right")
    for domain, row in rows.items():
        phrasings = row.get("by_phrasing", {})
        cells = [domain, str(row["questions"]), f"{row['em']:.2f}", f"{row['rouge_l']:.2f}", f"{row.get('ceiling_em', float('nan')):.2f}"]
        cells += [f"{phrasings[p]['em']:.2f} ({phrasings[p]['n']})" if p in phrasings else "-" for p in ("seen", "held-out")]
        if glm:
            cells += [f"{row['c_agent']['accuracy']:.2f}", str(row["c_agent"]["false_positive"]), str(row["c_agent"]["false_negative"]),
                      str(row["code_errors"]), str(row["code_errors_repaired"])]
        else:
            cells.append(", ".join(f"{k} {v}" for k, v in sorted((row.get("failures") or {}).items()) if v) or "-")
        cells += [f"{row['tokens_per_question']:.0f}", f"{row['llm_calls_per_question']:.1f}", f"{row['latency_mean_s']:.1f}"]
        table.add_row(*cells)
    return table


VARIANTS = ("free", "grammar", "spans")
TABLE5 = ("unexpected_output", "retrieval_error", "code_error", "step_limit")


def variant_backend(backend, variant: str):
    """A function of the agent context giving the backend for one decoding variant."""
    from glmcot.agents.grammar import GrammarBackend, GrammarSettings, GraphVocabulary

    if variant == "free":
        return lambda context: backend
    settings = GrammarSettings(question_spans=variant == "spans")
    return lambda context: GrammarBackend(backend, GraphVocabulary.of(context.graph), settings)


def engine_counters(backend) -> dict:
    """The native engine's counters behind the (compact) backend."""
    inner = backend
    while inner is not None and getattr(inner, "engine", None) is None:
        inner = getattr(inner, "inner", None)
    engine = getattr(inner, "engine", None)
    try:
        return dict(engine.stats()) if engine is not None else {}
    except Exception:  # counters are informative only
        return {}


def decode_cost(before: dict, after: dict) -> dict:
    """Decode time per generated token and grammar mask time per masked token, over one variant."""
    delta = {key: (after.get(key) or 0) - (before.get(key) or 0) for key in
             ("generated_tokens", "busy_time_s", "grammar_mask_s", "grammar_masked_steps", "grammar_compile_s", "grammars_compiled")}
    tokens = delta["generated_tokens"]
    masked = delta["grammar_masked_steps"]
    return {**delta,
            "step_ms_per_token": 1000 * delta["busy_time_s"] / tokens if tokens else None,
            "mask_ms_per_token": 1000 * delta["grammar_mask_s"] / masked if masked else 0.0}


def variants_table(variants: dict, seed: int) -> Table:
    table = Table(title=f"glmcot-mini, GLM agents, held-out seed {seed}: constrained against unconstrained decoding")
    for column in ("decoding", "n", "EM", "EM seen", "EM held-out wording", *TABLE5, "other failures", "tok/q",
                   "step ms/token", "mask ms/token", "grammars compiled (s)"):
        table.add_column(column, justify="right")
    for name, part in variants.items():
        rows = part.get("held_out") or {}
        n = sum(row["questions"] for row in rows.values())
        if not n:
            continue
        em = sum(row["em"] * row["questions"] for row in rows.values()) / n
        phr = defaultdict(lambda: [0.0, 0])
        failures: Counter = Counter()
        tokens = 0.0
        for row in rows.values():
            for key, scored in (row.get("by_phrasing") or {}).items():
                phr[key][0] += scored["em"] * scored["n"]
                phr[key][1] += scored["n"]
            failures.update(row.get("failure_categories") or {})
            tokens += row["tokens_per_question"] * row["questions"]
        cost = part.get("decode_cost") or {}
        step = cost.get("step_ms_per_token")
        table.add_row(name, str(n), f"{em:.2f}",
                      *(f"{phr[k][0] / phr[k][1]:.2f} ({phr[k][1]})" if phr[k][1] else "-" for k in ("seen", "held-out")),
                      *(str(failures.get(k, 0)) for k in TABLE5),
                      str(sum(v for k, v in failures.items() if k not in TABLE5)), f"{tokens / n:.0f}",
                      f"{step:.2f}" if step else "-", f"{cost.get('mask_ms_per_token', 0.0):.3f}",
                      f"{cost.get('grammars_compiled', 0)} ({cost.get('grammar_compile_s', 0.0):.1f})")
    return table


def main(argv: list[str] | None = None) -> None:
    stay_offline()
    parser = argparse.ArgumentParser(prog="python -m glmcot.benchmarks.mini", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="glmcot-mini", help="glmcot-mini (the default folder) or a checkpoint path.")
    parser.add_argument("--domains", default=",".join(DOMAINS), help="Comma-separated domains.")
    parser.add_argument("--seed", type=int, default=1001, help="Held-out graph seed (must not be a training seed).")
    parser.add_argument("--questions", type=int, default=1, help="Held-out questions per template.")
    parser.add_argument("--limit", type=int, default=0, help="At most this many questions per domain and part (0: no cap).")
    parser.add_argument("--grbench", type=Path, default=Path("data/grbench"), help="Folder of GRBench *.jsonl question files.")
    parser.add_argument("--grbench-per-template", type=int, default=1, help="Real GRBench questions per template (0: skip).")
    parser.add_argument("--data-dir", type=Path, default=Path("runs/mini/heldout"), help="Where held-out graphs are synthesised.")
    parser.add_argument("--methods", default="glm,graphcot",
                        help="Agent loops the model drives on held-out graphs: glm and/or graphcot (Graph-CoT's single agent).")
    parser.add_argument("--max-rounds", type=int, default=3, help="R/A rounds per question.")
    parser.add_argument("--graphcot-max-steps", type=int, default=10, help="Graph-CoT steps per question (the original's 10).")
    parser.add_argument("--max-tokens", type=int, default=160, help="Token cap per R/A reply.")
    parser.add_argument("--concurrency", type=int, default=2, help="Questions in flight.")
    parser.add_argument("--threads", type=int, default=2, help="Engine CPU threads.")
    parser.add_argument("--device", default="cpu", help="Where the native engine runs the model: cpu or cuda[:N].")
    parser.add_argument("--no-ceiling", dest="ceiling", action="store_false", help="Skip the scripted ceiling.")
    parser.add_argument("--decoding", default="free",
                        help="Comma-separated decoding variants, each run on the same questions: free (unconstrained), "
                             "grammar (every agent under its grammar), spans (grammar, and RetrieveNode's text a span of the question).")
    parser.add_argument("--out", type=Path, default=Path("runs/mini/benchmark.json"), help="JSON report.")
    args = parser.parse_args(argv)
    args.domains = [d.strip() for d in args.domains.split(",") if d.strip()]
    args.methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    args.decoding = [d.strip() for d in args.decoding.split(",") if d.strip()]
    if not args.decoding or set(args.decoding) - set(VARIANTS):
        parser.error(f"--decoding takes {', '.join(VARIANTS)}")
    unknown = sorted(set(args.methods) - {"glm", "graphcot"})
    if unknown or not args.methods:
        parser.error(f"--methods takes glm and/or graphcot, not {', '.join(unknown) or 'nothing'}")
    console = Console(width=160)
    from glmcot.mini.backend import mini_backend
    from glmcot.mini.checkpoint import resolve

    try:
        folder = resolve(args.model)
    except FileNotFoundError as error:
        raise SystemExit(str(error)) from None
    training = json.loads((folder / "training.json").read_text(encoding="utf-8")) if (folder / "training.json").is_file() else {}
    backend = mini_backend(str(folder), num_threads=args.threads, device=args.device)
    try:
        report = {"label": LABEL, "model": str(folder), "training": {k: training.get(k) for k in
                  ("command", "parameters", "steps", "tokens_seen", "train_wall_s", "final_eval_loss", "code_version")},
                  "seed": args.seed, "meaning": "in-distribution skill on GRBench's templates, not general reasoning",
                  "variants": {}}
        for variant in args.decoding:
            backend_for = variant_backend(backend, variant)
            before = engine_counters(backend)
            part: dict = {}
            if "glm" in args.methods:
                part["held_out"] = held_out(args, console, backend_for)
            if "graphcot" in args.methods:
                part["graphcot"] = held_out(args, console, backend_for, method="graphcot")
            if args.grbench_per_template:
                part["grbench"] = grbench(args, console, backend_for)
            part["decode_cost"] = decode_cost(before, engine_counters(backend))
            report["variants"][variant] = part
            if variant == args.decoding[0]:
                report.update({k: v for k, v in part.items() if k != "decode_cost"})
    finally:
        backend.close()
    if len(args.decoding) > 1 or args.decoding != ["free"]:
        console.print(variants_table(report["variants"], args.seed))
    for method in ("held_out", "graphcot"):
        if report.get(method):
            console.print(held_out_table(report[method], method, args.seed))
    if report.get("grbench"):
        grb = Table(title="Real GRBench wordings: C label vs template determinism; first snippet's plan shape")
        for column in ("domain", "n", "label ok", "snippet", "shape ok", "RetrieveNode from question"):
            grb.add_column(column, justify="right")
        for domain, cells in report["grbench"].items():
            total = Counter()
            for cell in cells.values():
                total.update(cell)
            grb.add_row(domain, str(total["n"]), str(total["label_ok"]), str(total["snippet"]), str(total["shape_ok"]),
                        str(total["retrieve_from_question"]))
        console.print(grb)
    console.print("These are in-distribution skills on GRBench's templates (synthetic graphs), not general reasoning.")
    write_json_atomic(args.out, report, indent=1)
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
