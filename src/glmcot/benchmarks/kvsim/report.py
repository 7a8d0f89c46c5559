"""The sweep's table (every point, no chosen one), its medians against LRU, and its figures in the
style of the paper's Fig. 15: (b)(c) vertex-chunk reuse on throughput and hit rate, (d)(e) the
priority levels (and the alternatives) on throughput and misses."""

from __future__ import annotations

from pathlib import Path

from glmcot.benchmarks.kvsim.sweep import LABEL


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{100 * (value - 1):+.1f} %"


def print_report(result: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=200)
    console.print(f"[bold]kvsim[/] ({LABEL})")
    for note in result.get("notes", []):
        console.print(f"[yellow]{note}[/]")
    table = Table(title="every sweep point (misses = prompt tokens computed; vs LRU of the same cache)")
    for column in ("deployment", "load", "pool tok", "share", "arm", "misses", "vs LRU", "hit rate", "evicted p1/p2/p3/p4",
                   "q/s", "vs LRU", "p50 s", "p99 s", "preempt"):
        table.add_column(column, justify="right")
    for row in result["rows"]:
        evictions = row.get("evictions")
        evicted = "/".join(str(evictions.get(k, 0)) for k in ("p1", "p2", "p3", "p4")) if evictions else "-"
        table.add_row(row["deployment"], f"{row['load']:g}", f"{row['pool_tokens']:,}", f"{row['pool_share']:.3f}", row["arm"],
                      f"{row['misses']:,}", _ratio(row.get("misses_vs_lru")), f"{row['hit_rate']:.3f}", evicted,
                      f"{row['throughput_qps']:.2f}", _ratio(row.get("throughput_vs_lru")), f"{row['latency_p50_s']:.2f}",
                      f"{row['latency_p99_s']:.2f}", str(row["counters"].get("preemptions", 0)))
    console.print(table)
    for spec, arms in result["medians"].items():
        summary = Table(title=f"{spec}: median over the sweep, against the LRU of the same cache")
        for column in ("arm", "points", "misses", "throughput", "p99 latency", "hit rate (points)", "fewer/more misses at"):
            summary.add_column(column, justify="right")
        for arm, m in arms.items():
            summary.add_row(arm, str(m["points"]), _ratio(m["misses_vs_lru"]), _ratio(m["throughput_vs_lru"]),
                            _ratio(m["p99_vs_lru"]), f"{100 * m['hit_rate_minus_lru']:+.1f}",
                            f"{m['fewer_misses_points']}/{m['more_misses_points']}")
        console.print(summary)
    wins: dict[str, int] = {}
    for point in result["winners"]:
        wins[point["best"]] = wins.get(point["best"], 0) + 1
    if wins:
        console.print("fewest misses among the native arms, points won: " +
                      ", ".join(f"{arm} {count}" for arm, count in sorted(wins.items(), key=lambda kv: -kv[1])))


