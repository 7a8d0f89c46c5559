"""One real vLLM engine (offline `LLM`) under KV pressure, driven request by request; prints JSON.

    python tests/vllm/pressure_scenario.py CHECKPOINT_DIR STATS_PATH

The plugin's mode comes from GLMCOT_VLLM_PLUGIN in the environment (enforce, observe, off). The
pool holds 13 blocks of 32 tokens; a session's agent prompt (level 1, 3 blocks) and notebook
(level 2, 2 blocks) meet transient requests that need most of the pool, then probes ask for the
prompt and the notebook again and report vLLM's own cached-token counts.
"""

from __future__ import annotations

import json
import os
import sys

BLOCK = 32


def tokens(seed: int, n: int) -> list[int]:
    import random

    rng = random.Random(seed)
    return [rng.randrange(10, 2000) for _ in range(n)]


def main() -> None:
    from glmcot.offline import stay_offline

    stay_offline()
    checkpoint, stats_path = sys.argv[1], sys.argv[2]
    os.environ["GLMCOT_VLLM_STATS"] = stats_path
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    from glmcot.vllm_plugin import wire

    llm = LLM(model=checkpoint, dtype="float32", block_size=BLOCK, num_gpu_blocks_override=14, max_model_len=256,
              enforce_eager=True, enable_prefix_caching=True, seed=0, disable_log_stats=False,
              gpu_memory_utilization=0.05)
    prompt = tokens(1, 3 * BLOCK)  # level 1: shared agent prompt
    notebook = tokens(2, 2 * BLOCK)  # level 2: session s1's notebook

    results = []

    def run(name: str, ids: list[int], spans, session=None, end=False) -> None:
        params = SamplingParams(max_tokens=2, temperature=0.0, ignore_eos=True,
                                extra_args=wire.encode(spans, session, end) if spans is not None else None)
        [out] = llm.generate([TokensPrompt(prompt_token_ids=ids)], params, use_tqdm=False)
        assert out.finished, f"{name}: the request did not finish"  # every request completes, under pressure too
        results.append({"name": name, "prompt_tokens": len(ids), "cached_tokens": out.num_cached_tokens or 0,
                        "finished": out.finished, "output_tokens": len(out.outputs[0].token_ids),
                        "finish_reason": out.outputs[0].finish_reason})

    run("agent", prompt + notebook + tokens(3, BLOCK), [(1, 3 * BLOCK), (2, 2 * BLOCK), (4, BLOCK)], "s1")
    run("transient-a", tokens(4, 6 * BLOCK), [(4, 6 * BLOCK)], "s2")
    run("transient-b", tokens(5, 6 * BLOCK), [(4, 6 * BLOCK)], "s3")
    # the session is still running: its prompt and notebook should still be cached
    run("probe-running", prompt + notebook + tokens(6, BLOCK), [(1, 3 * BLOCK), (2, 2 * BLOCK), (4, BLOCK)], "s1")
    # the session ends; its notebook falls to level 3 and goes before the agent prompt
    run("end-session", prompt + notebook + tokens(7, BLOCK), [(1, 3 * BLOCK), (2, 2 * BLOCK), (4, BLOCK)], "s1", end=True)
    run("transient-c", tokens(8, 7 * BLOCK), [(4, 7 * BLOCK)], "s4")
    run("transient-d", tokens(9, 7 * BLOCK), [(4, 7 * BLOCK)], "s5")
    run("probe-prompt", prompt + tokens(10, BLOCK), [(1, 3 * BLOCK), (4, BLOCK)], "s6")
    import time

    time.sleep(1.5)  # the engine core writes its counters at most every 0.5 s
    print("RESULT " + json.dumps({"results": results}))


if __name__ == "__main__":
    main()
