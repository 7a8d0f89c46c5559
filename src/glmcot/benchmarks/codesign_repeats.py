"""Every same-run repeat of a co-design effect, pooled over several codesign.py results.

A codesign.py run with `--repeats N` writes each effect once per repeat (`ours_wall_per_repeat`,
result format version 4; older results are paired again from their `all_runs`): the arms of one
repeat stepped in lock-step, so the machine's load fell on both sides of each figure. This script
reads any number of such results, groups them by setting (sessions in flight, KV pool, workload),
and prints per setting the runs, the repeats, their median, range and how many beat the paper's
figure. It writes a JSON summary and a PNG (one dot per repeat, the median, the paper's line).

    python -m glmcot.benchmarks.codesign_repeats runs/a.json runs/b.json runs/c.json
    python -m glmcot.benchmarks.codesign_repeats runs/*.json --effect priority_miss_pct
"""

from __future__ import annotations

from glmcot.offline import stay_offline

import argparse
import json
import statistics
import sys
from pathlib import Path

from glmcot.benchmarks.codesign.report import paired_effects
from glmcot.benchmarks.common import run_header, save_figure, signed

# Settings that make two results comparable: the same workload, pool and concurrency.
from glmcot.files import write_json_atomic

# Settings that make two results comparable: the same workload, pool and concurrency.
SETTING_KEYS = ("model", "dtype", "device", "concurrency", "kv_tokens", "sessions", "prompt_words", "neighbours",
                "vertices", "zipf", "seed", "traces")
LABEL = "forced decoding, scripted text: measures the system, never model accuracy"
# A lower figure is the better one for these effects (fewer misses).
LOWER_IS_BETTER = ("priority_miss_pct", "priority_paper_miss_pct")


class ResultError(ValueError):
    """A file that is not a usable codesign.py result."""


def load_result(path: Path) -> dict:
    try:
        result = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ResultError(f"{path}: not a readable JSON file ({exc})") from exc
    if not isinstance(result, dict) or result.get("benchmark") != "codesign" or "settings" not in result:
        raise ResultError(f"{path}: not a codesign.py result")
    return result


def per_repeat(result: dict, path: Path) -> dict[str, list[float]]:
    """Each effect per repeat: as written (format version 4), else paired from every arm's runs."""
    if "ours_wall_per_repeat" in result:
        return result["ours_wall_per_repeat"]
    runs, key = result.get("all_runs"), result.get("ours_wall", {}).get("throughput_key")
    if not runs or not key:
        raise ResultError(f"{path}: the result has no per-repeat runs (it needs codesign.py's all_runs)")
    return paired_effects(runs, key)


def setting_of(result: dict) -> tuple:
    return tuple((key, json.dumps(result["settings"].get(key))) for key in SETTING_KEYS)


def label_of(result: dict) -> str:
    settings = result["settings"]
    concurrency, pool = settings.get("concurrency"), settings.get("kv_tokens")
    if not isinstance(concurrency, int) or not isinstance(pool, int):
        return json.dumps(settings, sort_keys=True)
    return f"{concurrency} in flight, {pool:,}-token pool"


def summarise(paths: list[Path], effect: str) -> list[dict]:
    """One row per setting, in the order the settings first appear."""
    groups: dict[tuple, dict] = {}
    for path in paths:
        result = load_result(path)
        effects = per_repeat(result, path)
        values = effects.get(effect)
        if values is None:
            known = ", ".join(sorted(effects))
            raise ResultError(f"{path}: no per-repeat figures for {effect!r} (it has: {known})")
        # The paper's levels as written (`priority_paper_*`) answer to the same paper figure.
        paper = result.get("paper", {}).get(effect.replace("_paper", ""))
        group = groups.setdefault(setting_of(result), {"setting": label_of(result), "settings": result["settings"],
                                                       "paper": paper, "runs": [], "repeats": []})
        group["runs"].append({"file": str(path), "date": result.get("date"), "command": result.get("command"),
                              "per_repeat": values})
        group["repeats"].extend(v for v in values if v is not None)
    rows = []
    for group in groups.values():
        values, paper = group["repeats"], group["paper"]
        better = (lambda v: v < paper) if effect in LOWER_IS_BETTER else (lambda v: v > paper)
        rows.append({**group, "median": statistics.median(values) if values else None,
                     "min": min(values, default=None), "max": max(values, default=None),
                     "beat_paper": None if paper is None else sum(map(better, values))})
    return rows


def plot(rows: list[dict], effect: str, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(max(5.0, 1.9 * len(rows) + 1.5), 4.2))
    for i, row in enumerate(rows):
        axes.scatter([i] * len(row["repeats"]), row["repeats"], color="tab:blue", alpha=0.7, zorder=3,
                     label="one repeat (same run)" if i == 0 else None)
        if row["median"] is not None:
            axes.hlines(row["median"], i - 0.25, i + 0.25, color="tab:blue", lw=2.5, zorder=2,
                        label="median of repeats" if i == 0 else None)
    papers = {row["paper"] for row in rows if row["paper"] is not None}
    for value in papers:
        axes.axhline(value, color="tab:orange", ls="--", label=f"paper: {value:+.1f}")
    axes.set_xticks(range(len(rows)), [row["setting"].replace(", ", "\n") for row in rows])
    axes.set_ylabel(effect)
    axes.set_title(f"{effect} per same-run repeat ({LABEL})", fontsize=8)
    axes.grid(axis="y", alpha=0.3)
    axes.legend(fontsize=8)
    return save_figure(figure, path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    stay_offline()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", type=Path, help="codesign.py result files")
    parser.add_argument("--effect", default="priority_throughput_pct",
                        help="which per-repeat effect to pool (a key of ours_wall_per_repeat)")
    parser.add_argument("--out", default="runs/bench-codesign/repeats.json", help="JSON summary; the PNG goes beside it")
    args = parser.parse_args(argv)
    try:
        rows = summarise(args.results, args.effect)
    except ResultError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{args.effect}, every same-run repeat ({LABEL})")
    for column in ("setting", "runs", "repeats", "median", "range", "paper", "beat the paper"):
        table.add_column(column, justify="left" if column == "setting" else "right")
    for row in rows:
        count = len(row["repeats"])
        table.add_row(row["setting"], str(len(row["runs"])), str(count), signed(row["median"]),
                      f"{signed(row['min'])} .. {signed(row['max'])}", signed(row["paper"]),
                      "n/a" if row["beat_paper"] is None else f"{row['beat_paper']} of {count}")
    console = Console()
    console.print(table)
    out = Path(args.out)
    image = plot(rows, args.effect, out.with_suffix(".png"))
    summary = {"benchmark": "codesign_repeats", "version": 1, **run_header(argv), "effect": args.effect,
               "label": LABEL, "settings": rows, "plot": str(image)}
    write_json_atomic(out, summary)
    console.print(f"wrote {out} and {image}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
