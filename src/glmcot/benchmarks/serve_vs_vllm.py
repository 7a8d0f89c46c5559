"""`glmcot serve` against `vllm serve` on the same checkpoint, driven by vLLM's own client.

The servers are started on one tiny local Qwen3 checkpoint (built here, no download: see
tiny_checkpoint.py; or --model DIR), each from its own environment: glmcot from this one (its
sources on PYTHONPATH), vLLM from vLLM's (scripts/setup_vllm.sh; --vllm-venv). `--glmcot-modes`
starts one glmcot server per engine mode (`thread`: `--engine-thread`, the engine loop on a
thread of the server's process; `process`: `--engine-process`, in its own process), so both can
be compared with vLLM in one run. Once all answer /health, `vllm bench serve` (random dataset,
fixed seeds, streamed /v1/completions with ignore_eos, so every request does the same work on
each) runs every sweep point (request rates, optionally capped by --max-concurrency) against each
server, the servers taking turns: within a round all run a point back to back, and the order
rotates every round, so the machine's slow moments fall on all alike. Round 0 is each server's
first load after start and is reported separately as the warm-up round; the measured rounds give
the median per point. A round's seed is the same for all servers and differs between rounds (a
repeated prompt set would be served from the prefix cache).

Per server and point: throughput (requests/s, output tokens/s), TTFT median and p99, TPOT median;
then each glmcot server's ratios to vLLM in the same run (throughput: above 1 is better for glmcot;
TTFT and TPOT: below 1 is better) and their median over the sweep. The goal (issue 20): p99 TTFT
at or below vLLM's and throughput at or above it. Servers are stopped with SIGTERM.

    python -m glmcot.benchmarks.serve_vs_vllm --vllm-venv .venv-vllm --glmcot-modes thread,process \\
        --request-rates 8 16 32 --num-prompts 200 --rounds 2 --out runs/bench/serve_vs_vllm.json
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path


from glmcot.benchmarks.servers import ServerProcess, free_port, spawn, stop, wait_ready
from glmcot.files import write_json_atomic
from glmcot.offline import stay_offline

SERVED_NAME = "bench"
VLLM = "vllm"
MODES = {"thread": "--engine-thread", "process": "--engine-process"}   # glmcot serve's engine modes
METRICS = ("request_throughput", "output_throughput", "median_ttft_ms", "p99_ttft_ms",
           "median_tpot_ms")
# glmcot / vLLM, and which way is better for glmcot
RATIOS = {"request_throughput": "higher", "output_throughput": "higher", "median_ttft_ms": "lower",
          "p99_ttft_ms": "lower", "median_tpot_ms": "lower"}


@dataclass
class Measurement:
    """One `vllm bench serve` run against one server at one sweep point."""

    server: str
    point: str
    round: int
    seed: int
    completed: int
    failed: int
    duration_s: float
    request_throughput: float
    output_throughput: float
    median_ttft_ms: float
    p99_ttft_ms: float
    median_tpot_ms: float
    max_concurrent_requests: int | None = None
    load_average: list[float] = field(default_factory=list)


def glmcot_name(mode: str) -> str:
    return f"glmcot-{mode}"


def start_glmcot(args, model: Path, folder: Path, mode: str) -> ServerProcess:
    port = free_port()
    name = glmcot_name(mode)
    log = folder / f"{name}-serve.log"
    source = str(Path(args.glmcot_src).resolve())
    env = dict(os.environ, HF_HUB_OFFLINE="1",
               PYTHONPATH=os.pathsep.join(p for p in (source, os.environ.get("PYTHONPATH")) if p))
    command = [args.glmcot_python, "-m", "glmcot.cli", "serve", "--model", str(model),
               "--host", "127.0.0.1", "--port", str(port), "--served-model-name", SERVED_NAME,
               "--engine-option", f'dtype="{args.dtype}"',
               "--engine-option", f"max_model_len={args.max_model_len}",
               "--max-tokens-limit", str(max(4096, args.output_len)), "--log-level", "warning",
               MODES[mode], *shlex.split(args.glmcot_args)]
    return spawn(name, command, env, port, log)


def start_vllm(args, model: Path, folder: Path) -> ServerProcess:
    vllm = Path(args.vllm_venv) / "bin" / "vllm"
    if not vllm.is_file():
        raise SystemExit(f"{vllm} not found: run scripts/setup_vllm.sh (or pass --vllm-venv)")
    port = free_port()
    log = folder / "vllm-serve.log"
    # CPU: the KV space is set in GiB by this variable (docs: cpu-facts 13)
    env = dict(os.environ, HF_HUB_OFFLINE="1", VLLM_CPU_KVCACHE_SPACE=str(args.vllm_kv_gib))
    command = [str(vllm), "serve", str(model), "--served-model-name", SERVED_NAME,
               "--dtype", args.dtype, "--max-model-len", str(args.max_model_len),
               "--host", "127.0.0.1", "--port", str(port), *shlex.split(args.vllm_args)]
    if args.vllm_eager:
        command.append("--enforce-eager")
    return spawn(VLLM, command, env, port, log)


def bench(args, server: ServerProcess, model: Path, rate: str, seed: int, folder: Path, name: str
          ) -> dict:
    """One `vllm bench serve` run; its saved result JSON."""
    command = [str(Path(args.vllm_venv) / "bin" / "vllm"), "bench", "serve", "--backend", "vllm",
               "--base-url", server.url, "--model", SERVED_NAME, "--tokenizer", str(model),
               "--dataset-name", "random", "--random-input-len", str(args.input_len),
               "--random-output-len", str(args.output_len), "--num-prompts", str(args.num_prompts),
               "--request-rate", rate, "--seed", str(seed), "--ignore-eos",
               "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,99",
               "--save-result", "--result-dir", str(folder), "--result-filename", name,
               "--disable-tqdm"]
    if args.max_concurrency:
        command += ["--max-concurrency", str(args.max_concurrency)]
    log = folder / (name + ".log")
    with open(log, "w") as handle:
        done = subprocess.run(command, env=dict(os.environ, HF_HUB_OFFLINE="1"), stdout=handle,
                              stderr=subprocess.STDOUT, timeout=args.bench_timeout)
    if done.returncode != 0 or not (folder / name).is_file():
        raise SystemExit(f"vllm bench serve failed against {server.name}:\n{log.read_text()[-3000:]}")
    return json.loads((folder / name).read_text())


def measurement(server: str, point: str, round_: int, seed: int, raw: dict) -> Measurement:
    return Measurement(server=server, point=point, round=round_, seed=seed,
                       completed=int(raw.get("completed", 0)), failed=int(raw.get("failed", 0)),
                       duration_s=float(raw["duration"]),
                       request_throughput=float(raw["request_throughput"]),
                       output_throughput=float(raw["output_throughput"]),
                       median_ttft_ms=float(raw["median_ttft_ms"]),
                       p99_ttft_ms=float(raw["p99_ttft_ms"]),
                       median_tpot_ms=float(raw["median_tpot_ms"]),
                       max_concurrent_requests=raw.get("max_concurrent_requests"),
                       load_average=[round(x, 2) for x in os.getloadavg()])


def point_label(rate: str, max_concurrency: int | None) -> str:
    return f"rate {rate}" + (f", max conc. {max_concurrency}" if max_concurrency else "")


def summarise(rows: list[Measurement]) -> dict[str, float]:
    """Median over rounds of every metric (one round: its values)."""
    return {metric: statistics.median(getattr(r, metric) for r in rows) for metric in METRICS} | {
        "rounds": len(rows), "failed": sum(r.failed for r in rows)}


def ratios(glm: dict[str, float], vllm: dict[str, float]) -> dict[str, float | None]:
    return {metric: (glm[metric] / vllm[metric] if vllm[metric] else None) for metric in RATIOS}


def goal_met(ratio: dict[str, float | None]) -> bool:
    """Issue 20: p99 TTFT at or below vLLM's and throughput at or above it."""
    p99, throughput = ratio.get("p99_ttft_ms"), ratio.get("request_throughput")
    return p99 is not None and throughput is not None and p99 <= 1.0 and throughput >= 1.0


