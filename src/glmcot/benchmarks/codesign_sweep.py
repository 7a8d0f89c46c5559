"""Where each co-design effect matters: the codesign arms over a range of KV pool sizes.

Which blocks are cached, hit and evicted depends only on the token sequences and the schedule,
not on the weights: the completions are forced, and the engine schedules by token counts. It
does depend on the tokenizer. The default, `random:qwen3:tiny-qwen-vocab` (the tiny shape with
the Qwen BPE), counts real Qwen tokens at little more than the tiny model's cost, so its pool
sizes carry over to a Qwen-sized codesign.py run. `random:qwen3:tiny` uses a small trained BPE
that makes about 1.75x as many tokens of the same text, so its pools correspond to pools about
1.75x larger in Qwen tokens. It reports cache behaviour only: hit rate (prefix,
chunk), prefill tokens computed, evictions per level, and the paper's two cache effects (vertex
reuse: hit-rate points against fact notebooks, split into its two parts; priority eviction:
change in misses) at each pool size. Throughput needs
the real model's compute: glmcot.benchmarks.codesign at a chosen pool size measures it.

    python -m glmcot.benchmarks.codesign_sweep                                # synthetic workload
    python -m glmcot.benchmarks.codesign_sweep --record-traces 30 --sessions 60   # recorded GLM sessions
    python -m glmcot.benchmarks.codesign_sweep --traces runs/bench-codesign/traces --kv-tokens 16384 32768

Writes a JSON file and a PNG (hit rate and P1/P2 evictions against pool size, one line per arm).
"""

from __future__ import annotations

from glmcot.offline import stay_offline

import argparse
import textwrap
from pathlib import Path

from glmcot.benchmarks.codesign.arms import ARMS, run_arm
from glmcot.benchmarks.codesign.report import compare
from glmcot.benchmarks.codesign.workload import add_workload_arguments, load_workload
from glmcot.benchmarks.common import run_header, save_figure, signed
from glmcot.files import write_json_atomic

DEFAULT_ARMS = ("lru+facts", "lru", "lru+chunks", "glm-paper+chunks", "glm+chunks")
# What a sweep row keeps of an arm's result: its cache behaviour, not its timings.
FIELDS = ("arm", "kv_pool_tokens", "sessions", "sessions_too_long", "calls", "prompt_tokens_queried", "hit_rate",
          "prefix_hit_rate", "chunk_hit_rate", "prefill_tokens_computed", "evictions", "preemptions",
          "chunk_tokens_captured", "chunk_admission_skips")
# The cache effects a sweep row reports: the paper's vertex-centric one, its two parts, priority eviction.
EFFECTS = ("vertex_centric_hit_points", "unit_hit_points", "vertex_hit_points", "priority_miss_pct",
           "priority_paper_miss_pct")
LABEL = "cache behaviour only (forced decoding): hit rates and evictions, not throughput"


def plot(rows: list[dict], arms: list[str], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (hits, evictions) = plt.subplots(1, 2, figsize=(12, 4.5))
    for arm in arms:
        points = [r for r in rows if r["arm"] == arm]
        pool = [r["kv_pool_tokens"] for r in points]
        hits.plot(pool, [100 * r["hit_rate"] for r in points], marker="o", label=arm)
        evictions.plot(pool, [r["evictions"]["P1"] + r["evictions"]["P2"] for r in points], marker="o", label=arm)
    hits.set(xlabel="KV pool (tokens)", ylabel="prompt tokens hit (%)", title="Hit rate (prefix + chunk)")
    evictions.set(xlabel="KV pool (tokens)", ylabel="blocks", title="P1 + P2 blocks evicted")
    for axes in (hits, evictions):
        axes.grid(alpha=0.3)
        axes.legend()
    figure.suptitle(textwrap.fill(title, 110), fontsize=11)  # a long title is wrapped, not clipped
    return save_figure(figure, path)


def main(argv: list[str] | None = None) -> int:
    stay_offline()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kv-tokens", type=int, nargs="+", default=[4096, 6144, 8192, 12288, 16384, 24576, 32768],
                        help="KV pool sizes (tokens) to sweep")
    parser.add_argument("--arms", nargs="+", default=list(DEFAULT_ARMS), choices=list(ARMS))
    parser.add_argument("--model", default="random:qwen3:tiny-qwen-vocab",
                        help="model whose tokenizer sets the token counts (the weights do not change cache behaviour)")
    add_workload_arguments(parser)
    parser.add_argument("--chunk-admission", type=int, default=2)
    parser.add_argument("--out", default="runs/bench-codesign/sweep.json")
    args = parser.parse_args(argv)

    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    console = Console()
    out = Path(args.out)
    sessions, prompts = load_workload(args, out, console)
    engine_args = argparse.Namespace(model=args.model, dtype="float32", device="cpu", threads=None,
                                     concurrency=args.concurrency, block_size=16, batch_tokens=2048, pic_k=16,
                                     chunk_admission=args.chunk_admission, kv_tokens=None)
    rows: list[dict] = []
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("sweep", total=len(args.kv_tokens) * len(args.arms))
        for kv in args.kv_tokens:
            engine_args.kv_tokens = kv
            for arm in args.arms:
                result = run_arm(arm, engine_args, sessions, prompts)
                rows.append({k: result[k] for k in FIELDS})
                progress.advance(task)
    effects = []
    for kv in args.kv_tokens:
        at = {r["arm"]: r for r in rows if r["kv_pool_tokens"] == kv}
        effect = compare(at, None)
        effects.append({"kv_pool_tokens": kv, **{key: effect.get(key) for key in EFFECTS}})
    table = Table(title=f"Co-design arms against KV pool size ({len(sessions)} sessions; {LABEL})")
    for column in ("pool", "arm", "hit", "prefix", "chunk", "prefill tok", "evict P1/P2/P3/P4", "preempt"):
        table.add_column(column, justify="right")
    for r in rows:
        ev = r["evictions"]
        table.add_row(f"{r['kv_pool_tokens']:,}", r["arm"], f"{r['hit_rate']:.1%}", f"{r['prefix_hit_rate']:.1%}",
                      f"{r['chunk_hit_rate']:.1%}", f"{r['prefill_tokens_computed']:,}",
                      f"{ev['P1']}/{ev['P2']}/{ev['P3']}/{ev['P4']}", str(r["preemptions"]))
    console.print(table)
    bars = Table(title="The paper's cache effects at each pool size (paper: vertex-centric +17.7 points, "
                       "priority eviction -15.1 % misses)")
    for column in ("pool", "vertex-centric: hit points", "of which chunk unit", "of which chunk reuse",
                   "priority eviction: misses %", "as the paper's levels (glm-paper)"):
        bars.add_column(column, justify="right")
    for e in effects:
        bars.add_row(f"{e['kv_pool_tokens']:,}", *(signed(e[key]) for key in EFFECTS))
    console.print(bars)
    workload = "recorded GLM traces" if args.traces else "synthetic"
    picture = plot(rows, args.arms, out.with_suffix(".png"), f"{workload}, {len(sessions)} sessions, "
                   f"{args.concurrency} in flight, {args.model} tokens ({LABEL})")
    result = {
        "benchmark": "codesign-sweep", "version": 1, **run_header(argv),
        "settings": vars(args), "label": LABEL,
        "workload": {"synthetic": not args.traces, "traces": args.traces, "sessions": len(sessions),
                     "calls": sum(len(s.calls) for s in sessions)},
        "rows": rows, "effects": effects, "plot": str(picture),
    }
    write_json_atomic(out, result)
    console.print(f"wrote {out} and {picture}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
