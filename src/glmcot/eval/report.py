"""Reports: the Table-1 view (rich, for the terminal), report.md and results.json."""

from __future__ import annotations

from typing import Any, Sequence

from glmcot.eval.plots import METHOD_LABELS

SCRIPTED_NOTICE = ("Answers come from the SCRIPTED POLICY (gold plans force-decoded through a "
                   "random-weight model): these figures measure the system (tokens, calls, cache, "
                   "latency, throughput), NOT model accuracy.")

# Paper Table 1 (Qwen3-235B-A22B on GRBench): Graph-CoT vs GLM, cost $, ROUGE-L, latency s.
PAPER_TABLE1 = {
    "dblp": {"graphcot": (1.9, 0.31, 27.2), "glm": (0.1, 0.55, 3.0)},
    "amazon": {"graphcot": (1.9, 0.39, 17.8), "glm": (0.1, 0.77, 3.1)},
    "goodreads": {"graphcot": (1.7, 0.42, 11.3), "glm": (0.1, 0.65, 2.8)},
    "biomedical": {"graphcot": (3.6, 0.33, 38.6), "glm": (0.2, 0.62, 3.4)},
    "legal": {"graphcot": (2.8, 0.46, 22.8), "glm": (0.2, 0.63, 5.9)},
}
# Paper Table 4: ROUGE-L / GPTScore per method and domain.
PAPER_TABLE4 = {
    "base": {"dblp": (0.09, 0.15), "amazon": (0.14, 0.20), "goodreads": (0.11, 0.23), "biomedical": (0.06, 0.20), "legal": (0.16, 0.26)},
    "text-rag": {"dblp": (0.09, 0.14), "amazon": (0.25, 0.31), "goodreads": (0.15, 0.28), "biomedical": (0.04, 0.20), "legal": (0.21, 0.26)},
    "graph-rag": {"dblp": (0.28, 0.33), "amazon": (0.34, 0.37), "goodreads": (0.21, 0.32), "biomedical": (0.11, 0.16), "legal": (0.21, 0.24)},
    "graphcot": {"dblp": (0.31, 0.40), "amazon": (0.39, 0.44), "goodreads": (0.42, 0.53), "biomedical": (0.33, 0.46), "legal": (0.46, 0.53)},
    "glm": {"dblp": (0.55, 0.55), "amazon": (0.77, 0.79), "goodreads": (0.65, 0.68), "biomedical": (0.62, 0.70), "legal": (0.63, 0.64)},
}
# Paper Table 5: failure categories (counts) for Graph-CoT, Graph-CoT + code-gen, GLM.
PAPER_TABLE5 = {"unexpected_output": (42, 49, 2), "retrieval_error": (20, 20, 18),
                "code_error": (2, 20, 20), "step_limit": (38, 8, 2)}
PAPER_HEADLINE = ("Paper (Qwen3-235B-A22B, 8xA800): tokens/question 22,613-45,490 -> 1,538-2,974; "
                  "LLM calls 9-14 -> 2-3; latency 11.3-38.6 s -> 2.8-5.9 s; throughput 0.6-2.2 -> "
                  "6.8-9.1 QPS (3.2-15.1x)")


def _fmt(value: Any, spec: str = "{:.2f}", none: str = "-") -> str:
    if value is None:
        return none
    return spec.format(value)


def table1_cells(row: dict[str, Any]) -> list[str]:
    return [
        _fmt(row.get("tokens_per_question"), "{:,.0f}"),
        _fmt(row.get("llm_calls_per_question"), "{:.1f}"),
        _fmt(row.get("latency_p50_s"), "{:.2f}"),
        _fmt(row.get("latency_p99_s"), "{:.2f}"),
        _fmt(row.get("throughput_qps"), "{:.2f}"),
        _fmt(row.get("cache_hit_rate") * 100 if row.get("cache_hit_rate") is not None else None, "{:.1f}%"),
        f"{row.get('em_count', 0)}/{row.get('questions', 0)}",
    ]


TABLE1_HEADERS = ["tokens/q", "calls/q", "p50 s", "p99 s", "q/s", "KV hit", "= gold"]


def latency_split_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """Figure 11's numbers: mean end-to-end, LLM and retrieval time per question."""
    body = []
    for r in rows:
        latency = r.get("latency_mean_s") or 0.0
        retrieval = r.get("retrieval_time_mean_s") or 0.0
        share = f"{retrieval / latency * 100:.1f} %" if latency else "-"
        body.append([r.get("domain", "all"), METHOD_LABELS.get(r["method"], r["method"]), f"{latency:.2f}",
                     f"{(r.get('llm_time_mean_s') or 0.0):.2f}", f"{retrieval * 1000:.1f}", share])
    return markdown_table(["domain", "method", "latency s (mean)", "LLM s", "retrieval ms", "retrieval share"], body)


