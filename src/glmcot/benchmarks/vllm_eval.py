"""`glmcot eval --method glm --scripted` through `vllm serve`, with glmcot's plugin enforcing and off.

Scripted policy: system figures, not accuracy. Each arm is one fresh `vllm serve` (same model, KV
pool, block size and flags; the forcing logits processor loaded, so the scripted replies are
decoded by vLLM) with `GLMCOT_VLLM_PLUGIN=enforce` or `off` (and, with `--arms`, `observe`:
vLLM's order, the levels only counted); against it runs the command a user
runs, `glmcot eval --method glm --scripted --llm vllm+glmcot:URL` on the same questions, as its
own process, timed. Arms run one after another (the order alternates over repeats), never at the
same time: on a 2-core machine they would share the cores.

Per arm: the prompt tokens vLLM computed (its /metrics prefix-cache queries minus hits, over the
eval), the hit rate, the plugin's evicted blocks per level (enforce and observe write them; off
runs no plugin, so it has none), the eval's wall time, and the ratios to off.

    python -m glmcot.benchmarks.vllm_eval --domain dblp --questions-per-template 2 --limit 20 --kv-tokens 4096

Run it with glmcot's main environment (the eval side needs faiss); the servers come from vLLM's
environment (`--vllm-venv`, scripts/setup_vllm.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from glmcot.benchmarks import servers, vllm_codesign
from glmcot.files import write_json_atomic
from glmcot.offline import stay_offline

LABEL = "scripted policy: system figures, not accuracy"
ARMS = ("enforce", "observe", "off")  # observe: vLLM's own order with the plugin counting levels
FORCING = "glmcot.vllm_plugin.forcing:ForcedTokensLogitsProcessor"
SRC = Path(__file__).resolve().parents[2]


def glmcot_command(arguments: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The glmcot CLI as its own process (main() put this checkout's sources on PYTHONPATH)."""
    return subprocess.run([sys.executable, "-c", "from glmcot.cli import app; app()", *arguments], capture_output=True,
                          text=True, env={**os.environ, **(env or {})})


def synthetic_domain(domain: str, per_template: int, folder: Path) -> Path:
    if not (folder / "questions.jsonl").is_file():
        done = glmcot_command(["data", "synth", "-d", domain, "-o", str(folder), "-q", str(per_template), "--force"])
        if done.returncode != 0:
            raise SystemExit(f"glmcot data synth failed:\n{done.stderr[-3000:]}")
    return folder


def run_arm(arm: str, args, model: Path, data: Path, folder: Path, turn: int) -> dict:
    server = vllm_codesign.start_server(arm, args, model, args.kv_tokens, folder)
    try:
        servers.wait_ready([server])
        time.sleep(0.6)
        before = vllm_codesign.prefix_counters(server.url)
        out = folder / f"eval-{arm}-{turn}"
        started = time.perf_counter()
        done = glmcot_command(
            ["eval", "--method", "glm", "--scripted", "--llm", f"vllm+glmcot:{server.url}/v1", "--llm-model", "bench",
             "--questions", str(data / "questions.jsonl"), "--graph", str(data / "graph"), "--out", str(out),
             "--limit", str(args.limit), "--concurrency", str(args.concurrency), "--no-judge", "--fresh", "--json"],
            {"GLMCOT_LLM_TOKENIZER": str(model)})
        wall = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"{arm}: glmcot eval failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
        time.sleep(0.6)  # the engine core writes the plugin's counters at most every 0.5 s
        after = vllm_codesign.prefix_counters(server.url)
        evictions = vllm_codesign.plugin_evictions(server)
    finally:
        servers.stop([server])
    rows = [json.loads(line) for line in (out / "glm.jsonl").read_text().splitlines() if line.strip()]
    summary = json.loads((out / "summary.json").read_text())["methods"]["glm"]
    queries, hits = after["queries"] - before["queries"], after["hits"] - before["hits"]
    return {
        "arm": arm, "turn": turn, "wall_s": wall, "questions": len(rows),
        "backend_errors": sum(1 for row in rows if row.get("failure") == "backend_error"),
        # the gold answers come out only if every forced reply came back exactly: a check, not accuracy
        "exact_answers": sum(1 for row in rows if row.get("em_exact")), "llm_calls": summary["llm_calls_per_question"] * len(rows),
        "prefix_queries": queries, "prefix_hits": hits, "computed_tokens": queries - hits,
        "hit_rate": hits / queries if queries else 0.0, "evictions": evictions,
    }


def pooled(runs: list[dict], arm: str) -> dict:
    mine = [run for run in runs if run["arm"] == arm]
    total = {key: sum(run[key] for run in mine) for key in ("wall_s", "prefix_queries", "prefix_hits", "computed_tokens",
                                                              "questions", "backend_errors", "exact_answers", "llm_calls")}
    total["hit_rate"] = total["prefix_hits"] / total["prefix_queries"] if total["prefix_queries"] else 0.0
    levels: dict[str, int] | None = None
    for run in mine:
        if run["evictions"] is not None:
            levels = levels or {}
            for name, count in run["evictions"].items():
                levels[name] = levels.get(name, 0) + count
    total["evictions"] = levels
    return total


def ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def print_table(result: dict) -> None:
    print(f"glmcot eval --method glm --scripted through vllm serve ({LABEL}); "
          f"KV pool {result['kv_tokens']} tokens, {result['questions']} questions x {result['repeats']} turn(s)")
    print(f"{'arm':8} {'questions':>9} {'calls':>6} {'errors':>6} {'gold':>5} {'prompt tok queried':>18} {'hits':>8} {'computed':>9} "
          f"{'hit rate':>8} {'wall s':>7}  evictions p1/p2/p3/p4")
    for arm, row in result["arms"].items():
        levels = row["evictions"]
        evicted = "/".join(str(levels.get(k, 0)) for k in ("p1", "p2", "p3", "p4")) if levels else "- (no plugin)"
        print(f"{arm:8} {row['questions']:9d} {row['llm_calls']:6.0f} {row['backend_errors']:6d} {row['exact_answers']:5d} "
              f"{row['prefix_queries']:18,.0f} "
              f"{row['prefix_hits']:8,.0f} {row['computed_tokens']:9,.0f} {row['hit_rate']:8.3f} {row['wall_s']:7.1f}  {evicted}")
    for pair, values in result["ratios"].items():
        print(f"{pair}: " + ", ".join(f"{key} {'n/a' if value is None else f'{value:.3f}'}" for key, value in values.items()))


def one_pool(args, kv_tokens: int, model: Path, data: Path, folder: Path) -> dict:
    """Both arms at one KV pool size, `repeats` turns each."""
    args.kv_tokens = kv_tokens  # what vllm_codesign's server start reads
    runs = []
    for turn in range(args.repeats):
        for arm in (args.arms if turn % 2 == 0 else tuple(reversed(args.arms))):
            runs.append(run_arm(arm, args, model, data, folder, turn))
            print(f"{kv_tokens} tokens, turn {turn}, {arm}: {runs[-1]['computed_tokens']:,.0f} prompt tokens computed, "
                  f"{runs[-1]['wall_s']:.1f} s", file=sys.stderr)
    arms = {arm: pooled(runs, arm) for arm in args.arms}
    ratios = {}
    for arm in ("enforce", "observe"):  # observe/off: the plugin's overhead and this run's noise floor
        if arm in arms and "off" in arms:
            ratios[f"{arm}/off"] = {key: ratio(arms[arm][field], arms["off"][field]) for key, field in
                                    (("prompt tokens computed", "computed_tokens"), ("prefix hits", "prefix_hits"),
                                     ("wall time", "wall_s"))}
    return {"kv_tokens": kv_tokens, "questions": args.limit, "repeats": args.repeats, "arms": arms, "runs": runs,
            "ratios": ratios}


def main(argv: list[str] | None = None) -> int:
    stay_offline()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None, help="checkpoint directory (default: a tiny random Qwen3 built here)")
    parser.add_argument("--data", default=None, help="a glmcot data synth folder (default: made with --domain)")
    parser.add_argument("--domain", default="dblp")
    parser.add_argument("--questions-per-template", type=int, default=2)
    parser.add_argument("--limit", type=int, default=20, help="questions per arm")
    parser.add_argument("--concurrency", type=int, default=4, help="questions in flight")
    parser.add_argument("--kv-tokens", type=int, nargs="+", default=[2048], help="KV pool sizes (tokens, 32 per block)")
    parser.add_argument("--max-model-len", type=int, default=4096, help="capped at the pool size")
    parser.add_argument("--repeats", type=int, default=1, help="turns of every arm (order alternates)")
    parser.add_argument("--arms", nargs="+", default=["enforce", "off"], choices=ARMS)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--device", default="cpu", choices=("cpu", "gpu"))
    parser.add_argument("--eager", action=argparse.BooleanOptionalAction, default=True, help="--enforce-eager")
    parser.add_argument("--vllm-venv", default=os.environ.get("GLMCOT_VLLM_VENV", ".venv-vllm"))
    parser.add_argument("--out", default="runs/vllm-eval/result.json")
    args = parser.parse_args(argv)
    # the servers import the forcing processor (and the plugin) from this checkout too
    os.environ["PYTHONPATH"] = os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])
    # what vllm_codesign's server start reads: the forcing processor rides on the servers' flags
    args.server_args = ["--logits-processors", FORCING]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="vllm-eval-", dir=out.parent))
    if args.model:
        model = Path(args.model)
    else:
        from glmcot.benchmarks.tiny_checkpoint import tiny_qwen3

        model = tiny_qwen3(out.parent / "tiny-qwen3")
    data = Path(args.data) if args.data else synthetic_domain(args.domain, args.questions_per_template,
                                                             out.parent / f"data-{args.domain}")
    points = [one_pool(args, kv_tokens, model, data, folder) for kv_tokens in args.kv_tokens]
    result = {
        "label": LABEL, "command": "python -m glmcot.benchmarks.vllm_eval " + " ".join(argv if argv is not None else sys.argv[1:]),
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "model": str(model), "data": str(data),
        "questions": args.limit, "concurrency": args.concurrency, "repeats": args.repeats, "points": points,
    }
    write_json_atomic(out, result)
    for point in points:
        print_table(point)
    print(f"JSON: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
