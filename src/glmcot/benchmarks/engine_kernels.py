"""The CPU kernel choices behind the engine's fast paths, measured side by side in one process.

  1. GEMM layout of the projections of a Qwen3-0.6B-shaped layer stack (28 layers x q/k/v, o,
     gate/up, down) at decode and prefill batch sizes: plain `F.linear` on [out, in], an
     [in, out] copy (`x @ W_t`), and oneDNN's prepacked weight (what the engine uses on CPU).
  2. Prefill attention through `scaled_dot_product_attention`: 3-D inputs (torch falls back to
     the unfused math kernel) against 4-D (torch's CPU flash kernel).
  3. Decode steps of the real engine at long contexts: the compiled CPU kernels (the default:
     paged decode attention, RMSNorm, rotary) against the PyTorch path with long block runs
     attended in place, and against gathering every block (`MIN_RUN_BLOCKS` out of reach).

Every arm of a comparison alternates with the others, several rounds; the median counts. On a
shared machine only the ratios mean something.

  python -m glmcot.benchmarks.engine_kernels                 # about 3 minutes on 2 cores
  python -m glmcot.benchmarks.engine_kernels --dtype bfloat16
"""

from __future__ import annotations

from glmcot.offline import stay_offline

import argparse
import statistics
import time
from pathlib import Path

from glmcot.benchmarks.common import run_header
from glmcot.files import write_json_atomic

SHAPES = [(4096, 1024), (1024, 2048), (6144, 1024), (1024, 3072)]  # Qwen3-0.6B: qkv, o, gate_up, down


def timed(fn, rounds: int) -> float:
    fn()
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def interleaved(arms: dict, rounds: int) -> dict[str, float]:
    """Median seconds per arm, the arms taking turns."""
    for fn in arms.values():
        fn()
    samples: dict[str, list[float]] = {name: [] for name in arms}
    for _ in range(rounds):
        for name, fn in arms.items():
            started = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in samples.items()}


def gemm_layouts(dtype, rounds: int) -> list[dict]:
    import torch
    import torch.nn.functional as F

    from glmcot.engine.layers.linear import onednn_available, pack, packed_linear, transposed

    weights = [torch.randn(o, i, dtype=torch.float32).mul_(0.02).to(dtype) for o, i in SHAPES]
    flipped = [transposed(w) for w in weights]
    packed = [pack(w) for w in weights] if onednn_available(dtype) else None
    rows = []
    for m in (1, 12, 64, 512):
        inputs = [torch.randn(m, i).to(dtype) for _, i in SHAPES]
        arms = {"F.linear [out,in]": lambda: [F.linear(x, w) for x, w in zip(inputs, weights)],
                "x @ W_t [in,out]": lambda: [x @ w for x, w in zip(inputs, flipped)]}
        if packed:
            arms["oneDNN prepacked"] = lambda: [packed_linear(x, w, None) for x, w in zip(inputs, packed)]
        with torch.inference_mode():
            result = interleaved(arms, rounds)
        rows.append({"rows": m, **{name: seconds * 28 for name, seconds in result.items()}})  # x 28 layers
    return rows


def prefill_attention(dtype, rounds: int) -> dict:
    import torch
    import torch.nn.functional as F

    q = torch.randn(16, 512, 128).to(dtype)
    k, v = torch.randn(8, 512, 128).to(dtype), torch.randn(8, 512, 128).to(dtype)
    arms = {"3-D (math kernel)": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
            "4-D (flash kernel)": lambda: F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True,
                                                                         enable_gqa=True)}
    with torch.inference_mode():
        result = interleaved(arms, rounds)
    return {name: seconds * 28 for name, seconds in result.items()}  # one 512-token prompt, 28 layers


def decode_steps(model: str, dtype: str, rounds: int) -> dict:
    import random

    from glmcot.engine import LLM, EngineConfig, SamplingParams
    from glmcot.engine.core import model_runner
    from glmcot.engine.kernels import cpu_kernels
    from glmcot.engine.layers.norm import RMSNorm
    from glmcot.engine.models.decoder import Attention

    llm = LLM(EngineConfig(model=model, dtype=dtype, kv_cache_tokens=24576, max_num_seqs=12, max_model_len=2048))
    rng = random.Random(0)
    engine = llm.engine
    for _ in range(12):
        engine.add_request([rng.randrange(100, 150000) for _ in range(rng.randint(1000, 1500))],
                           SamplingParams(max_tokens=4 * rounds + 16, ignore_eos=True))
    while any(r.num_computed_tokens < r.num_prompt_tokens for r in engine.requests.values()):
        engine.step()
    default = model_runner.MIN_RUN_BLOCKS
    kernels, runner = cpu_kernels(), engine.runner
    attention_kernel = runner.decode_kernel

    def bind(compiled: bool, run_limit: int) -> None:
        use = compiled and kernels is not None
        for module in runner.model.modules():  # what ModelRunner binds, switched per arm
            if isinstance(module, RMSNorm):
                module.kernel = kernels.rms_norm if use else None
            elif isinstance(module, Attention):
                module.rotary_kernel = kernels.rotary_ if use else None
        runner.decode_kernel = attention_kernel if use else None
        model_runner.MIN_RUN_BLOCKS = run_limit

    def arm(compiled: bool, run_limit: int):
        def step() -> None:
            bind(compiled, run_limit)
            engine.step()
        return step

    arms = {"PyTorch, runs in place": arm(False, default), "PyTorch, gather every block": arm(False, 1 << 30)}
    if kernels is not None:
        arms = {"C++ kernels (default)": arm(True, default), **arms}
    try:
        result = interleaved(arms, rounds)
    finally:
        bind(True, default)  # leave the engine as it was built
    return result


def main(argv: list[str] | None = None) -> None:
    stay_offline()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    parser.add_argument("--model", default="random:qwen3:0.6b", help="model of the decode-step comparison")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", default="runs/bench/engine_kernels.json")
    args = parser.parse_args(argv)
    import torch
    from rich.console import Console
    from rich.table import Table

    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    console = Console()
    gemm = gemm_layouts(dtype, args.rounds)
    table = Table(title=f"Projection GEMMs of 28 Qwen3-0.6B layers, {args.dtype}, ms")
    table.add_column("rows (batch)", justify="right")
    for name in gemm[0]:
        if name != "rows":
            table.add_column(name, justify="right")
    for row in gemm:
        table.add_row(str(row["rows"]), *(f"{v * 1e3:.1f}" for k, v in row.items() if k != "rows"))
    console.print(table)
    attention = prefill_attention(dtype, args.rounds)
    console.print("prefill attention, one 512-token prompt x 28 layers: " +
                  ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in attention.items()))
    decode = decode_steps(args.model, args.dtype, args.rounds)
    console.print("decode step, 12 sequences at 1,000-1,500 tokens of context: " +
                  ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in decode.items()))
    out = Path(args.out)
    write_json_atomic(out, {**run_header(argv), "dtype": args.dtype, "threads": torch.get_num_threads(), "gemm_ms_28_layers": gemm,
                     "prefill_attention_s": attention, "decode_step_s": decode})
    console.print(f"wrote {out}")


if __name__ == "__main__":
    main()
