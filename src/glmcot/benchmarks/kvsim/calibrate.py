"""Calibrate the time model on this machine and check it against a real replay.

    python -m glmcot.benchmarks.kvsim.calibrate                         # this CPU, random:qwen3:small
    python -m glmcot.benchmarks.kvsim.calibrate --device cuda --model random:qwen3:0.6b --dtype bfloat16

1. A few measured steps of the native engine: prefill of one prompt at several lengths, decode at
   several batch sizes. Fitted: effective FLOP rate (prefill slope), effective bandwidth (decode
   slope) and the per-step overhead (decode intercept), with the model's own FLOPs and bytes as
   cost.py counts them.
2. A small trace replayed through the real engine, closed loop, timed; the same trace simulated
   with the fitted constants (native LRU cache, the engine's batching limits). Reported: both wall
   times and the relative error of the simulation.
The machine may be loaded by other work: the error includes that noise.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from glmcot.benchmarks.kvsim.backends import Limits
from glmcot.benchmarks.kvsim.cost import GPU, CostConstants, Deployment, Model
from glmcot.benchmarks.kvsim.sim import ARMS, SimConfig, simulate
from glmcot.benchmarks.kvsim.trace import Trace, TraceCall, TraceSegment, TraceSession
from glmcot.files import write_json_atomic


def synthetic_sessions(vocab: int, sessions: int, seed: int = 0) -> list[TraceSession]:
    """GLM-shaped sessions (shared agent prompts, a notebook that grows) with ids below `vocab`."""
    import random

    rng = random.Random(seed)

    def ids(n: int) -> tuple[int, ...]:
        return tuple(rng.randrange(5, vocab) for _ in range(n))

    agents = {name: ids(160) for name in ("classify", "reason", "act")}
    out = []
    for s in range(sessions):
        question, notebook, calls = ids(40), [], []
        for c, agent in enumerate(("classify", "reason", "act")):
            if c:
                notebook.append(TraceSegment(2, ids(60)))
            calls.append(TraceCall(agent, (TraceSegment(1, agents[agent]), TraceSegment(4, question), *notebook),
                                   output_tokens=24))
        out.append(TraceSession(f"q{s}", "glm", tuple(calls)))
    return out


def model_spec(engine) -> Model:
    cfg = engine.model_config
    params = sum(p.numel() for p in engine.model.parameters()) / 1e9
    return Model("calibration model", params, params, cfg.num_layers, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim,
                 cfg.hidden_size, dtype_bytes=engine.runner.kv_cache.element_size(), source="the loaded model")


def timed_step(engine) -> float:
    started = time.perf_counter()
    engine.step()
    return time.perf_counter() - started


def measure(engine, vocab: int, repeats: int) -> tuple[list[tuple[int, float]], list[tuple[int, int, float]]]:
    """(prompt tokens, prefill seconds) and (batch, context, decode seconds) points."""
    import random

    from glmcot.engine.sampling_params import SamplingParams

    rng = random.Random(1)
    prefill = []
    for n in (128, 512, 1024, 2048):
        for _ in range(repeats):
            engine.reset_prefix_cache()
            engine.add_request([rng.randrange(5, vocab) for _ in range(n)], SamplingParams(max_tokens=1, ignore_eos=True))
            prefill.append((n, timed_step(engine)))
            while engine.has_unfinished():
                engine.step()
    decode = []
    for batch in (1, 4, 16):
        engine.reset_prefix_cache()
        for _ in range(batch):
            engine.add_request([rng.randrange(5, vocab) for _ in range(256)],
                               SamplingParams(max_tokens=2 + 4 * repeats, ignore_eos=True))
        while engine.scheduler.waiting or any(r.num_computed_tokens < r.num_prompt_tokens for r in engine.scheduler.running):
            engine.step()
        times = [timed_step(engine) for _ in range(4 * repeats)]
        decode.append((batch, 258, statistics.median(times)))
        while engine.has_unfinished():
            engine.step()
    return prefill, decode


def fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of y on x."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


def replay(engine, sessions: list[TraceSession], concurrency: int) -> float:
    """The sessions through the real engine, `concurrency` in flight, no tool waits; seconds."""
    from glmcot.engine.core.request import SegmentSpan
    from glmcot.engine.sampling_params import SamplingParams

    engine.reset_prefix_cache()
    next_session, live, token = 0, {}, 7
    started = time.perf_counter()

    def send(index: int, number: int) -> None:
        nonlocal token
        call = sessions[index].calls[number]
        ids, spans, start = call.token_ids(), [], 0
        for segment in call.segments:
            spans.append(SegmentSpan(start, start + len(segment.tokens), segment.level, segment.key))
            start += len(segment.tokens)
        request = engine.add_request(ids, SamplingParams(max_tokens=call.output_tokens, ignore_eos=True,
                                                         forced_token_ids=[token] * call.output_tokens),
                                     session=f"s{index}", tokenized=(ids, spans))
        live[request.request_id] = (index, number)

    while next_session < min(concurrency, len(sessions)):
        send(next_session, 0)
        next_session += 1
    while live:
        for output in engine.step():
            index, number = live.pop(output.request_id)
            if number + 1 < len(sessions[index].calls):
                send(index, number + 1)
            else:
                engine.end_session(f"s{index}")
                if next_session < len(sessions):
                    send(next_session, 0)
                    next_session += 1
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    from glmcot.offline import stay_offline

    stay_offline()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="random:qwen3:small")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sessions", type=int, default=12)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("runs/kvsim/calibration.json"))
    args = parser.parse_args(argv)
    from glmcot.engine.config import EngineConfig
    from glmcot.engine.core.llm_engine import LLMEngine

    config = EngineConfig(model=args.model, device=args.device, dtype=args.dtype, num_threads=args.threads,
                          kv_cache_tokens=16384, max_model_len=4096, eviction_policy="lru")
    engine = LLMEngine(config)
    vocab = min(engine.model_config.vocab_size, 1200)
    prefill, decode = measure(engine, vocab, args.repeats)
    model = model_spec(engine)
    unit = Deployment(GPU("unit", 1e-12, 1e-12, 0, 1, ""), model, 1, CostConstants(mfu=1.0, mbu=1.0, step_overhead_s=0.0))
    flops = [(unit.step_time([(n, n)]), seconds) for n, seconds in prefill]  # unit peak: time == FLOPs
    bytes_read = [(unit.step_time([(1, context)] * batch), seconds) for batch, context, seconds in decode]
    overhead_p, per_flop = fit(flops)
    overhead_d, per_byte = fit(bytes_read)
    overhead = max(0.0, overhead_d)
    machine = GPU(f"{args.device} (fitted)", 1 / per_flop / 1e12, 1 / per_byte / 1e12, 0, 1,
                  "fitted by glmcot.benchmarks.kvsim.calibrate on this machine")
    # a CPU does not overlap compute with memory traffic: the fitted step adds them
    fitted = Deployment(machine, model, 1, CostConstants(mfu=1.0, mbu=1.0, step_overhead_s=overhead,
                                                         additive=args.device == "cpu"))
    sessions = synthetic_sessions(vocab, args.sessions)
    measured = replay(engine, sessions, args.concurrency)
    limits = Limits(config.block_size, config.max_num_seqs, config.max_num_batched_tokens)
    sim = simulate(sessions, ARMS["native-lru"], fitted, 16384, limits,
                   SimConfig(concurrency=args.concurrency, sessions=len(sessions), salt=False, in_order=True, tool_scale=0.0))
    error = (sim.makespan_s - measured) / measured
    result = {
        "benchmark": "kvsim-calibration", "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "model": args.model, "device": args.device, "dtype": args.dtype, "threads": args.threads,
        "prefill_points": prefill, "decode_points": decode,
        "fitted": {"flops_per_s": 1 / per_flop, "bytes_per_s": 1 / per_byte, "step_overhead_s": overhead,
                   "prefill_intercept_s": overhead_p},
        "replay": {"sessions": len(sessions), "concurrency": args.concurrency, "measured_s": measured,
                   "simulated_s": sim.makespan_s, "relative_error": error, "simulated_steps": sim.steps},
    }
    write_json_atomic(args.out, result)
    print(f"fitted on {args.device}: {1 / per_flop / 1e9:.1f} GFLOP/s effective, {1 / per_byte / 1e9:.2f} GB/s effective, "
          f"{overhead * 1e3:.1f} ms per step")
    print(f"replay of {len(sessions)} sessions ({args.concurrency} in flight): measured {measured:.2f} s, "
          f"simulated {sim.makespan_s:.2f} s, error {100 * error:+.1f} %")
    print(f"JSON: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