def plot(result: dict, folder: Path) -> list[Path]:
    """Per deployment: Fig. 15-style bars of the sweep medians, and misses vs pool per load."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for spec, arms in result["medians"].items():
        safe = spec.replace(":", "-")
        fig, axes = plt.subplots(1, 4, figsize=(16, 3.8))
        panels = [
            ("(b) vertex-chunk reuse: throughput", ("native-glm", "native-glm-chunks"), "throughput_vs_lru", "q/s vs LRU"),
            ("(c) vertex-chunk reuse: hit rate", ("native-glm", "native-glm-chunks"), "hit_rate_minus_lru", "hit rate - LRU (points)"),
            ("(d) eviction: throughput", None, "throughput_vs_lru", "q/s vs LRU"),
            ("(e) eviction: misses", None, "misses_vs_lru", "misses vs LRU"),
        ]
        for ax, (title, chosen, key, ylabel) in zip(axes, panels):
            names = [a for a in (chosen or arms) if a in arms and a not in ("vllm-observe",)]
            values = [arms[a][key] * (100 if key == "hit_rate_minus_lru" else 1) for a in names]
            if key != "hit_rate_minus_lru":
                values = [100 * (v - 1) for v in values]
                ylabel = ylabel.replace("vs LRU", "vs LRU, %")
            ax.bar(range(len(names)), values, color=["#999" if "lru" in n else "#2a7" if "glm" in n else "#57a" for n in names])
            ax.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=7)
            ax.axhline(0, color="black", linewidth=0.6)
            ax.set_title(title, fontsize=9)
            ax.set_ylabel(ylabel, fontsize=8)
        fig.suptitle(f"{spec}, median over the sweep; {LABEL}", fontsize=9)
        fig.tight_layout()
        path = folder / f"kvsim-fig15-{safe}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)

        rows = [r for r in result["rows"] if r["deployment"] == spec]
        loads = sorted({r["load"] for r in rows})
        fig, axes = plt.subplots(1, len(loads), figsize=(5 * len(loads), 3.8), squeeze=False)
        for ax, load in zip(axes[0], loads):
            for arm in dict.fromkeys(r["arm"] for r in rows):
                mine = sorted((r for r in rows if r["load"] == load and r["arm"] == arm and r.get("misses_vs_lru") is not None),
                              key=lambda r: r["pool_tokens"])
                if not mine or arm in ("vllm-observe",):
                    continue
                ax.plot([r["pool_tokens"] for r in mine], [100 * (r["misses_vs_lru"] - 1) for r in mine], marker="o",
                        label=arm, linestyle="--" if arm.startswith("vllm") else "-")
            ax.set_xscale("log")
            real = result.get("deployments", {}).get(spec, {}).get("kv_pool_tokens")
            if real:  # the pool this deployment really has
                ax.axvline(real, color="grey", linewidth=0.8, linestyle="-.")
            ax.axhline(0, color="black", linewidth=0.6)
            ax.axhline(-15.1, color="red", linewidth=0.6, linestyle=":")
            ax.set_title(f"{result['rows'][0]['arrivals']} load {load:g}", fontsize=9)
            ax.set_xlabel("KV pool (tokens)", fontsize=8)
            ax.set_ylabel("misses vs LRU, % (red: paper -15.1 %)", fontsize=8)
            ax.set_xlabel("KV pool (tokens; grey: this deployment's pool)", fontsize=8)
        axes[0][0].legend(fontsize=6)
        fig.suptitle(f"{spec}; {LABEL}", fontsize=9)
        fig.tight_layout()
        path = folder / f"kvsim-misses-{safe}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * (value - 1):+.1f} %"


def markdown(result: dict) -> str:
    """Per deployment: one row per sweep point (every point), misses and throughput of each arm
    against the LRU of its own cache, and the evictions per level of LRU and GLM; then the medians."""
    lines = [f"*{LABEL}.*", ""]
    arms = [a for a in dict.fromkeys(r["arm"] for r in result["rows"]) if a not in ("vllm-lru", "native-lru", "vllm-observe")]
    for spec, medians in result["medians"].items():
        rows = [r for r in result["rows"] if r["deployment"] == spec]
        points = list(dict.fromkeys((r["load"], r["pool_tokens"]) for r in rows))
        by = {(r["load"], r["pool_tokens"], r["arm"]): r for r in rows}
        lines += [f"**{spec}** (misses = prompt tokens computed; each arm against the LRU of its own cache: vLLM arms "
                  "against `vllm-lru`, native arms against `native-lru`)", ""]
        # what no eviction policy can beat: the misses when everything fits (cold misses)
        header = ["in flight", "KV pool (tokens, share of all)", "LRU misses (vLLM / native)", "LRU hit rate",
                  "bound: nothing evicted"]
        header += [f"{a} misses" for a in arms] + ["q/s vs LRU: " + ", ".join(arms), "evicted P1/P2/P3/P4: native-lru | native-glm"]
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for load, pool in points:
            lru_v, lru_n = by.get((load, pool, "vllm-lru")), by.get((load, pool, "native-lru"))
            base = lru_n or lru_v
            share = base["pool_share"] if base else 0
            cells = [f"{load:g}", f"{pool:,} ({share:.2f})",
                     f"{lru_v['misses']:,}" if lru_v else "-", ]
            cells[-1] += f" / {lru_n['misses']:,}" if lru_n else ""
            cells.append(f"{base['hit_rate']:.3f}" if base else "-")
            cells.append(_pct(base.get("bound_vs_lru")) if base else "-")
            cells += [_pct(by[(load, pool, a)].get("misses_vs_lru")) if (load, pool, a) in by else "-" for a in arms]
            cells.append(", ".join(_pct(by[(load, pool, a)].get("throughput_vs_lru")) if (load, pool, a) in by else "-"
                                   for a in arms))

            def levels(arm: str) -> str:
                row = by.get((load, pool, arm))
                ev = row and row.get("evictions")
                return "/".join(f"{ev.get(k, 0):,}" for k in ("p1", "p2", "p3", "p4")) if ev else "-"

            cells.append(f"{levels('native-lru')} \\| {levels('native-glm')}")
            lines.append("| " + " | ".join(cells) + " |")
        pressure = result.get("medians_under_pressure", {}).get(spec, {})
        lines += ["", f"Median against the LRU of the same cache, over all {len(points)} points of {spec}, and over the "
                  "points under pressure (LRU misses more than when nothing is evicted, so a policy can matter):", "",
                  "| arm | misses: all / under pressure | throughput: all / under pressure | p99 latency: all / under pressure "
                  "| hit rate, points: all / under pressure | points with fewer / more misses |",
                  "|---|---|---|---|---|---|"]
        for arm, m in medians.items():
            if arm in ("vllm-lru", "native-lru"):
                continue
            q = pressure.get(arm)

            def both(key: str, scale: bool = False) -> str:
                def one(source):
                    if source is None:
                        return "-"
                    return f"{100 * source[key]:+.1f}" if scale else _pct(source[key])
                return f"{one(m)} / {one(q)} ({q['points'] if q else 0} pts)" if key == "misses_vs_lru" else f"{one(m)} / {one(q)}"

            lines.append(f"| {arm} | {both('misses_vs_lru')} | {both('throughput_vs_lru')} | {both('p99_vs_lru')} | "
                         f"{both('hit_rate_minus_lru', True)} | {m['fewer_misses_points']} / {m['more_misses_points']} |")
        lines.append("")
    return "\n".join(lines)
