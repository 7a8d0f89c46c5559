"""The co-design benchmark's command line: its options, one run of every arm, the JSON result."""

from __future__ import annotations

from glmcot.offline import stay_offline

import argparse
from pathlib import Path

from glmcot.benchmarks.codesign.arms import ARMS, CONTROL_SUFFIX, run_arms
from glmcot.benchmarks.codesign.fidelity import fidelity
from glmcot.benchmarks.codesign.report import PAPER, compare, paired_effects, print_report
from glmcot.benchmarks.codesign.workload import add_workload_arguments, load_workload, reuse_ceiling
from glmcot.benchmarks.common import program_name, run_header
from glmcot.files import write_json_atomic


def main(argv: list[str] | None = None) -> int:
    from glmcot.benchmarks import codesign  # the package: its docstring describes the benchmark

    stay_offline()
    parser = argparse.ArgumentParser(prog=program_name(), description=codesign.__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="random:qwen3:tiny", help="random:<family>:<size> or a local checkpoint directory")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: all cores)")
    add_workload_arguments(parser)
    parser.add_argument("--kv-tokens", type=int, default=8192, help="KV pool size in tokens (the memory pressure)")
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--batch-tokens", type=int, default=2048, help="max tokens per engine step")
    parser.add_argument("--pic-k", type=int, default=16, help="pic: tokens recomputed at the head of each reused chunk")
    parser.add_argument("--chunk-admission", type=int, default=2, metavar="N",
                        help="index a missed chunk the N-th time a prompt holds it (engine chunk_admission)")
    parser.add_argument("--fidelity-prompts", type=int, default=8)
    parser.add_argument("--no-fidelity", action="store_true")
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS),
                        help="arms to run (lru+facts, lru+chunks and glm+chunks are needed for the comparison with the paper; lru "
                             "splits the vertex-centric effect into its two parts)")
    parser.add_argument("--control", default=None, choices=list(ARMS), metavar="ARM",
                        help="also run a second copy of ARM: their throughput spread is the run's noise floor")
    parser.add_argument("--sequential", action="store_true",
                        help="run the arms one after the other (default: in lock-step, one engine step of each in turn, "
                             "so a noisy machine slows every arm alike)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="run the arms this many times, the engines created in a rotated order each time (the "
                             "first KV pool allocated can be faster); report the median")
    parser.add_argument("--quick", action="store_true", help="a smaller run (about 2 minutes on 2 cores)")
    parser.add_argument("--out", default="runs/bench-codesign/codesign.json")
    args = parser.parse_args(argv)
    if args.quick:
        args.sessions, args.concurrency, args.fidelity_prompts = 16, 6, 4
        args.kv_tokens = min(args.kv_tokens, 4096)

    from rich.console import Console
    from rich.progress import Progress

    console = Console()
    out = Path(args.out)
    sessions, prompts = load_workload(args, out, console)
    console.print(f"{len(sessions)} sessions, {sum(len(s.calls) for s in sessions)} calls, model {args.model}, "
                  f"KV pool {args.kv_tokens} tokens, {args.concurrency} sessions in flight")
    ceiling = reuse_ceiling(sessions)
    console.print(f"vertex chunks: {ceiling['chunk_share']:.1%} of prompt characters; read again by a later session: "
                  f"{ceiling['cross_session_chunk_share']:.1%} ({ceiling['chunks_in_several_sessions']} of "
                  f"{ceiling['distinct_chunks']} chunks), the most chunk KV reuse can add to lru's hit rate")
    names = list(args.arms) + ([args.control + CONTROL_SUFFIX] if args.control else [])
    if args.control and args.control not in args.arms:
        parser.error(f"--control {args.control}: that arm is not in --arms")
    runs: dict[str, list[dict]] = {name: [] for name in names}
    with Progress(console=console, transient=True) as progress:
        for repeat in range(args.repeats):
            order = names[repeat % len(names):] + names[:repeat % len(names)]  # each arm takes its turn first
            for name, result in run_arms(order, args, sessions, prompts, progress, lockstep=not args.sequential).items():
                runs[name].append(result)
    rows = {}
    for name, results in runs.items():
        ranked = sorted(results, key=lambda r: r["throughput_sessions_per_s"])  # all_runs keeps the repeat order
        rows[name] = ranked[len(ranked) // 2]
    too_long = next(iter(rows.values()))["sessions_too_long"]
    if too_long:
        console.print(f"[yellow]{too_long} of {len(sessions)} sessions left out: a call does not fit the model's "
                      f"{args.model} positions[/]")
    ours = compare(rows, "throughput_sessions_per_s")
    ours_cpu = compare(rows, "throughput_sessions_per_cpu_s")
    paired = paired_effects(runs, "throughput_sessions_per_s")
    fid = None if args.no_fidelity else fidelity(args, sessions)
    print_report(rows, ours, ours_cpu, fid, console, paired if args.repeats > 1 else None)
    result = {
        # Version 4 added ours_wall_per_repeat.
        "benchmark": "codesign", "version": 4, **run_header(argv),
        "settings": {k: v for k, v in vars(args).items()},
        "workload": {"synthetic": not args.traces, "traces": args.traces, "sessions": len(sessions), "calls": sum(len(s.calls) for s in sessions),
                     "reuse_ceiling": ceiling, "note": "scripted policy (forced decoding): measures the system, never model accuracy"},
        "arms": rows, "all_runs": runs, "paper": PAPER, "ours_wall": ours, "ours_cpu": ours_cpu,
        "ours_wall_per_repeat": paired, "fidelity": fid,
    }
    write_json_atomic(out, result)
    console.print(f"wrote {out}")
    return 0
