"""GLM's priority eviction inside a real vLLM: the plugin enforcing, observing, and absent.

Replays GLM sessions (recorded GLM question traces with --traces / --record-traces, else the
co-design benchmark's synthetic GRBench-style workload) against `vllm serve` on the same model and
KV pool size, one server per arm, all started together. The arms replay at the same time (each its
own clients; on a shared, noisy machine the slow moments then fall on every arm alike), or with
--no-together one after another in an order that rotates each repeat; each replay starts from an
empty prefix cache (`/reset_prefix_cache`). Every call sends
the recorded prompt through glmcot's `vllm+glmcot` backend (token ids, level spans, session) and
generates `min(recorded response tokens, --max-output-tokens)` tokens with `ignore_eos`, so every
arm does the same work; `concurrency` sessions are in flight (closed loop), and each session ends
with `end_session`.

Per arm: vLLM's own prefix-cache counters (/metrics: queries, hits), the prompt tokens the server
computed (queries minus hits), throughput (sessions per second of the turn), call latency p50/p99,
and the plugin's evictions per level (observe mode counts the levels stock LRU evicts). The sweep
runs over KV pool sizes and reports the effect at every point and the median.

    python -m glmcot.benchmarks.vllm_codesign --quick
    python -m glmcot.benchmarks.vllm_codesign --record-traces 6 --sessions 30 --kv-tokens 4096 6144 8192 12288 16384
    python -m glmcot.benchmarks.vllm_codesign --model /models/Qwen3-0.6B --kv-tokens 32768 65536 131072   # a real model

Run it from the repository root with glmcot's main environment; the servers come from vLLM's
environment (scripts/setup_vllm.sh; --vllm-venv).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from glmcot.benchmarks.codesign.workload import add_workload_arguments, load_workload
from glmcot.benchmarks.common import percentile, signed
from glmcot.benchmarks.servers import ServerProcess, free_port, spawn, stop, wait_ready
from glmcot.files import write_json_atomic
from glmcot.offline import stay_offline

ARMS = ("enforce", "observe", "absent")
BLOCK = 32
PAPER = {"miss_pct": -15.1, "throughput_pct": 14.3}  # GLM paper, Fig. 15 (priority eviction vs LRU)


def start_server(arm: str, args, model: Path, kv_tokens: int, folder: Path) -> ServerProcess:
    vllm = Path(args.vllm_venv) / "bin" / "vllm"
    if not vllm.is_file():
        raise SystemExit(f"{vllm} not found: run scripts/setup_vllm.sh (or pass --vllm-venv)")
    port = free_port()
    stats = folder / f"stats-{arm}-{kv_tokens}.json"
    log = folder / f"server-{arm}-{kv_tokens}.log"
    env = dict(os.environ, GLMCOT_VLLM_PLUGIN="off" if arm == "absent" else arm, GLMCOT_VLLM_STATS=str(stats),
               VLLM_SERVER_DEV_MODE="1", HF_HUB_OFFLINE="1", VLLM_CPU_KVCACHE_SPACE=os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"))
    command = [str(vllm), "serve", str(model), "--served-model-name", "bench", "--dtype", args.dtype,
               "--block-size", str(BLOCK), "--num-gpu-blocks-override", str(kv_tokens // BLOCK + 1),
               "--max-model-len", str(max_model_len(args, kv_tokens)), "--enable-prompt-tokens-details",
               "--host", "127.0.0.1", "--port", str(port), *args.server_args]
    if args.eager:
        command.append("--enforce-eager")
    if args.device == "cpu":
        command += ["--gpu-memory-utilization", "0.05"]
    return spawn(arm, command, env, port, log, stats)


def max_model_len(args, kv_tokens: int) -> int:
    return min(args.max_model_len, kv_tokens)


def prefix_counters(url: str) -> dict[str, float]:
    text = httpx.get(url + "/metrics", timeout=30).text
    out = {"queries": 0.0, "hits": 0.0}
    for line in text.splitlines():
        for key, name in (("queries", "vllm:prefix_cache_queries_total"), ("hits", "vllm:prefix_cache_hits_total")):
            if line.startswith(name + "{") or line.startswith(name + " "):
                out[key] += float(line.rsplit(" ", 1)[1])
    return out


def plugin_evictions(server: ServerProcess) -> dict[str, int] | None:
    if server.name == "absent" or not server.stats.is_file():
        return None
    for _ in range(20):  # the engine core writes at most every 0.5 s
        try:
            return json.loads(server.stats.read_text())["evictions"]
        except (json.JSONDecodeError, KeyError):
            time.sleep(0.2)
    return None


def fitting_sessions(sessions, tokenizer, limit: int) -> list:
    """Sessions whose every call fits the model length (the same ones in every arm)."""
    kept = []
    for session in sessions:
        if all(sum(tokenizer.count(s.text) for s in call.segments) + 64 < limit for call in session.calls):
            kept.append(session)
    return kept


def replay(server: ServerProcess, args, model: Path, sessions, prompts) -> dict:
    from glmcot.llm.types import LLMRequest
    from glmcot.llm.vllm_backend import VLLMBackend

    backend = VLLMBackend(server.url + "/v1", tokenizer=str(model), model="bench", extra_body={"ignore_eos": True},
                          timeout_s=600, max_retries=2)
    requests = httpx.post(server.url + "/reset_prefix_cache", timeout=60)
    if requests.status_code >= 400:
        raise SystemExit(f"{server.name}: /reset_prefix_cache answered {requests.status_code} (VLLM_SERVER_DEV_MODE=1?)")
    from glmcot.contract import Segment

    for text in prompts.values():  # warm-up: the shared agent prompts, as the native benchmark does
        backend.complete(LLMRequest(segments=[Segment(text, 1)], max_tokens=1))
    time.sleep(0.6)
    before, evicted_before = prefix_counters(server.url), plugin_evictions(server)
    latencies: list[float] = []
    usage = {"prompt": 0, "cached": 0, "calls": 0}
    lock = threading.Lock()
    queue = list(reversed(sessions))

    def run_session(session) -> None:
        for call in session.calls:
            out_tokens = max(1, min(args.max_output_tokens, backend.tokens.count(call.forced)))
            response = backend.complete(LLMRequest(segments=list(call.segments), max_tokens=out_tokens,
                                                   session=session.sid))
            with lock:
                latencies.append(response.latency_s)
                usage["prompt"] += response.prompt_tokens
                usage["cached"] += response.cached_tokens
                usage["calls"] += 1
        backend.end_session(session.sid)

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(args.concurrency) as pool:
        list(pool.map(run_session, [queue.pop() for _ in range(len(queue))]))
    wall = time.perf_counter() - started
    time.sleep(0.6)
    after, evicted_after = prefix_counters(server.url), plugin_evictions(server)
    backend.close()
    queries, hits = after["queries"] - before["queries"], after["hits"] - before["hits"]
    evictions = None
    if evicted_before is not None and evicted_after is not None:
        evictions = {k: evicted_after[k] - evicted_before.get(k, 0) for k in ("p1", "p2", "p3", "p4")}
    return {"arm": server.name, "sessions": len(sessions), "calls": usage["calls"], "wall_s": wall,
            "throughput_sessions_per_s": len(sessions) / wall, "latency_p50_s": percentile(latencies, 50),
            "latency_p99_s": percentile(latencies, 99), "prefix_queries_tokens": queries,
            "prefix_hit_tokens": hits, "hit_rate": hits / queries if queries else 0.0,
            "prompt_tokens_computed": queries - hits, "usage_prompt_tokens": usage["prompt"],
            "usage_cached_tokens": usage["cached"], "evictions": evictions}


def effects(rows: dict[str, dict]) -> dict:
    """enforce vs absent (the effect) and observe vs absent (the plugin's overhead), in percent."""
    out = {}
    base = rows.get("absent")
    if base is None:
        return out
    for arm, prefix in (("enforce", ""), ("observe", "observe_")):
        row = rows.get(arm)
        if row is None:
            continue
        if base["prompt_tokens_computed"]:
            out[prefix + "miss_pct"] = 100 * (row["prompt_tokens_computed"] / base["prompt_tokens_computed"] - 1)
        out[prefix + "throughput_pct"] = 100 * (row["throughput_sessions_per_s"] / base["throughput_sessions_per_s"] - 1)
        out[prefix + "hit_points"] = 100 * (row["hit_rate"] - base["hit_rate"])
    return out


def median_rows(runs: list[dict]) -> dict:
    """The median of each number over the repeats of one arm."""
    row = dict(runs[0])
    for key, value in runs[0].items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            row[key] = statistics.median(r[key] for r in runs)
    if runs[0].get("evictions"):
        row["evictions"] = {k: statistics.median(r["evictions"][k] for r in runs) for k in runs[0]["evictions"]}
    return row


def main(argv: list[str] | None = None) -> int:
    stay_offline()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_workload_arguments(parser)
    parser.add_argument("--model", default=None, help="checkpoint directory (default: a tiny random Qwen3 built here)")
    parser.add_argument("--kv-tokens", type=int, nargs="+", default=[4096, 6144, 8192, 12288, 16384],
                        help="KV pool sizes to sweep, in tokens")
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    parser.add_argument("--repeats", type=int, default=1, help="turns of every arm per pool size (order rotates)")
    parser.add_argument("--max-output-tokens", type=int, default=16, help="cap on generated tokens per call")
    parser.add_argument("--max-model-len", type=int, default=4096)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--device", default="cpu", choices=("cpu", "gpu"))
    parser.add_argument("--eager", action=argparse.BooleanOptionalAction, default=True, help="--enforce-eager")
    parser.add_argument("--server-args", nargs=argparse.REMAINDER, default=[], help="more `vllm serve` arguments (last)")
    parser.add_argument("--vllm-venv", default=os.environ.get("GLMCOT_VLLM_VENV", ".venv-vllm"),
                        help="vLLM's environment (scripts/setup_vllm.sh), relative to the current folder")
    parser.add_argument("--together", action=argparse.BooleanOptionalAction, default=True,
                        help="replay the arms at the same time (default) rather than one after another, rotating")
    parser.add_argument("--quick", action="store_true", help="12 sessions, two pool sizes")
    parser.add_argument("--out", default="runs/vllm-codesign/result.json")
    args = parser.parse_args(argv)
    if args.quick:
        args.sessions, args.kv_tokens = 12, [4096, 8192]
    from rich.console import Console
    from rich.table import Table

    console = Console()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    model = Path(args.model) if args.model else build_model(out.parent / "tiny-qwen3")
    sessions, prompts = load_workload(args, out, console)
    from glmcot.llm.vllm_backend import SegmentTokenizer, local_tokenizer

    hf = local_tokenizer(str(model))
    counter = SegmentTokenizer(lambda text: hf.encode(text, add_special_tokens=False))
    folder = Path(tempfile.mkdtemp(prefix="vllm-codesign-", dir=out.parent))
    result = {"benchmark": "vllm_codesign", "argv": sys.argv[1:] if argv is None else argv, "model": str(model),
              "workload": "recorded" if args.traces else "synthetic", "arms": args.arms, "points": [],
              "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    for kv_tokens in args.kv_tokens:
        fitting = fitting_sessions(sessions, counter, max_model_len(args, kv_tokens))
        console.print(f"[bold]KV pool {kv_tokens} tokens[/bold]: {len(fitting)} of {len(sessions)} sessions fit "
                      f"{max_model_len(args, kv_tokens)} tokens; starting {len(args.arms)} servers")
        servers = [start_server(arm, args, model, kv_tokens, folder) for arm in args.arms]
        try:
            wait_ready(servers)
            runs: dict[str, list[dict]] = {arm: [] for arm in args.arms}
            for repeat in range(args.repeats):
                order = servers[repeat % len(servers):] + servers[:repeat % len(servers)]
                if args.together:  # all arms at once: the machine's slow moments fall on each alike
                    with concurrent.futures.ThreadPoolExecutor(len(order)) as pool:
                        rows = list(pool.map(lambda server: replay(server, args, model, fitting, prompts), order))
                else:
                    rows = [replay(server, args, model, fitting, prompts) for server in order]
                for server, row in zip(order, rows):
                    runs[server.name].append(row)
                    console.print(f"  {server.name:>8}: hit rate {row['hit_rate']:.3f}, computed "
                                  f"{row['prompt_tokens_computed']:.0f} tokens, {row['throughput_sessions_per_s']:.2f} "
                                  f"sessions/s, p50 {row['latency_p50_s']:.3f} s, evictions {row['evictions']}")
        finally:
            stop(servers)
        rows = {arm: median_rows(r) for arm, r in runs.items()}
        point = {"kv_pool_tokens": kv_tokens, "sessions": len(fitting), "rows": rows, "runs": runs,
                 "effects": effects(rows)}
        result["points"].append(point)
        write_json_atomic(out, result)
    keys = sorted({k for p in result["points"] for k in p["effects"]})
    result["median_effects"] = {k: statistics.median(p["effects"][k] for p in result["points"] if k in p["effects"])
                                for k in keys}
    result["paper"] = PAPER
    result["bar_met"] = (result["median_effects"].get("miss_pct", 0) < PAPER["miss_pct"]
                         and result["median_effects"].get("throughput_pct", 0) > PAPER["throughput_pct"])
    result["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    write_json_atomic(out, result)
    table = Table(title="enforce vs absent (plugin off) and observe vs absent, per KV pool size")
    for column in ("KV tokens", "hit absent", "hit enforce", "misses %", "throughput %", "observe thr. %",
                   "evictions P1/P2/P3/P4 (enforce)", "(observe = LRU)"):
        table.add_column(column)
    for point in result["points"]:
        rows, eff = point["rows"], point["effects"]

        def ev(arm):
            e = rows.get(arm, {}).get("evictions")
            return "/".join(f"{e[k]:.0f}" for k in ("p1", "p2", "p3", "p4")) if e else "n/a"

        table.add_row(str(point["kv_pool_tokens"]), f"{rows.get('absent', {}).get('hit_rate', float('nan')):.3f}",
                      f"{rows.get('enforce', {}).get('hit_rate', float('nan')):.3f}", signed(eff.get("miss_pct")),
                      signed(eff.get("throughput_pct")), signed(eff.get("observe_throughput_pct")),
                      ev("enforce"), ev("observe"))
    console.print(table)
    console.print(f"median over the sweep: {json.dumps({k: round(v, 2) for k, v in result['median_effects'].items()})}; "
                  f"paper bar (misses < {PAPER['miss_pct']} %, throughput > +{PAPER['throughput_pct']} %): "
                  f"{'met' if result['bar_met'] else 'not met'}")
    console.print(f"written {out}")
    return 0


def build_model(directory: Path) -> Path:
    from glmcot.benchmarks.tiny_checkpoint import tiny_qwen3

    return tiny_qwen3(directory)


if __name__ == "__main__":
    raise SystemExit(main())