def glmcot_servers(runs: list[Measurement]) -> list[str]:
    """The glmcot servers in the runs, in the order they first appear."""
    return list(dict.fromkeys(r.server for r in runs if r.server != VLLM))


def build_result(args, points: list[str], runs: list[Measurement], servers: list[ServerProcess]) -> dict:
    """Per point and phase: every server's medians, and each glmcot server's ratios to vLLM
    (`ratio[name]`) and whether it meets the goal there (`goal_met[name]`)."""
    names = glmcot_servers(runs)
    per_point = []
    for point in points:
        entry: dict = {"point": point}
        for phase, keep in (("warmup", lambda r: r.round == 0), ("measured", lambda r: r.round > 0)):
            rows = {name: [r for r in runs if r.server == name and r.point == point and keep(r)]
                    for name in (*names, VLLM)}
            if all(rows.values()):
                summary = {name: summarise(rows[name]) for name in rows}
                entry[phase] = {**summary, "ratio": {name: ratios(summary[name], summary[VLLM]) for name in names}}
        if "measured" in entry:
            entry["goal_met"] = {name: goal_met(entry["measured"]["ratio"][name]) for name in names}
        per_point.append(entry)
    median_ratios, goal_points, goal_median = {}, {}, {}
    for name in names:
        measured = [p["measured"]["ratio"][name] for p in per_point if "measured" in p]
        median_ratios[name] = {metric: statistics.median(r[metric] for r in measured if r[metric] is not None)
                               for metric in RATIOS} if measured else {}
        goal_points[name] = sum(bool(p.get("goal_met", {}).get(name)) for p in per_point)
        goal_median[name] = goal_met(median_ratios[name]) if median_ratios[name] else False
    return {"benchmark": "serve_vs_vllm", "argv": args.argv, "model": str(args.model_path),
            "workload": {"dataset": "random", "input_len": args.input_len,
                         "output_len": args.output_len, "num_prompts": args.num_prompts,
                         "request_rates": args.request_rates,
                         "max_concurrency": args.max_concurrency, "rounds": args.rounds,
                         "seed": args.seed, "dtype": args.dtype, "ignore_eos": True},
            "servers": [*names, VLLM],
            "ready_s": {s.name: s.ready_s for s in servers},
            "points": per_point, "median_ratios": median_ratios,
            "goal_met_points": goal_points, "goal_met_median": goal_median,
            "runs": [asdict(r) for r in runs]}


