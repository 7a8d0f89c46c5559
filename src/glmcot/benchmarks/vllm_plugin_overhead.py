"""The glmcot vLLM plugin's bookkeeping cost, measured inside vLLM's own KVCacheManager (no model).

Drives vLLM 0.32's KVCacheManager the way its scheduler does (prefix lookup, allocation, caching,
free) for the same seeded stream of requests (shared level-1 prompts, per-session notebooks,
transient tails, sessions that end) under pool pressure, with the plugin absent, observing and
enforcing, in alternating turns, and reports CPU time per request: what the plugin adds to the
scheduler's KV bookkeeping. Run it with vLLM's environment (scripts/setup_vllm.sh):

    .venv-vllm/bin/python -m glmcot.benchmarks.vllm_plugin_overhead
"""

from __future__ import annotations

from glmcot.offline import stay_offline

import argparse
import json
import random
import statistics
import time


def make_manager(num_blocks: int, block_size: int, mode: str):
    import torch
    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec

    from glmcot.vllm_plugin.hooks import attach
    from glmcot.vllm_plugin.settings import Mode, Settings

    spec = FullAttentionSpec(block_size=block_size, num_kv_heads=1, head_size=1, dtype=torch.float32)
    config = KVCacheConfig(num_blocks=num_blocks + 1, kv_cache_tensors=[], kv_cache_groups=[KVCacheGroupSpec(["l"], spec)])
    manager = KVCacheManager(config, max_model_len=1 << 16, scheduler_block_size=block_size, hash_block_size=block_size,
                             enable_caching=True, log_stats=True)
    if mode != "absent":
        attach(manager, Settings(mode=Mode(mode)), write_stats=False)
    return manager


def workload(seed: int, count: int):
    """(tokens, spans, session, end) per request: 8 agent prompts, 64 sessions of 6 calls."""
    from glmcot.vllm_plugin import wire

    rng = random.Random(seed)
    prompts = [[rng.randrange(1, 30000) for _ in range(rng.randrange(600, 1400))] for _ in range(8)]
    notebooks: dict[int, list[int]] = {}
    calls: dict[int, int] = {}
    out = []
    for _ in range(count):
        session = rng.randrange(64)
        notebook = notebooks.setdefault(session, [])
        notebook += [rng.randrange(1, 30000) for _ in range(rng.randrange(50, 200))]
        prompt = prompts[session % 8]
        tail = [rng.randrange(1, 30000) for _ in range(rng.randrange(20, 80))]
        calls[session] = calls.get(session, 0) + 1
        end = calls[session] == 6
        if end:
            notebooks.pop(session)
            calls.pop(session)
        spans = [(1, len(prompt)), (2, len(notebook)), (4, len(tail))]
        out.append((prompt + notebook + tail, wire.encode(spans, f"s{session}-{len(out) // 10000}", end)))
    return out


def run(manager, requests, block_size: int) -> float:
    from vllm import SamplingParams
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    from vllm.v1.request import Request, RequestStatus

    init_none_hash(sha256)
    hasher = get_request_block_hasher(block_size, sha256)
    prepared = [Request(f"r{i}", tokens, SamplingParams(max_tokens=1, extra_args=xargs), None, block_hasher=hasher)
                for i, (tokens, xargs) in enumerate(requests)]
    started = time.process_time()
    for request in prepared:
        blocks, cached, _ = manager.get_computed_blocks(request)
        manager.record_prefix_cache_stats(request, cached)
        manager.allocate_slots(request, request.num_tokens - cached, cached, blocks)
        request.num_computed_tokens = request.num_tokens
        request.status = RequestStatus.FINISHED_STOPPED
        manager.free(request)
    return (time.process_time() - started) / len(prepared)


def main(argv: list[str] | None = None) -> int:
    stay_offline()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--blocks", type=int, default=2048, help="pool size in blocks")
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    requests = workload(0, args.requests)
    arms = ("absent", "observe", "enforce")
    times: dict[str, list[float]] = {arm: [] for arm in arms}
    hits: dict[str, float] = {}
    for repeat in range(args.repeats):
        for arm in arms[repeat % 3:] + arms[:repeat % 3]:
            manager = make_manager(args.blocks, args.block_size, arm)
            times[arm].append(run(manager, requests, args.block_size))
            stats = manager.make_prefix_cache_stats()
            hits[arm] = stats.hits / stats.queries
    medians = {arm: statistics.median(v) for arm, v in times.items()}
    result = {"requests": args.requests, "blocks": args.blocks, "block_size": args.block_size, "repeats": args.repeats,
              "cpu_us_per_request": {arm: round(1e6 * v, 1) for arm, v in medians.items()},
              "overhead_pct": {arm: round(100 * (medians[arm] / medians["absent"] - 1), 1) for arm in ("observe", "enforce")},
              "prefix_hit_rate": {arm: round(v, 4) for arm, v in hits.items()}}
    print(json.dumps(result, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