def table1_rich(rows: Sequence[dict[str, Any]], title: str = "Table 1 view"):
    """Rows are per (domain, method) summaries; consecutive rows of a domain share its label."""
    from rich import box
    from rich.table import Table

    table = Table(title=title, title_justify="left", header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("domain", no_wrap=True)
    table.add_column("method", no_wrap=True)
    for header in ("tok/q", "calls", "p50 s", "p99 s", "q/s", "KV hit", "=gold"):  # fits 80 columns
        table.add_column(header, justify="right", no_wrap=True)
    previous = None
    for row in rows:
        domain = row.get("domain", "all")
        if previous is not None and domain != previous:
            table.add_section()
        table.add_row(domain if domain != previous else "", METHOD_LABELS.get(row["method"], row["method"]),
                      *table1_cells(row))
        previous = domain
    return table


BASELINES = ("graphcot", "graphcot-repaired")  # faithful first


def ratios(rows: Sequence[dict[str, Any]], slow: str | None = None, fast: str = "glm") -> list[dict[str, Any]]:
    """Per domain and Graph-CoT baseline in the run (faithful and repaired, each labelled in
    ``baseline``): how GLM compares to it. ``slow`` picks one baseline."""
    by_key = {(r.get("domain"), r["method"]): r for r in rows}
    out = []
    for baseline in (slow,) if slow else BASELINES:
        out += _ratios(by_key, rows, baseline, fast)
    return out


def _ratios(by_key: dict, rows: Sequence[dict[str, Any]], slow: str, fast: str) -> list[dict[str, Any]]:
    out = []
    for domain in dict.fromkeys(r.get("domain") for r in rows):
        a, b = by_key.get((domain, slow)), by_key.get((domain, fast))
        if not a or not b:
            continue
        div = lambda x, y: (x / y) if x and y else None  # noqa: E731
        out.append({
            "domain": domain,
            "baseline": slow,
            "token_reduction": 1 - b["tokens_per_question"] / a["tokens_per_question"] if a.get("tokens_per_question") else None,
            "calls_ratio": div(a.get("llm_calls_per_question"), b.get("llm_calls_per_question")),
            "latency_p50_reduction": 1 - b["latency_p50_s"] / a["latency_p50_s"] if a.get("latency_p50_s") else None,
            "throughput_speedup": div(b.get("throughput_qps"), a.get("throughput_qps")),
        })
    return out


def markdown_table(headers: Sequence[str], body: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in body]
    return "\n".join(lines)


def table1_markdown(rows: Sequence[dict[str, Any]]) -> str:
    body = [[r.get("domain", "all"), METHOD_LABELS.get(r["method"], r["method"]), *table1_cells(r)] for r in rows]
    return markdown_table(["domain", "method", *TABLE1_HEADERS], body)


def ratios_markdown(items: Sequence[dict[str, Any]]) -> str:
    pct = lambda v: "-" if v is None else f"{-v * 100:+.1f} %"  # noqa: E731 - a reduction shows as minus
    times = lambda v: "-" if v is None else f"{v:.2f}x"  # noqa: E731
    label = lambda i: METHOD_LABELS.get(i.get("baseline", "graphcot"), i.get("baseline"))  # noqa: E731
    body = [[i["domain"], label(i), pct(i["token_reduction"]), times(i["calls_ratio"]),
             pct(i["latency_p50_reduction"]), times(i["throughput_speedup"])] for i in items]
    return markdown_table(["domain", "GC baseline", "tokens/q, GLM vs GC", "calls ratio (GC/GLM)",
                           "p50 latency, GLM vs GC", "throughput GLM/GC"], body)


def paper_table1_markdown() -> str:
    body = [[d, *v["graphcot"], *v["glm"]] for d, v in PAPER_TABLE1.items()]
    return markdown_table(["domain", "GC cost $", "GC R-L", "GC latency s", "GLM cost $", "GLM R-L",
                           "GLM latency s"], body)


def evidence_text(row: dict[str, Any]) -> str:
    """What proves the row's switched-off feature acted: its counter in the full GLM run and in this
    variant, or "not exercised" where the full run never used it (the row's difference is noise)."""
    if row.get("full"):
        counters = row.get("counters") or {}
        levels = "/".join(str(counters.get(f"evictions_p{level}", 0)) for level in range(1, 5))
        return (f"evictions P1-P4 {levels}, chunk hits {counters.get('chunk_hits_tokens', 0):,} tok, "
                f"prefetch hits {counters.get('prefetch_hits', 0)} in flight + {counters.get('prefetch_ready', 0)} done, "
                f"RetrieveNode cache hits {counters.get('cache_hits', 0)}")
    feature = row.get("feature")
    if not feature:
        return "-"
    if not feature["exercised"]:
        return f"not exercised ({feature['counter']} 0 in the full run)"
    return f"{feature['counter']}: {feature['full']:,} full, {feature['variant']:,} here"


def spread_text(row: dict[str, Any]) -> str:
    values = [v for v in row.get("throughput_by_repeat") or [] if v is not None]
    if len(values) < 2:
        return "-"
    return f"{min(values):.2f}-{max(values):.2f}"


def ablation_markdown(rows: Sequence[dict[str, Any]]) -> str:
    body = [[r["label"], _fmt(r.get("throughput_qps")), spread_text(r), _fmt(r.get("latency_p50_s")),
             _fmt(r.get("latency_p99_s")),
             _fmt(r.get("cache_hit_rate") * 100 if r.get("cache_hit_rate") is not None else None, "{:.1f}%"),
             _fmt(r.get("tokens_per_question"), "{:,.0f}"), _fmt(r.get("throughput_vs_full"), "{:.2f}x"),
             r.get("throughput_effect", "-"), evidence_text(r)]
            for r in rows]
    return markdown_table(["configuration", "q/s", "q/s per repeat", "p50 s", "p99 s", "cache hit", "tokens/q",
                           "q/s vs full GLM", "throughput effect", "did the feature act?"], body)


def ablation_rich(rows: Sequence[dict[str, Any]], title: str = "Ablation"):
    from rich import box
    from rich.table import Table

    table = Table(title=title, title_justify="left", header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False)
    for header in ("configuration", "q/s", "per repeat", "p50 s", "p99 s", "KV hit", "tokens/q", "vs GLM",
                   "q/s effect", "did the feature act?"):
        wrapped = header in ("configuration", "did the feature act?", "q/s effect")
        table.add_column(header, justify="left" if wrapped else "right", no_wrap=not wrapped)
    for r in rows:
        table.add_row(r["label"], _fmt(r.get("throughput_qps")), spread_text(r), _fmt(r.get("latency_p50_s")),
                      _fmt(r.get("latency_p99_s")),
                      _fmt(r.get("cache_hit_rate") * 100 if r.get("cache_hit_rate") is not None else None, "{:.1f}%"),
                      _fmt(r.get("tokens_per_question"), "{:,.0f}"), _fmt(r.get("throughput_vs_full"), "{:.2f}x"),
                      r.get("throughput_effect", "-"), evidence_text(r))
    return table


def summary_rich(summaries: dict[str, dict[str, Any]], title: str = "Evaluation"):
    """`glmcot eval`'s tables, one row per method: accuracy and failures, then cost (two tables so
    each fits an 80-column terminal)."""
    from rich import box
    from rich.console import Group
    from rich.table import Table

    accuracy = Table(title=f"{title}: accuracy", title_justify="left", header_style="bold",
                     box=box.SIMPLE_HEAD, pad_edge=False)
    # ROUGE-L as the mean and as Graph-CoT aggregates it (bootstrap median); EM normalised and exact
    for header in ("method", "n", "ROUGE-L mean", "R-L boot. median", "EM norm.", "EM exact", "judge", "failures (Table 5)"):
        accuracy.add_column(header, justify="left" if header in ("method", "judge", "failures (Table 5)") else "right")
    cost = Table(title=f"{title}: cost", title_justify="left", header_style="bold", box=box.SIMPLE_HEAD,
                 pad_edge=False)
    for header in ("method", "tok/q", "calls", "p50 s", "p99 s", "KV hit", "cost $"):
        cost.add_column(header, justify="left" if header == "method" else "right", no_wrap=True)
    for method, s in summaries.items():
        label = METHOD_LABELS.get(method, method)
        failures = ", ".join(f"{k} {v}" for k, v in (s.get("failures") or {}).items() if v) or "none"
        judge = _fmt(s.get("judge_score"), "{:.3f}")
        if s.get("judge_unparsed"):
            judge += f" ({s['judge_unparsed']} not Yes/No)"
        accuracy.add_row(label, str(s.get("questions", 0)), _fmt(s.get("rouge_l"), "{:.3f}"),
                         _fmt(s.get("rouge_l_bootstrap_median"), "{:.3f}"), _fmt(s.get("em"), "{:.3f}"),
                         _fmt(s.get("em_exact"), "{:.3f}"), judge, failures)
        cost.add_row(label, _fmt(s.get("tokens_per_question"), "{:,.0f}"), _fmt(s.get("llm_calls_per_question"), "{:.1f}"),
                     _fmt(s.get("latency_p50_s")), _fmt(s.get("latency_p99_s")),
                     _fmt(s.get("cache_hit_rate") * 100 if s.get("cache_hit_rate") is not None else None, "{:.1f}%"),
                     _fmt(s.get("cost_usd"), "{:.4f}"))
    return Group(accuracy, cost)
