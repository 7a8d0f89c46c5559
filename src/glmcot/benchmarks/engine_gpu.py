"""Decode throughput against the memory-bandwidth bound, batch 1..128 (the engine issue's GPU run).

For each batch size B: B prompts of --context tokens are prefilled (not timed), then --steps
decode steps are timed on this engine and, on the very same weights, in transformers' batched
`generate` (equal-length prompts: no padding). Decode tokens/s are compared with the bound set
by the bytes one step must read, weights + every sequence's KV, over --bandwidth (H200: 4.8 TB/s
peak; 4.3 TB/s is the figure the issue uses):

    bound tok/s = B / ((weight bytes + B * (context + steps/2) * KV bytes per token) / bandwidth)

Prints a table and writes JSON. Meant for a GPU:

    python -m glmcot.benchmarks.engine_gpu --model random:qwen3:8b --dtype bfloat16 --device cuda

and runs anywhere for a check of the mechanics:

    python -m glmcot.benchmarks.engine_gpu --model random:qwen3:tiny --device cpu --batches 1,4 --context 64 --steps 8
"""

from __future__ import annotations

from glmcot.offline import stay_offline

import argparse
import random
import time
from pathlib import Path

from glmcot.benchmarks.common import run_header
from glmcot.files import write_json_atomic


def synchronize(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def engine_decode(llm, batch: int, context: int, steps: int, vocab: int, device: str) -> float:
    """Seconds for `steps` decode steps of `batch` sequences at `context` tokens."""
    from glmcot.engine import SamplingParams

    engine = llm.engine
    engine.reset_prefix_cache()
    rng = random.Random(batch)
    for _ in range(batch):
        engine.add_request([rng.randrange(10, vocab) for _ in range(context)],
                           SamplingParams(max_tokens=steps + 1, ignore_eos=True))
    while any(r.num_output_tokens == 0 for r in engine.requests.values()):
        engine.step()  # prefill (and the first token)
    synchronize(device)
    started = time.perf_counter()
    for _ in range(steps):
        engine.step()
    synchronize(device)
    elapsed = time.perf_counter() - started
    while engine.has_unfinished():
        engine.step()
    return elapsed


def hf_decode(model, batch: int, context: int, steps: int, vocab: int, device: str) -> float:
    """Seconds between the first and the last of `steps` + 1 generated tokens."""
    import torch
    from transformers import LogitsProcessorList

    stamps: list[float] = []

    def clock(input_ids, scores):
        synchronize(device)
        stamps.append(time.perf_counter())
        return scores

    rng = random.Random(batch)
    ids = torch.tensor([[rng.randrange(10, vocab) for _ in range(context)] for _ in range(batch)], device=device)
    with torch.inference_mode():
        model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=steps + 1, do_sample=False,
                       eos_token_id=None, pad_token_id=0, logits_processor=LogitsProcessorList([clock]))
    return stamps[-1] - stamps[0]


def main(argv: list[str] | None = None) -> None:
    stay_offline()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="random:qwen3:8b")
    parser.add_argument("--dtype", default="bfloat16", choices=("float32", "bfloat16", "float16"))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batches", default="1,2,4,8,16,32,64,128")
    parser.add_argument("--context", type=int, default=512, help="prompt tokens per sequence")
    parser.add_argument("--steps", type=int, default=32, help="decode steps timed per batch size")
    parser.add_argument("--bandwidth", type=float, default=4.3e12, help="bytes/s of the bound")
    parser.add_argument("--skip-hf", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/bench/engine_gpu.json")
    args = parser.parse_args(argv)
    import torch
    from rich.console import Console
    from rich.table import Table

    from glmcot.engine import LLM, EngineConfig
    from glmcot.engine.core.model_runner import kv_bytes_per_token
    from glmcot.engine.models.random_models import transformers_model

    batches = [int(b) for b in args.batches.split(",")]
    console = Console()
    longest = args.context + args.steps + 2
    llm = LLM(EngineConfig(model=args.model, dtype=args.dtype, device=args.device, seed=args.seed,
                           max_num_seqs=max(batches), max_num_batched_tokens=max(8192, args.context),
                           kv_cache_tokens=max(batches) * (longest + 16), max_model_len=longest + 16))
    model = llm.engine.model
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    weight_bytes += sum(getattr(m, "packed", None).numel() * model.embed_tokens.weight.element_size()
                        for m in model.modules() if getattr(m, "packed", None) is not None)
    kv_token = kv_bytes_per_token(model, getattr(torch, args.dtype))
    vocab = min(llm.engine.model_config.vocab_size, 150000)
    hf = None if args.skip_hf else transformers_model(args.model, args.seed, getattr(torch, args.dtype), args.device)
    rows = []
    for batch in batches:
        engine_s = engine_decode(llm, batch, args.context, args.steps, vocab, args.device)
        hf_s = hf_decode(hf, batch, args.context, args.steps, vocab, args.device) if hf is not None else None
        step_bytes = weight_bytes + batch * (args.context + args.steps / 2) * kv_token
        bound = batch / (step_bytes / args.bandwidth)
        engine_tps = batch * args.steps / engine_s
        rows.append({"batch": batch, "engine_tok_s": engine_tps, "bound_tok_s": bound, "engine_of_bound": engine_tps / bound,
                     "transformers_tok_s": batch * args.steps / hf_s if hf_s else None,
                     "engine_over_transformers": hf_s / engine_s if hf_s else None, "step_bytes": step_bytes})
        console.print(f"batch {batch}: engine {engine_tps:,.0f} tok/s ({engine_tps / bound:.0%} of the bound)"
                      + (f", transformers {batch * args.steps / hf_s:,.0f} tok/s" if hf_s else ""))
    table = Table(title=f"Decode, {args.model} {args.dtype} on {args.device}, context {args.context}")
    for col in ("batch", "engine tok/s", "bound tok/s", "of bound", "transformers tok/s", "engine / transformers"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(str(r["batch"]), f"{r['engine_tok_s']:,.0f}", f"{r['bound_tok_s']:,.0f}", f"{r['engine_of_bound']:.0%}",
                      "-" if r["transformers_tok_s"] is None else f"{r['transformers_tok_s']:,.0f}",
                      "-" if r["engine_over_transformers"] is None else f"{r['engine_over_transformers']:.2f}x")
    console.print(table)
    device_name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
    out = Path(args.out)
    write_json_atomic(out, {**run_header(argv), "device": device_name, "settings": vars(args), "weight_bytes": weight_bytes,
                     "kv_bytes_per_token": kv_token, "rows": rows})
    console.print(f"wrote {out}")


if __name__ == "__main__":
    main()