def print_tables(result: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=132)   # the ratio rows stay readable in a log
    names = [name for name in result["servers"] if name != VLLM]
    for phase, title in (("warmup", "round 0: each server's first load after start (warm-up)"),
                         ("measured", f"measured rounds (median of {result['workload']['rounds']})")):
        table = Table(title=title)
        for column in ("point", "server", "req/s", "out tok/s", "TTFT p50 ms", "TTFT p99 ms",
                       "TPOT p50 ms", "failed"):
            table.add_column(column)
        for point in result["points"]:
            if phase not in point:
                continue
            data = point[phase]
            for name in result["servers"]:
                row = data[name]
                table.add_row(point["point"], name, f"{row['request_throughput']:.2f}",
                              f"{row['output_throughput']:.0f}", f"{row['median_ttft_ms']:.1f}",
                              f"{row['p99_ttft_ms']:.1f}", f"{row['median_tpot_ms']:.2f}",
                              str(row["failed"]))
            for name in names:
                ratio = data["ratio"][name]
                met = point.get("goal_met", {}).get(name)
                table.add_row(point["point"], f"[bold]{name}/vLLM[/bold]",
                              *(f"{ratio[m]:.2f}x" if ratio[m] is not None else "-" for m in METRICS),
                              ("goal met" if met else "goal not met") if phase == "measured" else "")
        console.print(table)
    for name in names:
        median = result["median_ratios"][name]
        console.print(f"median over the sweep, {name}/vLLM: " + ", ".join(
            f"{m} {v:.2f}x" for m, v in median.items()))
        console.print(f"{name}: goal (p99 TTFT <= vLLM's and throughput >= vLLM's) met at "
                      f"{result['goal_met_points'][name]} of {len(result['points'])} points; at the median: "
                      f"{'met' if result['goal_met_median'][name] else 'not met'}")


def parse_modes(text: str) -> list[str]:
    modes = [mode.strip() for mode in text.split(",") if mode.strip()]
    unknown = [mode for mode in modes if mode not in MODES]
    if unknown or not modes or len(set(modes)) != len(modes):
        raise argparse.ArgumentTypeError(f"expected distinct modes from {', '.join(MODES)}, got {text!r}")
    return modes


