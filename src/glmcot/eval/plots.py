"""PNG plots (matplotlib, Agg): the latency split of Figure 11 and the ablation bars of Figure 15."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any, Sequence

METHOD_LABELS = {"graphcot": "Graph-CoT (faithful)", "graphcot-repaired": "Graph-CoT (repaired)", "glm": "GLM", "base": "Base", "text-rag": "Text RAG",
                 "graph-rag": "Graph RAG"}
DOMAIN_LABELS = {"dblp": "Academic\n(dblp)", "amazon": "E-commerce\n(amazon)",
                 "goodreads": "Literature\n(goodreads)", "biomedical": "Healthcare\n(biomedical)",
                 "legal": "Legal\n(legal)"}
_LLM_COLOURS = {"graphcot": "#c0504d", "graphcot-repaired": "#8c564b", "glm": "#1f77b4"}
_RETRIEVAL_COLOURS = {"graphcot": "#f2b8b6", "graphcot-repaired": "#d9b8b0", "glm": "#9ecae1"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 11, "axes.titlesize": 13, "axes.labelsize": 12})
    return plt


def plot_latency_split(rows: Sequence[dict[str, Any]], path: Path, subtitle: str = "") -> Path:
    """Per domain, one bar per method: mean LLM time, retrieval time and the rest of the end-to-end
    latency per question (s). A diamond marks the end-to-end latency; when retrieval is pipelined
    with decoding, LLM + retrieval can exceed it."""
    plt = _pyplot()
    domains = list(dict.fromkeys(r["domain"] for r in rows))
    methods = [m for m in ("graphcot", "graphcot-repaired", "glm") if any(r["method"] == m for r in rows)]
    methods += [m for m in dict.fromkeys(r["method"] for r in rows) if m not in methods]
    by_key = {(r["domain"], r["method"]): r for r in rows}
    fig, ax = plt.subplots(figsize=(10, 6.2), dpi=110)
    width = 0.8 / max(1, len(methods))
    for i, method in enumerate(methods):
        xs, llm, retrieval, other, total = [], [], [], [], []
        for d, domain in enumerate(domains):
            row = by_key.get((domain, method))
            if row is None:
                continue
            xs.append(d - 0.4 + width * (i + 0.5))
            llm.append(row.get("llm_time_mean_s") or 0.0)
            retrieval.append(row.get("retrieval_time_mean_s") or 0.0)
            total.append(row.get("latency_mean_s") or 0.0)
            other.append(max(0.0, total[-1] - llm[-1] - retrieval[-1]))
        label = METHOD_LABELS.get(method, method)
        ax.bar(xs, llm, width * 0.95, color=_LLM_COLOURS.get(method), label=f"{label}: LLM inference",
               edgecolor="black", linewidth=0.5)
        ax.bar(xs, retrieval, width * 0.95, bottom=llm, color=_RETRIEVAL_COLOURS.get(method),
               hatch="//", label=f"{label}: retrieval", edgecolor="black", linewidth=0.5)
        ax.bar(xs, other, width * 0.95, bottom=[a + b for a, b in zip(llm, retrieval)], color="#d9d9d9",
               edgecolor="black", linewidth=0.5, label="other (agent, sandbox, queueing)" if i == 0 else None)
        ax.scatter(xs, total, marker="D", s=28, color="black", zorder=3,
                   label="end-to-end latency (mean)" if i == 0 else None)
        for x, t in zip(xs, total):
            ax.annotate(f"{t:.2f}", (x, t), textcoords="offset points", xytext=(0, 5),
                        ha="center", fontsize=9)
    ax.set_xticks(range(len(domains)))
    ax.set_xticklabels([DOMAIN_LABELS.get(d, d) for d in domains])
    ax.set_ylabel("Mean time per question (s)")
    ax.set_xlabel("Domain")
    title = "Latency split per question: LLM inference vs retrieval (cf. paper Fig. 11)"
    ax.set_title(title + (f"\n{subtitle}" if subtitle else ""))
    ax.grid(axis="y", alpha=0.3)
    ax.set_ylim(0, max([r.get("latency_mean_s") or 0 for r in rows] +
                       [(r.get("llm_time_mean_s") or 0) + (r.get("retrieval_time_mean_s") or 0) for r in rows]
                       + [1e-3]) * 1.12)
    # Below the axes, so it never hides a bar or a label.
    ax.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, frameon=False)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_ablation(rows: Sequence[dict[str, Any]], path: Path, subtitle: str = "") -> Path:
    """One horizontal bar per configuration in four panels: throughput, p50 latency, cache hit rate,
    tokens per question (cf. paper Fig. 15)."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    labels = [r["label"] for r in rows]
    panels = [
        ("throughput_qps", "Throughput (questions/s)", 1.0, "{:.2f}"),
        ("latency_p50_s", "Latency p50 (s)", 1.0, "{:.2f}"),
        ("cache_hit_rate", "KV cache hit rate (%)", 100.0, "{:.1f}"),
        ("tokens_per_question", "Tokens per question", 1.0, "{:.0f}"),
    ]
    colours = ["#c0504d" if r.get("method") == "graphcot" else ("#1f77b4" if r.get("full") else "#9ecae1")
               for r in rows]
    fig, axes = plt.subplots(2, 2, figsize=(12, 2.2 + 0.55 * len(rows) * 2), dpi=110, sharey=True)
    ys = list(range(len(rows)))[::-1]
    for ax, (key, title, scale, fmt) in zip(axes.flat, panels):
        values = [(r.get(key) or 0.0) * scale for r in rows]
        ax.barh(ys, values, color=colours, edgecolor="black", linewidth=0.5)
        spreads = [(r.get("throughput_by_repeat") or []) if key == "throughput_qps" else [] for r in rows]
        # the axis reaches the fastest repeat too, so no spread line is cut
        top = max(values + [s * scale for spread in spreads for s in spread if s is not None] + [1e-9])
        for y, v, row in zip(ys, values, rows):
            text = "not in this engine" if row.get("unavailable") else fmt.format(v)
            feature = row.get("feature")
            if feature and not feature.get("exercised"):
                text += "  (not exercised)"
            spread = [s * scale for s in (row.get("throughput_by_repeat") or []) if s is not None]
            if key == "throughput_qps" and len(spread) > 1:
                ax.plot([min(spread), max(spread)], [y, y], color="black", linewidth=1.5)  # spread over repeats
            ax.text(v + top * 0.01, y, text, va="center", fontsize=9)
        ax.set_xlim(0, top * 1.18)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5))  # tick labels never collide
        ax.set_title(title)
        ax.set_xlabel(title)
        ax.grid(axis="x", alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_yticks(ys)
        ax.set_yticklabels(labels)
    # the setup line (policy, workload, domains, questions, repeats) wrapped to the figure's width
    fig.suptitle("Ablation: each co-design feature off in turn (cf. paper Fig. 15)"
                 + ("\n" + "\n".join(textwrap.wrap(subtitle, 120)) if subtitle else ""))
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
