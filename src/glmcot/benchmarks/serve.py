"""Online serving benchmark: Poisson arrivals against POST /v1/ask, GLM vs Graph-CoT.

Starts `glmcot serve` in-process (uvicorn on a free loopback port, the native engine with the
scripted policy), then for each method and request rate sends a bounded number of questions with
exponential inter-arrival times (a Poisson process, as `vllm bench serve --request-rate`) and
measures at the client: throughput, p50/p90/p99 latency, errors. Each (method, rate) arm gets a
fresh server, so no arm inherits another's warm KV cache.

The scripted policy measures the system (tokens, calls, cache, latency), never model accuracy.

    python -m glmcot.benchmarks.serve --data DATASET_DIR --rates 0.5,1,2 --requests 40 \
        --out runs/bench/serve.json
"""

from __future__ import annotations

from glmcot.offline import stay_offline

import argparse
import asyncio
import json
import random
import statistics
import time
from pathlib import Path

import httpx

from glmcot.benchmarks.common import run_header
from glmcot.files import write_json_atomic


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[rank]


async def one(client: httpx.AsyncClient, body: dict, delay: float, out: list[dict]) -> None:
    await asyncio.sleep(delay)
    sent = time.perf_counter()
    record = {"sent": sent, "qid": body.get("qid")}
    try:
        response = await client.post("/v1/ask", json=body)
        record["status"] = response.status_code
        if response.status_code == 200:
            data = response.json()
            record.update(answer=data["answer"], failure=data["failure"],
                          llm_calls=data["usage"]["llm_calls"],
                          prompt_tokens=data["usage"]["prompt_tokens"],
                          cached_tokens=data["usage"]["cached_tokens"],
                          output_tokens=data["usage"]["output_tokens"],
                          queue_s=data["timing"]["queue_s"])
        else:
            record["error"] = response.text[:300]
    except httpx.HTTPError as exc:
        record["status"] = 0
        record["error"] = f"{type(exc).__name__}: {exc}"
    record["done"] = time.perf_counter()
    record["latency_s"] = record["done"] - sent
    out.append(record)


async def run_arm(url: str, api_key: str, graph: str, method: str, questions: list[dict],
                  rate: float, requests: int, seed: int, timeout: float) -> dict:
    rng = random.Random(seed)
    picks = [questions[rng.randrange(len(questions))] for _ in range(requests)]
    delays, t = [], 0.0
    for _ in range(requests):
        t += rng.expovariate(rate)
        delays.append(t)
    records: list[dict] = []
    limits = httpx.Limits(max_connections=requests, max_keepalive_connections=requests)
    async with httpx.AsyncClient(base_url=url, timeout=timeout, limits=limits,
                                 headers={"Authorization": f"Bearer {api_key}"}) as client:
        start = time.perf_counter()
        await asyncio.gather(*(one(client, {"question": q["question"], "qid": q["qid"],
                                            "graph": graph, "method": method}, d, records)
                               for q, d in zip(picks, delays)))
        wall = time.perf_counter() - start
        metrics_text = (await client.get("/metrics")).text
    ok = [r for r in records if r["status"] == 200]
    latencies = [r["latency_s"] for r in ok]
    gold = {q["qid"]: q.get("answer") for q in questions}
    return {
        "method": method, "rate": rate, "requests": requests, "wall_s": wall,
        "completed": len(ok), "errors": len(records) - len(ok),
        "error_samples": [r.get("error") for r in records if r["status"] != 200][:3],
        "throughput_qps": len(ok) / wall if wall else None,
        "latency_p50_s": percentile(latencies, 50), "latency_p90_s": percentile(latencies, 90),
        "latency_p99_s": percentile(latencies, 99),
        "latency_mean_s": statistics.fmean(latencies) if latencies else None,
        "queue_mean_s": statistics.fmean(r["queue_s"] for r in ok) if ok else None,
        "agent_failures": sum(1 for r in ok if r["failure"]),
        "gold_match": sum(1 for r in ok if r["answer"] == gold.get(r["qid"])),
        "llm_calls_mean": statistics.fmean(r["llm_calls"] for r in ok) if ok else None,
        "tokens_mean": statistics.fmean(r["prompt_tokens"] + r["output_tokens"] for r in ok)
        if ok else None,
        "output_tokens_mean": statistics.fmean(r["output_tokens"] for r in ok) if ok else None,
        "uncached_prompt_tokens_mean": statistics.fmean(r["prompt_tokens"] - r["cached_tokens"]
                                                        for r in ok) if ok else None,
        "cached_fraction": (sum(r["cached_tokens"] for r in ok)
                            / max(1, sum(r["prompt_tokens"] for r in ok))),
        "records": [{"qid": r.get("qid"), "status": r["status"],
                     "latency_s": round(r["latency_s"], 4), "queue_s": r.get("queue_s"),
                     "llm_calls": r.get("llm_calls"), "prompt_tokens": r.get("prompt_tokens"),
                     "failure": r.get("failure"),
                     "gold": r.get("answer") == gold.get(r.get("qid"))} for r in records],
        "engine_metrics": [line for line in metrics_text.splitlines()
                           if line.startswith("glmcot_engine_")][:40],
    }