def main(argv: list[str] | None = None) -> int:
    stay_offline()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None,
                        help="checkpoint directory (default: a tiny random Qwen3 built here)")
    parser.add_argument("--request-rates", nargs="+", default=["8", "16", "32"],
                        help="the sweep: requests per second (Poisson), or inf")
    parser.add_argument("--max-concurrency", type=int, default=None,
                        help="cap on requests in flight at every point (vllm bench serve's)")
    parser.add_argument("--num-prompts", type=int, default=48)
    parser.add_argument("--input-len", type=int, default=256)
    parser.add_argument("--output-len", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2, help="measured rounds after round 0")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--max-model-len", type=int, default=4096)
    parser.add_argument("--vllm-venv", default=os.environ.get("GLMCOT_VLLM_VENV", ".venv-vllm"),
                        help="vLLM's environment (scripts/setup_vllm.sh)")
    parser.add_argument("--vllm-kv-gib", type=int, default=1, help="VLLM_CPU_KVCACHE_SPACE")
    parser.add_argument("--vllm-eager", action="store_true",
                        help="--enforce-eager (default: vLLM compiles and warms up at start)")
    parser.add_argument("--vllm-args", default="", help="more `vllm serve` arguments, one string")
    parser.add_argument("--glmcot-python", default=sys.executable)
    parser.add_argument("--glmcot-src", default=str(Path(__file__).resolve().parents[2]),
                        help="glmcot sources for the server (PYTHONPATH); default: these")
    parser.add_argument("--glmcot-args", default="", help="more `glmcot serve` arguments, one string")
    parser.add_argument("--glmcot-modes", default=["process"], type=parse_modes,
                        help="comma-separated engine modes, one glmcot server each: process "
                        "(--engine-process, glmcot serve's default), thread (--engine-thread)")
    parser.add_argument("--ready-timeout", type=float, default=1200.0)
    parser.add_argument("--bench-timeout", type=float, default=1200.0)
    parser.add_argument("--out", default="runs/bench/serve_vs_vllm.json")
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.model:
        args.model_path = Path(args.model)
    else:
        from glmcot.benchmarks.tiny_checkpoint import tiny_qwen3

        args.model_path = tiny_qwen3(out.parent / "tiny-qwen3")
    model = args.model_path.resolve()
    folder = Path(tempfile.mkdtemp(prefix="serve-vs-vllm-", dir=out.parent))
    points = [point_label(rate, args.max_concurrency) for rate in args.request_rates]
    started_utc = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    load_before = [round(x, 2) for x in os.getloadavg()]
    servers = [*(start_glmcot(args, model, folder, mode) for mode in args.glmcot_modes),
               start_vllm(args, model, folder)]
    runs: list[Measurement] = []
    try:
        wait_ready(servers, args.ready_timeout)
        print("ready: " + ", ".join(f"{s.name} {s.ready_s:.0f} s" for s in servers), flush=True)
        for round_ in range(args.rounds + 1):
            shift = round_ % len(servers)   # each server takes each place in turn
            order = servers[shift:] + servers[:shift]
            for index, (rate, point) in enumerate(zip(args.request_rates, points)):
                seed = args.seed + 1000 * round_ + index   # same for every server in a round
                for server in order:
                    raw = bench(args, server, model, rate, seed, folder,
                                f"{server.name}-r{round_}-p{index}.json")
                    row = measurement(server.name, point, round_, seed, raw)
                    runs.append(row)
                    print(f"round {round_} {point:>22} {server.name:>14}: "
                          f"{row.request_throughput:.2f} req/s, TTFT p50 {row.median_ttft_ms:.1f} "
                          f"p99 {row.p99_ttft_ms:.1f} ms, TPOT {row.median_tpot_ms:.2f} ms, "
                          f"failed {row.failed}, load {row.load_average[0]}", flush=True)
                result = build_result(args, points, runs, servers)
                write_json_atomic(out, result | {"started_utc": started_utc, "partial": True})
    finally:
        stop(servers)
    result = build_result(args, points, runs, servers)
    result |= {"started_utc": started_utc, "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                            time.gmtime()),
               "load_average_before": load_before,
               "load_average_after": [round(x, 2) for x in os.getloadavg()],
               "cpu_count": os.cpu_count(), "logs": str(folder)}
    write_json_atomic(out, result)
    print_tables(result)
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
