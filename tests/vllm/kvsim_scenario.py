"""A kvsim trace sent, call by call in the trace's order, to one real vLLM engine; prints JSON.

    python tests/vllm/kvsim_scenario.py CHECKPOINT_DIR TRACE_FILE NUM_BLOCKS STATS_PATH

The plugin's mode comes from GLMCOT_VLLM_PLUGIN (enforce, observe, off). Each call carries its
levels, session and (on a session's last call) the session end, as glmcot's client sends them,
and generates exactly its recorded output tokens. Reports vLLM's own cached-token count per call.
"""

from __future__ import annotations

import json
import os
import sys

BLOCK = 32


def main() -> None:
    from glmcot.offline import stay_offline

    stay_offline()
    checkpoint, trace_path, num_blocks, stats_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    os.environ["GLMCOT_VLLM_STATS"] = stats_path
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    from glmcot.benchmarks.kvsim.trace import read_trace
    from glmcot.vllm_plugin import wire

    trace = read_trace(trace_path)
    llm = LLM(model=checkpoint, dtype="float32", block_size=BLOCK, num_gpu_blocks_override=num_blocks + 1,
              max_model_len=num_blocks * BLOCK, enforce_eager=True, enable_prefix_caching=True, seed=0, gpu_memory_utilization=0.05)
    calls = []
    for session in trace.sessions:
        for number, call in enumerate(session.calls):
            end = number == len(session.calls) - 1
            spans = [(segment.level, len(segment.tokens)) for segment in call.segments]
            params = SamplingParams(max_tokens=call.output_tokens, temperature=0.0, ignore_eos=True,
                                    extra_args=wire.encode(spans, session.session, end))
            [out] = llm.generate([TokensPrompt(prompt_token_ids=call.token_ids())], params, use_tqdm=False)
            assert out.finished and len(out.outputs[0].token_ids) == call.output_tokens
            calls.append({"session": session.session, "call": number, "prompt_tokens": call.prompt_tokens,
                          "cached_tokens": out.num_cached_tokens or 0})
    import time

    time.sleep(1.5)  # the engine core writes the plugin's counters at most every 0.5 s
    print("RESULT " + json.dumps({"calls": calls}))


if __name__ == "__main__":
    main()
