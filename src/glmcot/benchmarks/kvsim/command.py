"""`glmcot bench kvsim` / `python -m glmcot.benchmarks.kvsim`: the KV simulator's sweep.

    python -m glmcot.benchmarks.kvsim --quick                    # CI: tiny sweep, counts only
    python -m glmcot.benchmarks.kvsim --full --jobs 2            # the sweep in docs/benchmarks.md
    python -m glmcot.benchmarks.kvsim --trace my.jsonl --deployments H200:Qwen3-32B:1 --concurrency 16 64

Without --trace it records one: the scripted policy's GLM and faithful Graph-CoT question traces
over the synthetic domains (`glmcot.benchmarks.agents --traces`, lexical retriever), tokenized with
the real Qwen tokenizer (trace.py has the file format, for traces of your own). vLLM arms run in
vLLM's environment: when vLLM does not import here, they run in `--vllm-python` (default
$GLMCOT_VLLM_VENV/bin/python, else .venv-vllm) as a subprocess; without it they are left out,
and the report says so. Simulated: cache bookkeeping is vLLM's (or glmcot's) own code; time is a model.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from glmcot.benchmarks.kvsim.backends import Limits
from glmcot.benchmarks.kvsim.cost import deployment
from glmcot.benchmarks.kvsim.sim import ARMS, VLLM_ARMS, SimConfig
from glmcot.benchmarks.kvsim.sweep import (LABEL, Point, all_tokens, compare, medians, pool_sizes, run_point,
                                           sessions_for, winners)
from glmcot.benchmarks.kvsim.trace import Trace, read_trace, record_from_question_traces, write_trace
from glmcot.files import write_json_atomic

SRC = Path(__file__).resolve().parents[3]
DOMAINS = ("dblp", "amazon", "goodreads", "biomedical", "legal")
FULL = {"deployments": ["A800:Qwen3-235B-A22B:8", "H100:Qwen3-32B:8"], "concurrency": [8, 64, 512], "pools": 4,
        "sessions": 128, "max_sessions": 512}
QUICK = {"deployments": ["H100:Qwen3-8B:1"], "concurrency": [4, 16], "pools": 3, "sessions": 16}


def record_trace(out: Path, domains: list[str], per_template: int, methods: tuple[str, ...]) -> Trace:
    """Runs the agents benchmark (scripted policy) with --traces and converts what it wrote."""
    from glmcot.engine.models.tokenizer import qwen_tokenizer

    folder = out.parent / "question-traces"
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "glmcot.benchmarks.agents", "--domains", *domains, "--per-template",
               str(per_template), "--retriever", "lexical", "--data-dir", str(out.parent / "data"),
               "--traces", str(folder), "--out", str(out.parent / "agents.json")]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"recording the traces failed ({' '.join(command)}):\n{done.stderr[-3000:]}")
    files = [folder / f"{d}-{m}.jsonl" for d in domains for m in methods]
    trace = record_from_question_traces(files, qwen_tokenizer().encode, methods=methods)
    trace.meta = {"domains": domains, "per_template": per_template, "policy": "scripted (system figures, not accuracy)",
                  "retriever": "lexical"}
    write_trace(out, trace)
    return trace


def vllm_python(given: str | None) -> str | None:
    for candidate in (given, os.environ.get("GLMCOT_VLLM_VENV") and f"{os.environ['GLMCOT_VLLM_VENV']}/bin/python",
                      ".venv-vllm/bin/python", str(SRC.parent / ".venv-vllm/bin/python")):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


def vllm_here() -> bool:
    try:
        import vllm  # noqa: F401
        from vllm.v1.core.kv_cache_manager import KVCacheManager  # noqa: F401
        return True
    except Exception:
        return False


def _point_job(job: tuple) -> list[dict]:
    point, sessions, arms, spec, overrides, limits, base = job
    return run_point(point, sessions, arms, deployment(spec, *overrides), limits, base)


def main(argv: list[str] | None = None) -> int:
    from glmcot.offline import stay_offline

    stay_offline()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="tiny sweep (CI): one deployment, 2 loads, 3 pools")
    size.add_argument("--full", action="store_true", help="the documented sweep (2 deployments x 3 loads x 4 pools)")
    parser.add_argument("--trace", type=Path, action="append", default=None,
                        help="a glmcot.kvsim-trace/1 file (repeatable); default: record one")
    parser.add_argument("--domains", nargs="+", default=None, choices=DOMAINS, help="domains to record (default: all; quick: dblp)")
    parser.add_argument("--per-template", type=int, default=None, help="questions per template to record (default 2; quick 1)")
    parser.add_argument("--method", default="glm", help="which recorded sessions to replay (glm, graphcot, or all)")
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    parser.add_argument("--deployments", nargs="+", default=None, metavar="GPU:MODEL:TP")
    parser.add_argument("--arrivals", default="closed", choices=("closed", "poisson"))
    parser.add_argument("--concurrency", type=int, nargs="+", default=None, help="closed loop: sessions in flight")
    parser.add_argument("--rates", type=float, nargs="+", default=[1.0, 4.0], help="poisson: sessions per second")
    parser.add_argument("--pools", type=int, default=None, help="pool sizes per sweep (agent prompts do not fit .. all fits)")
    parser.add_argument("--pool-tokens", type=int, nargs="+", default=None, help="explicit pool sizes instead")
    parser.add_argument("--deployment-pool", action="store_true", help="also run each deployment's real KV pool")
    parser.add_argument("--sessions", type=int, default=None, help="at least this many sessions per point (closed loop: 2x concurrency)")
    parser.add_argument("--max-sessions", type=int, default=None,
                        help="at most this many sessions per point (never fewer than the concurrency; full: 512)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--block-size", type=int, default=Limits.block_size)
    parser.add_argument("--max-num-seqs", type=int, default=Limits.max_num_seqs)
    parser.add_argument("--max-num-batched-tokens", type=int, default=Limits.max_num_batched_tokens)
    parser.add_argument("--tool-scale", type=float, default=1.0, help="multiply the recorded tool times")
    parser.add_argument("--no-pipelining", action="store_true", help="RetrieveNode does not overlap decoding")
    parser.add_argument("--retention-ttl", type=float, default=SimConfig.retention_ttl_s, help="session-ttl arm, seconds")
    parser.add_argument("--continuum-ttl-factor", type=float, default=SimConfig.continuum_ttl_factor)
    parser.add_argument("--gpu-override", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--model-override", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--cost-override", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (the machine's cores are shared)")
    parser.add_argument("--vllm-python", default=None, help="a Python with vLLM 0.32 for the vLLM arms")
    parser.add_argument("--rows-only", action="store_true", help="write the raw rows only (a part of a sweep run elsewhere)")
    parser.add_argument("--from-rows", type=Path, action="append", default=None,
                        help="report rows written by --rows-only runs (repeatable) instead of simulating")
    parser.add_argument("--out", type=Path, default=Path("runs/kvsim/kvsim.json"))
    parser.add_argument("--plots", type=Path, default=None, help="folder for the figures (default: beside --out)")
    args = parser.parse_args(argv)
    preset = QUICK if args.quick else FULL
    deployments = args.deployments or preset["deployments"]
    overrides = (args.gpu_override, args.model_override, args.cost_override)
    try:
        specs = {spec: deployment(spec, *overrides) for spec in deployments}
    except ValueError as error:
        parser.error(str(error))
    started = time.perf_counter()
    args.out.parent.mkdir(parents=True, exist_ok=True)

    if args.trace:
        traces = [read_trace(path) for path in args.trace]
        trace = Trace([s for t in traces for s in t.sessions], traces[0].tokenizer, ", ".join(map(str, args.trace)),
                      traces[0].meta)
        trace_path = args.trace[0] if len(args.trace) == 1 else None
    else:
        domains = args.domains or (["dblp"] if args.quick else list(DOMAINS))
        per_template = args.per_template or (1 if args.quick else 2)
        trace_path = args.out.parent / "trace.jsonl"
        print(f"recording traces (scripted policy, {', '.join(domains)}, {per_template} per template) -> {trace_path}",
              file=sys.stderr)
        trace = record_trace(trace_path, domains, per_template, ("glm", "graphcot"))
    sessions = [s for s in trace.sessions if args.method in ("all", s.method)]
    if not sessions:
        parser.error(f"the trace has no {args.method!r} sessions (it has {', '.join(trace.methods())})")
    limits = Limits(args.block_size, args.max_num_seqs, args.max_num_batched_tokens)
    base = SimConfig(seed=args.seed, pipelined=not args.no_pipelining, tool_scale=args.tool_scale,
                     retention_ttl_s=args.retention_ttl, continuum_ttl_factor=args.continuum_ttl_factor)
    loads = (args.concurrency or preset["concurrency"]) if args.arrivals == "closed" else args.rates
    minimum = args.sessions or preset["sessions"]
    longest = max(c.prompt_tokens + c.output_tokens for s in sessions for c in s.calls)
    points: list[Point] = []
    for spec, dep in specs.items():
        for load in loads:
            count = sessions_for(load, args.arrivals, minimum, args.max_sessions or preset.get("max_sessions"))
            sizes = args.pool_tokens or pool_sizes(sessions, count, args.pools or preset["pools"], limits.block_size,
                                                    2 * longest + 2 * limits.block_size)
            if args.deployment_pool:
                sizes = sorted(set(sizes) | {dep.kv_pool_tokens() // limits.block_size * limits.block_size})
            everything = all_tokens(sessions, count)
            points += [Point(spec, args.arrivals, load, count, size, size / everything) for size in sizes]

    arms = list(args.arms)
    vllm_arms = [a for a in arms if a in VLLM_ARMS]
    notes = []
    rows: list[dict] = []
    if args.from_rows:
        rows = [row for path in args.from_rows for row in json.loads(path.read_text())["rows"]]
        args.arms = list(dict.fromkeys(r["arm"] for r in rows))
        arms = vllm_arms = []
        specs = {spec: deployment(spec, *overrides) for spec in dict.fromkeys(r["deployment"] for r in rows)}
    if vllm_arms and not vllm_here():
        arms = [a for a in arms if a not in VLLM_ARMS]
        python = vllm_python(args.vllm_python)
        if python is None:
            notes.append(f"vLLM arms ({', '.join(vllm_arms)}) left out: vLLM does not import here and no --vllm-python")
        else:
            if trace_path is None:
                trace_path = args.out.parent / "trace.jsonl"
                write_trace(trace_path, trace)
            sub_out = Path(tempfile.mkdtemp(prefix="kvsim-vllm-", dir=args.out.parent)) / "rows.json"
            command = [python, "-m", "glmcot.benchmarks.kvsim", "--rows-only", "--trace", str(trace_path),
                       "--out", str(sub_out), "--arms", *vllm_arms] + _passthrough(argv if argv is not None else sys.argv[1:])
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
            print(f"vLLM arms in {python}", file=sys.stderr)
            done = subprocess.run(command, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"the vLLM arms failed:\n{done.stderr[-4000:]}")
            rows += json.loads(sub_out.read_text())["rows"]
    jobs = [(p, sessions, arms, p.deployment, overrides, limits, base) for p in points]
    if arms:
        if args.jobs > 1:
            with ProcessPoolExecutor(args.jobs) as pool:
                for part in pool.map(_point_job, jobs):
                    rows += part
        else:
            from rich.progress import Progress

            with Progress(transient=True) as progress:
                task = progress.add_task("kvsim points", total=len(jobs))
                for job in jobs:
                    rows += _point_job(job)
                    progress.advance(task)
    if args.rows_only:
        write_json_atomic(args.out, {"rows": rows})
        return 0
    rows = compare(rows)
    order = {name: i for i, name in enumerate(ARMS)}
    rows.sort(key=lambda r: (r["deployment"], r["load"], r["pool_tokens"], order[r["arm"]]))
    result = {
        "benchmark": "kvsim", "label": LABEL,
        "command": "python -m glmcot.benchmarks.kvsim " + " ".join(argv if argv is not None else sys.argv[1:]),
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "wall_s": round(time.perf_counter() - started, 1),
        "trace": {"source": trace.source, "tokenizer": trace.tokenizer, "sessions": len(sessions), "method": args.method,
                  "calls_per_session": sum(len(s.calls) for s in sessions) / len(sessions), **trace.meta},
        "limits": vars(limits), "sim": vars(base), "deployments": {k: v.describe() for k, v in specs.items()},
        "arms": {name: ARMS[name].description for name in args.arms}, "notes": notes,
        "medians": {spec: medians(rows, lambda r, spec=spec: r["deployment"] == spec) for spec in specs},
        "medians_under_pressure": {spec: medians(rows, lambda r, spec=spec: r["deployment"] == spec and r.get("under_pressure"))
                                   for spec in specs},
        "winners": winners(rows, [a for a in args.arms if ARMS[a].backend == "native"]),
        "rows": rows,
    }
    write_json_atomic(args.out, result)
    from glmcot.benchmarks.kvsim.report import markdown, plot, print_report

    print_report(result)
    table = args.out.with_suffix(".md")
    table.write_text(markdown(result) + "\n", encoding="utf-8")
    print(f"table: {table}")
    figures = plot(result, args.plots or args.out.parent)
    for figure in figures:
        print(f"figure: {figure}")
    print(f"JSON: {args.out}")
    return 0


def _passthrough(argv: list[str]) -> list[str]:
    """The caller's options that shape the sweep (not the trace, arms, output or jobs)."""
    out, skip = [], 0
    drop = {"--trace", "--arms", "--out", "--plots", "--vllm-python", "--domains", "--per-template"}
    for item in argv:
        if skip and not item.startswith("--"):
            continue
        skip = 0
        name = item.split("=")[0]
        if name in drop:
            skip = 1
            continue
        out.append(item)
    return out
