"""The co-design benchmark's report: the paper's effects from the arms' rows, and the tables.

Every effect is a ratio (or a difference of hit rates) between arms of the same run; the paper's
figures (Fig. 15) are printed beside ours.
"""

from __future__ import annotations

from glmcot.benchmarks.codesign.arms import CONTROL_SUFFIX
from glmcot.benchmarks.codesign.fidelity import FIDELITY_MODES
from glmcot.benchmarks.common import signed

# The paper's vertex-centric ablation switches the retrieval unit from single facts (fragments in
# no stable order, so even similar prompts miss the prefix cache) to vertex chunks with KV reuse:
# here lru+facts against lru+chunks.
PAPER = {"vertex_centric_hit_points": 17.7, "vertex_centric_throughput_pct": 41.6, "priority_miss_pct": -15.1,
         "priority_throughput_pct": 14.3}


def compare(rows: dict[str, dict], throughput_key: str | None) -> dict:
    """The paper's four effects from the arms that ran (None where an arm is missing, and for
    throughput without a `throughput_key`)."""
    facts, base, chunks, glm = rows.get("lru+facts"), rows.get("lru"), rows.get("lru+chunks"), rows.get("glm+chunks")
    paper_glm = rows.get("glm-paper+chunks")

    def pct(a, b):
        return (b / a - 1) * 100 if a else None

    def both(old, new):
        return old is not None and new is not None

    def throughput(old, new):
        return pct(old[throughput_key], new[throughput_key]) if throughput_key and both(old, new) else None

    def points(old, new):
        return (new["hit_rate"] - old["hit_rate"]) * 100 if both(old, new) else None

    def misses(old, new):
        return pct(1 - old["hit_rate"], 1 - new["hit_rate"]) if both(old, new) else None

    controls = [(rows[name.removesuffix(CONTROL_SUFFIX)], row) for name, row in rows.items() if name.endswith(CONTROL_SUFFIX)]
    return {
        # Two copies of one arm doing identical work: an effect smaller than this is noise.
        "control_throughput_pct": throughput(*controls[0]) if controls else None,
        # The paper's vertex-centric ablation: fact notebooks -> vertex chunks with KV reuse ...
        "vertex_centric_hit_points": points(facts, chunks),
        "vertex_centric_throughput_pct": throughput(facts, chunks),
        # ... of which whole chunks appended in order (prefix hits on a session's own notebook) ...
        "unit_hit_points": points(facts, base),
        "unit_throughput_pct": throughput(facts, base),
        # ... and chunk KV reused at any position (hits on other sessions' chunks).
        "vertex_hit_points": points(base, chunks),
        "vertex_throughput_pct": throughput(base, chunks),
        "priority_miss_pct": misses(chunks, glm),
        "priority_throughput_pct": throughput(chunks, glm),
        # The same with the four levels exactly as the paper describes them (P3 one LRU level).
        "priority_paper_miss_pct": misses(chunks, paper_glm),
        "priority_paper_throughput_pct": throughput(chunks, paper_glm),
        "throughput_key": throughput_key,
    }


def paired_effects(runs: dict[str, list[dict]], throughput_key: str) -> dict[str, list[float]]:
    """Each effect within each repeat: arms that stepped in the same lock-step run, so one
    repeat's machine load falls on both sides of its comparison. The medians reported beside
    them pair each arm's median run, which may come from different repeats."""
    repeats = min(map(len, runs.values()))
    per_repeat = [compare({name: results[i] for name, results in runs.items()}, throughput_key) for i in range(repeats)]
    return {key: [effect[key] for effect in per_repeat] for key in per_repeat[0]
            if key != "throughput_key" and per_repeat[0][key] is not None}


def print_report(rows: dict[str, dict], ours: dict, ours_cpu: dict, fid: dict | None, console,
                 paired: dict[str, list[float]] | None = None) -> None:
    """`paired`: the effects per repeat, printed as a column when given."""
    from rich.table import Table

    table = Table(title="GLM co-design: forced decoding under KV pressure (scripted text, real compute)")
    for col in ("arm", "hit rate", "prefix", "chunk", "prefill tok", "time in prefill steps", "sess/s", "sess/cpu-s",
                "p50 s", "p99 s", "evict P1/P2/P3/P4", "preempt"):
        table.add_column(col, justify="right")
    for name, r in rows.items():
        ev = r["evictions"]
        table.add_row(name, f"{r['hit_rate']:.1%}", f"{r['prefix_hit_rate']:.1%}", f"{r['chunk_hit_rate']:.1%}",
                      f"{r['prefill_tokens_computed']:,}", f"{r['prefill_steps_s'] / r['wall_s']:.0%}",
                      f"{r['throughput_sessions_per_s']:.3f}",
                      f"{r['throughput_sessions_per_cpu_s']:.3f}", f"{r['latency_p50_s']:.3f}",
                      f"{r['latency_p99_s']:.3f}", f"{ev['P1']}/{ev['P2']}/{ev['P3']}/{ev['P4']}", str(r["preemptions"]))
    console.print(table)
    bars = Table(title="Against the paper's ablation (Fig. 15), same run")
    columns = ["effect", "paper", "ours (own step time)", "ours (CPU time)"]
    if paired:
        columns.append("per repeat (same run)")
    for col in columns:
        bars.add_column(col, justify="right")
    labels = {"vertex_centric_hit_points": "vertex-centric (facts -> chunks + reuse): hit rate, points",
              "vertex_centric_throughput_pct": "vertex-centric: throughput %",
              "unit_hit_points": "  of which chunks as the unit (facts -> lru): points",
              "unit_throughput_pct": "  of which chunks as the unit: throughput %",
              "vertex_hit_points": "  of which chunk KV reuse (lru -> lru+chunks): points",
              "vertex_throughput_pct": "  of which chunk KV reuse: throughput %",
              "priority_miss_pct": "priority eviction: misses %", "priority_throughput_pct": "priority eviction: throughput %",
              "priority_paper_miss_pct": "  the paper's four levels as written (glm-paper): misses %",
              "priority_paper_throughput_pct": "  the paper's four levels as written: throughput %",
              "control_throughput_pct": "noise floor: same arm twice, throughput %"}
    for key, label in labels.items():
        if key in PAPER or ours.get(key) is not None:
            cells = [label, f"{PAPER[key]:+.1f}" if key in PAPER else "-", signed(ours[key]), signed(ours_cpu[key])]
            if paired:
                cells.append(" / ".join(signed(value) for value in paired.get(key, [])) or "-")
            bars.add_row(*cells)
    console.print(bars)
    if fid:
        ft = Table(title=f"Fidelity vs full prefill, {fid['prompts']} R-Agent prompts, teacher-forced")
        for col in ("mode", "top-1 agreement", "first token", "KL mean", "KL p99", "chunk-hit tokens"):
            ft.add_column(col, justify="right")
        for mode in FIDELITY_MODES:
            f = fid[mode]
            ft.add_row(mode, f"{f['top1_agreement']:.1%}", f"{f['first_token_agreement']:.1%}", f"{f['kl_mean']:.2e}",
                       f"{f['kl_p99']:.2e}", f"{f['chunk_hit_tokens']:,}")
        console.print(ft)
        if fid.get("caveat"):
            console.print(f"[bold yellow]caveat:[/] {fid['caveat']}")