def main(argv: list[str] | None = None) -> None:
    stay_offline()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True,
                        help="dataset dir (graph/ + questions.jsonl), e.g. from glmcot data synth")
    parser.add_argument("--model", default="random:qwen3:small",
                        help="native engine model (small: 8k positions, room for Graph-CoT prompts)")
    parser.add_argument("--rates", default="0.5,1,2", help="request rates (questions/s)")
    parser.add_argument("--requests", type=int, default=30, help="questions per arm (bounded)")
    parser.add_argument("--methods", default="glm,graphcot")
    parser.add_argument("--max-concurrency", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=300.0, help="per request, seconds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--engine-option", action="append", default=[],
                        help="EngineConfig field as KEY=JSON (repeatable), e.g. device=\"cuda\"")
    parser.add_argument("--out", type=Path, default=Path("runs/bench/serve.json"))
    args = parser.parse_args(argv)

    from rich.console import Console
    from rich.table import Table

    from glmcot.serve.config import ServeConfig
    from glmcot.serve.server import BackgroundServer

    questions_path = args.data / "questions.jsonl"
    questions = [json.loads(line) for line in questions_path.read_text().splitlines()
                 if line.strip()]
    engine_options = {}
    for item in args.engine_option:
        key, _, raw = item.partition("=")
        try:
            engine_options[key] = json.loads(raw)
        except json.JSONDecodeError:
            engine_options[key] = raw
    console = Console(stderr=True)
    rates = [float(r) for r in args.rates.split(",")]
    methods = [m.strip() for m in args.methods.split(",")]
    results = []
    for rate in rates:
        for method in methods:
            config = ServeConfig(graphs={"bench": args.data}, model=args.model,
                                 scripted=questions_path, port=0, api_key="bench-key",
                                 max_concurrency=args.max_concurrency, max_queue=10 * args.requests,
                                 timeout_s=args.timeout, engine_options=engine_options)
            console.print(f"[bold]{method}[/] at {rate:g} q/s: starting a fresh server...")
            with BackgroundServer(config, log_level="error") as server:
                arm = asyncio.run(run_arm(server.url, "bench-key", "bench", method, questions,
                                          rate, args.requests, args.seed, args.timeout))
            results.append(arm)
            console.print(f"  {arm['completed']}/{arm['requests']} ok, "
                          f"{arm['throughput_qps']:.2f} q/s, p50 {arm['latency_p50_s']}")

    table = Table(title="glmcot serve: Poisson arrivals on /v1/ask (scripted policy: measures "
                        "the system, not model accuracy)")
    for column in ("method", "rate q/s", "ok/sent", "errors", "throughput q/s", "p50 s", "p99 s",
                   "mean s", "calls/q", "tokens/q", "cached", "computed/q", "output/q"):
        table.add_column(column, justify="right")

    def fmt(value, digits=2):
        return "-" if value is None else f"{value:.{digits}f}"

    for arm in results:
        table.add_row(arm["method"], f"{arm['rate']:g}", f"{arm['completed']}/{arm['requests']}",
                      str(arm["errors"]), fmt(arm["throughput_qps"]), fmt(arm["latency_p50_s"]),
                      fmt(arm["latency_p99_s"]), fmt(arm["latency_mean_s"]),
                      fmt(arm["llm_calls_mean"], 1), fmt(arm["tokens_mean"], 0),
                      f"{arm['cached_fraction']:.0%}", fmt(arm["uncached_prompt_tokens_mean"], 0),
                      fmt(arm["output_tokens_mean"], 0))
    Console(width=160).print(table)
    for rate in rates:
        by = {a["method"]: a for a in results if a["rate"] == rate}
        if "glm" in by and "graphcot" in by and by["glm"]["latency_p50_s"]:
            print(f"rate {rate:g}: Graph-CoT/GLM p50 latency ratio "
                  f"{by['graphcot']['latency_p50_s'] / by['glm']['latency_p50_s']:.2f}x, "
                  f"p99 {by['graphcot']['latency_p99_s'] / by['glm']['latency_p99_s']:.2f}x, "
                  f"mean {by['graphcot']['latency_mean_s'] / by['glm']['latency_mean_s']:.2f}x; "
                  f"GLM/Graph-CoT throughput "
                  f"{by['glm']['throughput_qps'] / by['graphcot']['throughput_qps']:.2f}x")
    payload = {"benchmark": "serve", "version": 1, "policy": "scripted policy", **run_header(argv),
               "model": args.model, "data": str(args.data), "results": results}
    write_json_atomic(args.out, payload)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
